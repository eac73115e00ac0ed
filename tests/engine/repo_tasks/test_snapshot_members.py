"""Hostile tar.gz snapshots, checked in the web process before anything is stored: every one is refused
with a SnapshotError that names the member, and the check's memory stays small (a PAX or GNU long-name
header of hundreds of MiB compresses to a few hundred kB and tarfile would read it whole)."""

import gzip
import io
import resource
import tarfile

import pytest

from engine.repo_tasks import snapshots

HEADER_BOMB_BYTES = 256 << 20


def archive(members, *, format=tarfile.PAX_FORMAT):
    """A tar.gz of ``members``: (TarInfo fields, content) pairs, written as given."""
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb") as zipped, tarfile.open(fileobj=zipped, mode="w", format=format) as tar:
        for fields, content in members:
            info = tarfile.TarInfo(fields.pop("name"))
            for key, value in fields.items():
                setattr(info, key, value)
            info.size = len(content) if info.type in (tarfile.REGTYPE, tarfile.AREGTYPE) else 0
            tar.addfile(info, io.BytesIO(content) if content else None)
    return raw.getvalue()


def header_bomb(kind):
    """One extended header (PAX or GNU long name) of HEADER_BOMB_BYTES zeros, then the end blocks."""
    info = tarfile.TarInfo("././@LongLink")
    info.type, info.size = kind, HEADER_BOMB_BYTES
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9) as zipped:
        zipped.write(info.tobuf(format=tarfile.USTAR_FORMAT))
        for _ in range(HEADER_BOMB_BYTES >> 20):
            zipped.write(bytes(1 << 20))
        zipped.write(bytes(1024))
    return raw.getvalue()


def refused(data, *words):
    with pytest.raises(snapshots.SnapshotError) as raised:
        snapshots.inspect(data)
    for word in words:
        assert word in str(raised.value)
    return str(raised.value)


FILE = {"type": tarfile.REGTYPE}
HOSTILE = {
    "absolute name in a PAX header": [({"name": "ok.py", "pax_headers": {"path": "/etc/cron.d/x"}, **FILE}, b"x")],
    "parent in a PAX header": [({"name": "ok.py", "pax_headers": {"path": "a/../../x"}, **FILE}, b"x")],
    "NUL in a PAX path": [({"name": "ok.py", "pax_headers": {"path": "a\x00b.py"}, **FILE}, b"x")],
    "newline in a name": [({"name": "a\nb.py", **FILE}, b"x")],
    "hardlink to outside": [
        ({"name": "a.py", **FILE}, b"x"),
        ({"name": "b.py", "type": tarfile.LNKTYPE, "linkname": "/etc/passwd"}, b""),
    ],
    "symlink": [({"name": "a.py", "type": tarfile.SYMTYPE, "linkname": "../../etc/passwd"}, b"")],
    "device": [({"name": "zero", "type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 5}, b"")],
    "duplicate name": [({"name": "a.py", **FILE}, b"honest"), ({"name": "a.py", **FILE}, b"hostile")],
    "dot-slash duplicate": [({"name": "a.py", **FILE}, b"honest"), ({"name": "./a.py", **FILE}, b"hostile")],
    "NFC and NFD spellings": [({"name": "caf\u00e9.py", **FILE}, b"1"), ({"name": "cafe\u0301.py", **FILE}, b"2")],
    "file then folder of that name": [({"name": "tests", **FILE}, b"x"), ({"name": "tests/test_a.py", **FILE}, b"y")],
    "folder then file of that name": [({"name": "tests/test_a.py", **FILE}, b"y"), ({"name": "tests", **FILE}, b"x")],
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_member_is_refused_by_name(name):
    message = refused(archive([(dict(fields), content) for fields, content in HOSTILE[name]]), "snapshot")
    assert "damaged" not in message and "not a tar.gz" not in message, message


def test_non_utf8_names_are_refused():
    refused(archive([({"name": "a\udcff.py", **FILE}, b"x")], format=tarfile.GNU_FORMAT), "not UTF-8")


@pytest.mark.parametrize("kind", [tarfile.XHDTYPE, tarfile.GNUTYPE_LONGNAME], ids=["pax", "gnu-longname"])
def test_a_header_bomb_is_refused_without_reading_it_into_memory(kind):
    data = header_bomb(kind)
    assert len(data) < 2 << 20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    refused(data, "header over")
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) >> 10
    assert grown_mib < HEADER_BOMB_BYTES >> 21, grown_mib  # reading the header whole would grow by 256 MiB


def test_an_honest_snapshot_with_folders_and_unicode_names_still_passes():
    data = snapshots.build_from_files({"src/caf\u00e9.py": b"x = 1\n", "src/b.py": b"", "tests/test_a.py": b"pass\n"})
    assert snapshots.inspect(data).files == ("src/b.py", "src/caf\u00e9.py", "tests/test_a.py")
    folders = [({"name": "src", "type": tarfile.DIRTYPE}, b""), ({"name": "src/", "type": tarfile.DIRTYPE}, b"")]
    assert snapshots.inspect(archive([*folders, ({"name": "src/a.py", **FILE}, b"1")])).files == ("src/a.py",)
