"""An uploaded git bundle read into a snapshot's files, inside the sandbox (standard library only).

Run by the sandbox as ``__main__`` with a JSON request on stdin: ``{"bundle": base64, "max_files",
"max_bytes"}``. It prints one JSON line: ``{"archive": base64 of a tar.gz of the files at the bundle's
HEAD}`` or ``{"error": "what is wrong with the bundle"}``. Every upload is hostile: the header is read
here before git sees the file (a gitfile or a path would make git read a local repository: refused), a
bundle with prerequisites or a v3 filter is refused, and git only ever reads the bundle file: ``git init
--bare``, ``git bundle verify``, ``git fetch`` of one ref from the file, with no hooks, no global or system
configuration, fsck of every object, and no transport but the file. The sandbox holds nothing of the
server's (no repository, settings or environment), so even a git bug finds nothing to read.
"""

import base64
import io
import json
import os
import re
import subprocess
import sys
import tarfile

SIGNATURES = {b"# v2 git bundle\n": 2, b"# v3 git bundle\n": 3}
MAX_HEADER_BYTES = 1 << 20
MAX_REFS = 10_000
OBJECT_FORMATS = {"sha1": 40, "sha256": 64}
REF_NAME = re.compile(r"^(HEAD|refs/[A-Za-z0-9._/+@-]{1,240})$")
GIT_SECONDS = 45


class BundleError(Exception):
    """The upload is not a bundle Passband reads; the message says why, naming nothing of the server."""


def read_header(data):
    """``(object format, {ref name: object id})`` from a bundle's header; raises BundleError."""
    version = next((number for signature, number in SIGNATURES.items() if data.startswith(signature)), None)
    if version is None:
        raise BundleError("not a git bundle: it must begin with '# v2 git bundle' or '# v3 git bundle'")
    end = data.find(b"\n\n", 0, MAX_HEADER_BYTES)
    if end < 0:
        raise BundleError("the bundle's header does not end (no blank line within 1 MiB)")
    try:
        lines = data[: end + 1].decode("ascii").split("\n")[1:-1]
    except UnicodeDecodeError:
        raise BundleError("the bundle's header is not ASCII") from None
    object_format, refs = "sha1", {}
    for number, line in enumerate(lines, start=2):
        if line.startswith("@") and version == 3:
            key, _, value = line[1:].partition("=")
            if key == "object-format" and value in OBJECT_FORMATS:
                object_format = value
            elif key == "filter":
                raise BundleError("a bundle with a filter (a partial history) is refused: bundle the whole history")
            else:
                raise BundleError(f"header line {number}: unknown capability {line[:80]!r}")
        elif line.startswith("-"):
            raise BundleError(
                "the bundle has prerequisites (it needs commits it does not contain): create it with --all or HEAD"
            )
        else:
            object_id, _, name = line.partition(" ")
            if len(object_id) != OBJECT_FORMATS[object_format] or not re.fullmatch(r"[0-9a-f]+", object_id):
                raise BundleError(f"header line {number}: not '<object id> <ref name>'")
            if not REF_NAME.match(name) or ".." in name:
                raise BundleError(f"header line {number}: not a ref name git accepts: {name[:80]!r}")
            refs[name] = object_id
            if len(refs) > MAX_REFS:
                raise BundleError(f"more than {MAX_REFS} refs in the bundle")
    if not refs:
        raise BundleError("the bundle names no ref")
    return object_format, refs


def snapshot_ref(refs):
    """The ref whose tree becomes the snapshot: HEAD, or the bundle's only ref."""
    if "HEAD" in refs:
        return "HEAD"
    if len(refs) == 1:
        return next(iter(refs))
    raise BundleError("the bundle has several refs and no HEAD: create it with HEAD (git bundle create x.bundle HEAD)")


def git(*arguments, cwd, what):
    environment = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": cwd,
        "LANG": "C.UTF-8",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ALLOW_PROTOCOL": "file",  # the bundle file, no other transport
        "GIT_CEILING_DIRECTORIES": os.path.dirname(cwd),
    }
    options = ["-c", "core.hooksPath=/dev/null", "-c", "transfer.fsckObjects=true", "-c", "fetch.fsckObjects=true"]
    try:
        completed = subprocess.run(
            ["git", *options, *arguments],
            cwd=cwd,
            env=environment,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GIT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        raise BundleError(f"git took longer than {GIT_SECONDS} s to {what}") from None
    except Exception as error:  # noqa: BLE001 - git missing, or a sandbox that forbids starting it
        raise RuntimeError(f"git could not run in the sandbox: {error}") from None
    if completed.returncode != 0:
        message = completed.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        raise BundleError(f"git could not {what}: {message[0][:300]}")
    return completed.stdout


def files_at(repository, ref, *, max_files, max_bytes):
    """The tar (from git archive) of the tree at ``ref``, its members checked; sizes from the listing first."""
    listing = git("ls-tree", "-r", "-l", "-z", ref, cwd=repository, what="list the tree")
    entries = [entry for entry in listing.split(b"\0") if entry]
    total = sum(int(size) for size in (entry.split(b"\t", 1)[0].split()[-1] for entry in entries) if size.isdigit())
    if len(entries) > max_files or total > max_bytes:
        raise BundleError(f"more than {max_files} files or {max_bytes >> 20} MiB at {ref}")
    archive = git("archive", "--format=tar", ref, cwd=repository, what="read the tree")
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        for member in tar.getmembers():
            if member.name != "pax_global_header" and not (member.isdir() or member.isfile()):
                raise BundleError(f"{member.name}: only regular files and directories allowed (no links)")
    return archive


def main():
    request = json.loads(sys.stdin.read())
    work = os.getcwd()
    try:
        data = base64.b64decode(request["bundle"])
        object_format, refs = read_header(data)
        ref = snapshot_ref(refs)
        bundle = os.path.join(work, "upload.bundle")
        with open(bundle, "wb") as handle:
            handle.write(data)
        repository = os.path.join(work, "repository.git")
        git("init", "--quiet", "--bare", f"--object-format={object_format}", repository, cwd=work, what="start")
        git("bundle", "verify", "--quiet", bundle, cwd=repository, what="verify the bundle")
        git("fetch", "--quiet", "--no-tags", bundle, f"{ref}:refs/passband/snapshot", cwd=repository, what="fetch")
        archive = files_at(
            repository, "refs/passband/snapshot", max_files=request["max_files"], max_bytes=request["max_bytes"]
        )
    except BundleError as error:
        print(json.dumps({"error": str(error)}))
        return
    except RuntimeError as error:
        print(json.dumps({"infra_error": str(error)}))
        return
    import gzip

    print(json.dumps({"archive": base64.b64encode(gzip.compress(archive, mtime=0)).decode()}))


if __name__ == "__main__":
    main()
