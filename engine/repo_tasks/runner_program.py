"""The grading run inside the sandbox: fresh copy, patch, hidden tests, clean-up, pytest, evidence.

Run by the sandbox as ``__main__`` (standard library only) with a JSON request on stdin::

    {"nonce", "snapshot" (base64 tar.gz), "patches" [unified diffs], "hidden_tests" {path: text},
     "guarded_files" [paths whose bytes must not change during the run], "test_files" [paths],
     "config_files" [pytest's configuration file names, in its order], "pytest_args" [...],
     "test_timeout_seconds", "child_nonce", "child_source", "prepare_source", "guard_source"}

Each patch is graded on its own fresh copy of the snapshot: ``git apply --numstat -z`` lists the
paths git will change (git's own reading of the patch, quoting and all), the patch is applied, the
tree is compared with the snapshot (every added, changed or removed path is reported), planted files
are removed, the hidden test files are written under names new to this grade, and pytest runs with
``-c`` the snapshot's pristine configuration. Between two patches every other process in the sandbox
is killed. For each patch it prints one line, ``PASSBAND-RESULT <nonce> <index> <json>``; the
caller decides the verdict (``grading.py``). The runner makes itself non-dumpable before starting the test
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
import secrets
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time

PR_SET_DUMPABLE = 4
CANARIES_PER_FILE = 2
PATCH_SETUP_SECONDS = 5
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
    started = time.monotonic()
    original = read_snapshot(base64.b64decode(request["snapshot"]))
    for index, patch in enumerate(request["patches"]):
        left = request["deadline_seconds"] - (time.monotonic() - started)
        if index and left < request["test_timeout_seconds"] + PATCH_SETUP_SECONDS:
            break  # the caller grades the rest in another run
        work = os.path.join(os.getcwd(), f"run-{index}")
        result = grade_one(request, patch, original, work)
        finish(nonce, index, result)
        if os.getpid() == 1:  # the sandbox's pid 1: nothing a test process left behind reaches the next patch
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(work, ignore_errors=True)


def grade_one(request, patch, original, work):
    repo = os.path.join(work, "repo")
    private = os.path.join(work, ".grader")
    os.makedirs(private)
    result: dict = {"applied": True}
    write_tree(original, repo)
    if patch.strip():
        path = os.path.join(private, "model.patch")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(patch)
        result["patch_paths"] = git_paths(repo, path, private)
        applied, output = apply_patch(repo, path, private)
        result["apply_output"] = output[-OUTPUT_TAIL:]
        if applied is None:  # git itself could not run: the grader's failure, not the patch's
            result["infra_error"] = output
            return result
        if not applied:
            result["applied"] = False
            return result
        result["tree_changes"] = tree_changes(repo, original)
    result["removed"] = clean(repo, original, request["config_files"])
    for path, text in sorted(request["hidden_tests"].items()):
        target = os.path.join(repo, path)
        if os.path.islink(target) or os.path.isdir(target):
            remove(target)
        os.makedirs(os.path.dirname(target) or repo, exist_ok=True)
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text)
    plan, arguments = test_plan(request, original, repo, private)
    guarded_before = digests(repo, request["guarded_files"])
    result.update(run_tests(request, repo, private, plan, arguments))
    guarded_after = digests(repo, request["guarded_files"])
    result["changed_during_run"] = sorted(
        path for path in guarded_before if guarded_before[path] != guarded_after.get(path)
    )
    return result


def test_plan(request, original, repo, private):
    """The hidden test files under names new to this grade, their canaries, and pytest's arguments
    (``-c`` the snapshot's own configuration, written again from the snapshot's bytes)."""
    suffix = "_pb" + secrets.token_hex(4)
    files = []
    for path in request["test_files"]:
        if path in request["hidden_tests"]:
            source = request["hidden_tests"][path]
        elif path in original:
            source = original[path][0].decode("utf-8", "replace")
        else:
            continue
        directory, name = os.path.split(path)
        renamed = os.path.join(directory, name[:-3] + suffix + ".py")
        with open(os.path.join(repo, renamed), "w", encoding="utf-8") as handle:
            handle.write(source)
        canaries = ["test_" + secrets.token_hex(5) for _ in range(CANARIES_PER_FILE)]
        files.append({"path": renamed, "original": path, "source": source, "canaries": canaries})
    plan = {
        "files": files,
        "suffix": suffix,
        "sentinel": "\u2063" + secrets.token_hex(6),
        "seed": secrets.randbelow(1 << 30),
        "prepare_source": request["prepare_source"],
        "guard_source": request["guard_source"],
    }
    config = pristine_config(request, original, repo, private)
    arguments = list(request["pytest_args"]) + ["-c", config, "--rootdir", repo, "--confcutdir", repo]
    return plan, arguments + [entry["path"] for entry in files]


def pristine_config(request, original, repo, private):
    """The configuration file pytest would read in the snapshot, written again from the snapshot's
    bytes (at its own place, so relative settings keep their meaning); an empty one if there is none."""
    directories = {os.path.dirname(path) for path in request["test_files"]}
    start = os.path.commonpath([os.path.join(repo, d) for d in directories]) if directories else repo
    base = os.path.relpath(start, repo)
    while True:
        for name in request["config_files"]:
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


def finish(nonce, index, result):
    sys.stdout.write("PASSBAND-RESULT " + nonce + " " + str(index) + " " + json.dumps(result) + "\n")
    sys.stdout.flush()


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


def git_environment(repo, private):
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": private,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CEILING_DIRECTORIES": os.path.dirname(repo),
        "LANG": "C.UTF-8",
    }


def git_paths(repo, path, private):
    """The paths git itself reads in the patch (``git apply --numstat -z --summary``), unquoted."""
    try:
        completed = subprocess.run(
            ["git", "apply", "--numstat", "--summary", "-z", "-p1", path],
            cwd=repo,
            env=git_environment(repo, private),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
        )
    except Exception:  # noqa: BLE001 - apply_patch reports git's failure
        return []
    paths = []
    for field in completed.stdout.decode("utf-8", "surrogateescape").split("\0"):
        parts = field.split("\t")
        if len(parts) == 3 and parts[2]:
            paths.append(parts[2])
        elif field.strip() and not field.startswith(" ") and len(parts) == 1 and "\n" not in field:
            paths.append(field)  # the source and destination of a rename or copy come as fields of their own
    return paths


def apply_patch(repo, path, private):
    environment = git_environment(repo, private)
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


def run_tests(request, repo, private, plan, arguments):
    child_path = os.path.join(private, "pytest_child.py")
    with open(child_path, "w", encoding="utf-8") as handle:
        handle.write(request["child_source"])
    plan_path = os.path.join(private, "plan.json")
    with open(plan_path, "w", encoding="utf-8") as handle:
        json.dump(plan, handle)
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
                    plan_path,
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
