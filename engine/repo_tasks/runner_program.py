"""The grading run inside the sandbox: fresh copy, patch, hidden tests, clean-up, pytest, evidence.

Run by the sandbox as ``__main__`` (standard library only) with a JSON request on stdin::

    {"nonce", "snapshot" (base64 tar.gz), "patch", "hidden_tests" {path: text},
     "guarded_files" [paths whose bytes must not change during the run], "test_files" [paths],
     "pytest_args" [...], "test_timeout_seconds", "child_nonce", "child_source"}

It prints one line, ``PASSBAND-RESULT <nonce> <json>``, with what happened; the caller decides
the verdict (``grading.py``). The runner makes itself non-dumpable before starting the test
process, so that process (which runs the model's code) cannot open the runner's file
descriptors or memory through /proc and cannot print a result line of its own: it does not know
the nonce, and its output goes to a file.
"""

import base64
import ctypes
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time

PR_SET_DUMPABLE = 4
CONFIG_FILES = ("pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")
STARTUP_NAMES = ("sitecustomize", "usercustomize")
SHADOW_EXTRA = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py")
OUTPUT_TAIL = 6000
REPORT_CAP = 16 << 20


def main():
    request = json.loads(sys.stdin.read())
    nonce = request["nonce"]
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    work = os.getcwd()
    repo = os.path.join(work, "repo")
    private = os.path.join(work, ".grader")
    os.makedirs(private)
    result: dict = {"applied": True}
    original = extract(base64.b64decode(request["snapshot"]), repo)
    if request["patch"].strip():
        applied, output = apply_patch(repo, request["patch"], private)
        result["apply_output"] = output[-OUTPUT_TAIL:]
        if applied is None:  # git itself could not run: the grader's failure, not the patch's
            result["infra_error"] = output
            finish(nonce, result)
            return
        if not applied:
            result["applied"] = False
            finish(nonce, result)
            return
    result["removed"] = clean(repo, original)
    for path, text in sorted(request["hidden_tests"].items()):
        target = os.path.join(repo, path)
        if os.path.islink(target) or os.path.isdir(target):
            remove(target)
        os.makedirs(os.path.dirname(target) or repo, exist_ok=True)
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text)
    guarded_before = digests(repo, request["guarded_files"])
    result.update(run_tests(request, repo, private))
    guarded_after = digests(repo, request["guarded_files"])
    result["changed_during_run"] = sorted(
        path for path in guarded_before if guarded_before[path] != guarded_after.get(path)
    )
    finish(nonce, result)


def finish(nonce, result):
    sys.stdout.write("PASSBAND-RESULT " + nonce + " " + json.dumps(result) + "\n")
    sys.stdout.flush()


def extract(data, repo):
    """Unpack regular files and directories only (the snapshot was checked at import; this holds
    even if it was not). Out: the set of relative paths of the files."""
    os.makedirs(repo)
    names = set()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member in archive.getmembers():
            name = os.path.normpath(member.name)
            if name.startswith(("/", "..")) or not (member.isfile() or member.isdir()):
                continue
            target = os.path.join(repo, name)
            if member.isdir():
                os.makedirs(target, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            source = archive.extractfile(member)
            if source is None:
                continue
            with open(target, "wb") as handle:
                shutil.copyfileobj(source, handle)
            names.add(name)
    return names


def apply_patch(repo, patch, private):
    path = os.path.join(private, "model.patch")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(patch)
    environment = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": private,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CEILING_DIRECTORIES": os.path.dirname(repo),
        "LANG": "C.UTF-8",
    }
    try:
        completed = subprocess.run(
            ["git", "apply", "--verbose", "--whitespace=nowarn", "-p1", path],
            cwd=repo,
            env=environment,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        return False, "git apply ran past 60 s"
    except Exception as error:  # noqa: BLE001 - no git, or a sandbox that forbids starting it
        return None, "git apply could not run: " + str(error)
    output = (completed.stdout + completed.stderr).decode("utf-8", "replace")
    return completed.returncode == 0, output


def clean(repo, original):
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
                or name in CONFIG_FILES
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


def run_tests(request, repo, private):
    child_path = os.path.join(private, "pytest_child.py")
    with open(child_path, "w", encoding="utf-8") as handle:
        handle.write(request["child_source"])
    report_read, report_write = os.pipe()
    nonce_read, nonce_write = os.pipe()
    os.write(nonce_write, request["child_nonce"].encode())
    os.close(nonce_write)
    output_path = os.path.join(private, "pytest-output.txt")
    environment = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": private,
        "TMPDIR": private,
        "LANG": "C.UTF-8",
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    arguments = list(request["pytest_args"]) + ["--rootdir", repo] + list(request["test_files"])
    chunks: list = []
    started = time.monotonic()
    with open(output_path, "wb") as output:
        try:
            child = subprocess.Popen(
                [
                    request["python"],
                    "-I",
                    "-B",
                    child_path,
                    str(report_write),
                    str(nonce_read),
                    repo,
                    json.dumps(arguments),
                    json.dumps([entry for entry in sys.path if entry]),
                ],
                cwd=repo,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                pass_fds=(report_write, nonce_read),
                start_new_session=True,
            )
        except Exception as error:  # noqa: BLE001 - a sandbox that forbids starting it
            os.close(report_write)
            os.close(nonce_read)
            os.close(report_read)
            return {"started": False, "start_error": str(error)}
        os.close(report_write)
        os.close(nonce_read)
        reader = threading.Thread(target=read_all, args=(report_read, chunks), daemon=True)
        reader.start()
        timed_out = False
        try:
            exit_code: int | None = child.wait(timeout=request["test_timeout_seconds"])
        except subprocess.TimeoutExpired:
            timed_out = True
            exit_code = None
        try:
            os.killpg(child.pid, 9)  # the tests' own children too
        except OSError:
            pass
        if exit_code is None:
            exit_code = child.wait()
        reader.join(timeout=5)
    with open(output_path, "rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - OUTPUT_TAIL))
        tail = handle.read().decode("utf-8", "replace")
    return {
        "started": True,
        "timed_out": timed_out,
        "exit_code": exit_code,
        "seconds": round(time.monotonic() - started, 3),
        "records": b"".join(chunks).decode("utf-8", "replace"),
        "output_tail": tail,
    }


def read_all(fd, chunks):
    total = 0
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        total += len(chunk)
        if total <= REPORT_CAP:
            chunks.append(chunk)
    os.close(fd)


main()
