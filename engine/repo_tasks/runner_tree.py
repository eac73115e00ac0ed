"""The runner's work on the repository copy: unpack, compare with the snapshot, clean up, configure.

Standard library only; ``runner_program.py`` loads this source inside the sandbox (and the suite
imports it directly). Paths are relative to the copy's root.
"""

import hashlib
import io
import os
import shutil
import sys
import tarfile

STARTUP_NAMES = ("sitecustomize", "usercustomize")
SHADOW_EXTRA = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py")


def pristine_config(*, test_files, config_files, original, repo, private):
    """The configuration file pytest would read in the snapshot, written again from the snapshot's
    bytes (at its own place, so relative settings keep their meaning); an empty one if there is none."""
    directories = {os.path.dirname(path) for path in test_files}
    start = os.path.commonpath([os.path.join(repo, d) for d in directories]) if directories else repo
    base = os.path.relpath(start, repo)
    while True:
        for name in config_files:
            relative = os.path.normpath(os.path.join(base, name))
            if relative in original and holds_pytest_config(name, original[relative][0]):
                target = os.path.join(repo, relative)
                remove(target)
                with open(target, "wb") as handle:
                    handle.write(original[relative][0])
                return target
        if base in ("", "."):
            break
        base = os.path.dirname(base)
    target = os.path.join(private, "pytest.ini")
    with open(target, "w", encoding="utf-8") as handle:
        handle.write("[pytest]\n")
    return target


def holds_pytest_config(name, data):
    text = data.decode("utf-8", "replace")
    if name == "pyproject.toml":
        return "[tool.pytest" in text
    if name == "setup.cfg":
        return "[tool:pytest]" in text
    if name == "tox.ini":
        return "[pytest]" in text
    return True


def read_snapshot(data):
    """Regular files only (the snapshot was checked at import; this holds even if it was not).
    Out: {relative path: (bytes, executable)}."""
    files = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member in archive.getmembers():
            name = os.path.normpath(member.name)
            if name.startswith(("/", "..")) or not member.isfile():
                continue
            source = archive.extractfile(member)
            if source is not None:
                files[name] = (source.read(), bool(member.mode & 0o100))
    return files


def write_tree(files, repo):
    os.makedirs(repo)
    for name, (data, executable) in files.items():
        target = os.path.join(repo, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(data)
        if executable:
            os.chmod(target, 0o755)


def tree_changes(repo, original):
    """Every path whose bytes or executable bit differ from the snapshot, or that was added or removed."""
    seen = set()
    changed = []
    for directory, subdirectories, names in os.walk(repo):
        for name in names + [d for d in subdirectories if os.path.islink(os.path.join(directory, d))]:
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, repo)
            seen.add(relative)
            if os.path.islink(path) or relative not in original:
                changed.append(relative)
                continue
            data, executable = original[relative]
            with open(path, "rb") as handle:
                same = handle.read() == data
            if not same or bool(os.stat(path).st_mode & 0o100) != executable:
                changed.append(relative)
    changed += [path for path in original if path not in seen]
    return sorted(changed)


def clean(repo, original, config_files):
    """Remove what a patch planted: conftest.py files, pytest configuration, start-up hooks and
    .pth files that the snapshot did not have, every compiled file, and new top-level modules
    that would shadow the standard library or pytest."""
    removed = []
    shadowed = set(sys.stdlib_module_names) | set(SHADOW_EXTRA)
    for directory, subdirectories, names in os.walk(repo, topdown=True):
        relative_directory = os.path.relpath(directory, repo)
        for name in list(subdirectories):
            relative = os.path.normpath(os.path.join(relative_directory, name))
            planted_startup = name in STARTUP_NAMES and not any(p.startswith(relative + "/") for p in original)
            if name == "__pycache__" or planted_startup:
                remove(os.path.join(directory, name))
                subdirectories.remove(name)
                removed.append(relative + "/")
        for name in names:
            relative = os.path.normpath(os.path.join(relative_directory, name))
            stem = name[:-3] if name.endswith(".py") else None
            planted = relative not in original and (
                name == "conftest.py"
                or name in config_files
                or stem in STARTUP_NAMES
                or (relative_directory in (".", "src") and stem in shadowed)
            )
            if planted or name.endswith((".pth", ".pyc")) or os.path.islink(os.path.join(directory, name)):
                remove(os.path.join(directory, name))
                removed.append(relative)
    for name in os.listdir(repo):
        relative = os.path.normpath(name)
        path = os.path.join(repo, name)
        if os.path.isdir(path) and name in shadowed and not any(p.startswith(name + "/") for p in original):
            remove(path)
            removed.append(relative + "/")
    return sorted(removed)


def remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except OSError:
            pass


def digests(repo, paths):
    found: dict = {}
    for path in paths:
        try:
            with open(os.path.join(repo, path), "rb") as handle:
                found[path] = hashlib.sha256(handle.read()).hexdigest()
        except OSError:
            found[path] = None
    return found
