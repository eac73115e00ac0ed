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
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import types

PR_SET_DUMPABLE = 4
CANARIES_PER_FILE = 2
PATCH_SETUP_SECONDS = 5
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
    tree = types.ModuleType("runner_tree")
    exec(compile(request["tree_source"], "runner_tree.py", "exec"), tree.__dict__)
    server = TestServer(request)
    original = tree.read_snapshot(base64.b64decode(request["snapshot"]))
    for index, patch in enumerate(request["patches"]):
        left = request["deadline_seconds"] - (time.monotonic() - started)
        if index and left < request["test_timeout_seconds"] + PATCH_SETUP_SECONDS:
            break  # the caller grades the rest in another run
        work = os.path.join(os.getcwd(), f"run-{index}")
        result = grade_one(request, patch, original, work, tree, server)
        finish(nonce, index, result)
        kill_all_but(server.pid)  # nothing a test process left behind reaches the next patch
        shutil.rmtree(work, ignore_errors=True)


def kill_all_but(spared):
    """In the sandbox's pid namespace (this runner is pid 1): kill every other process but ``spared``."""
    if os.getpid() != 1:
        return
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in (1, spared):
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass


def grade_one(request, patch, original, work, tree, server):
    repo = os.path.join(work, "repo")
    private = os.path.join(work, ".grader")
    os.makedirs(private)
    result: dict = {"applied": True}
    tree.write_tree(original, repo)
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
        result["tree_changes"] = tree.tree_changes(repo, original)
    result["removed"] = tree.clean(repo, original, request["config_files"])
    for path, text in sorted(request["hidden_tests"].items()):
        target = os.path.join(repo, path)
        if os.path.islink(target) or os.path.isdir(target):
            tree.remove(target)
        os.makedirs(os.path.dirname(target) or repo, exist_ok=True)
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text)
    plan, arguments = test_plan(request, original, repo, private, tree)
    guarded_before = tree.digests(repo, request["guarded_files"])
    result.update(server.run(repo, private, plan, arguments))
    guarded_after = tree.digests(repo, request["guarded_files"])
    result["changed_during_run"] = sorted(
        path for path in guarded_before if guarded_before[path] != guarded_after.get(path)
    )
    return result


def test_plan(request, original, repo, private, tree):
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
    config = tree.pristine_config(
        test_files=request["test_files"],
        config_files=request["config_files"],
        original=original,
        repo=repo,
        private=private,
    )
    arguments = list(request["pytest_args"]) + ["-c", config, "--rootdir", repo, "--confcutdir", repo]
    return plan, arguments + [entry["path"] for entry in files]


def finish(nonce, index, result):
    sys.stdout.write("PASSBAND-RESULT " + nonce + " " + str(index) + " " + json.dumps(result) + "\n")
    sys.stdout.flush()


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


class TestServer:
    """The pytest server (``pytest_child.py serve``): pytest imported once, a test process forked per
    patch. Started again if a test process killed it."""

    def __init__(self, request):
        self.request = request
        self.process = None
        self.control = None
        self.pid = None
        self.start_error = ""
        self.start()

    def start(self):
        self.request_path = os.path.join(os.getcwd(), ".pytest_child.py")
        with open(self.request_path, "w", encoding="utf-8") as handle:
            handle.write(self.request["child_source"])
        mine, theirs = socket.socketpair()
        paths = json.dumps([entry for entry in sys.path if entry])
        try:
            self.process = subprocess.Popen(
                [self.request["python"], "-I", "-B", self.request_path, "serve", str(theirs.fileno()), paths],
                env=test_environment(os.getcwd()),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
            )
        except Exception as error:  # noqa: BLE001 - a sandbox that forbids starting it
            self.process, self.start_error = None, str(error)
            mine.close()
        else:
            self.control, self.pid = mine, self.process.pid
            self.replies = mine.makefile("r", encoding="utf-8")
        theirs.close()

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def run(self, repo, private, plan, arguments):
        if not self.alive():
            self.start()
        if self.process is None:
            return {"started": False, "start_error": self.start_error}
        plan_path = os.path.join(private, "plan.json")
        with open(plan_path, "w", encoding="utf-8") as handle:
            json.dump(plan, handle)
        report_read, report_write = os.pipe()
        nonce_read, nonce_write = os.pipe()
        os.write(nonce_write, self.request["child_nonce"].encode())
        os.close(nonce_write)
        output_path = os.path.join(private, "pytest-output.txt")
        output = os.open(output_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        message = {"repo": repo, "args": arguments, "plan": plan_path, "environment": test_environment(private)}
        chunks: list = []
        started = time.monotonic()
        try:
            socket.send_fds(self.control, [json.dumps(message).encode()], [report_write, nonce_read, output])
            pid = json.loads(self.replies.readline())["pid"]
        except (OSError, ValueError, KeyError) as error:
            for fd in (report_write, nonce_read, output, report_read):
                os.close(fd)
            return {"started": False, "start_error": "the pytest server did not answer: " + str(error)}
        for fd in (report_write, nonce_read, output):
            os.close(fd)
        reader = threading.Thread(target=read_all, args=(report_read, chunks), daemon=True)
        reader.start()
        exit_code, timed_out = self.wait(pid, self.request["test_timeout_seconds"])
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

    def wait(self, pid, timeout):
        """The test process's exit code (None when the server died with it) and whether it timed out."""
        self.control.settimeout(timeout)
        timed_out = False
        try:
            line = self.replies.readline()
        except (TimeoutError, OSError):
            timed_out, line = True, ""
        if timed_out:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            self.control.settimeout(10)
            try:
                line = self.replies.readline()
            except (TimeoutError, OSError):
                line = ""
        try:
            os.killpg(pid, signal.SIGKILL)  # the tests' own children too
        except OSError:
            pass
        self.control.settimeout(None)
        try:
            return int(json.loads(line)["exit"]), timed_out
        except (ValueError, KeyError, TypeError):
            if self.process is not None:
                self.process.kill()
                self.process.wait()
            return None, timed_out


def test_environment(home):
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
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
