"""One tool call of a repository episode, inside the sandbox (standard library only).

stdin: {"snapshot" (base64 tar.gz), "overlay" {path: text or null (deleted)}, "tool", "arguments",
"command_seconds", "output_chars"}. The program unpacks a fresh copy of the snapshot, lays the
rollout's overlay over it, performs the tool, and prints {"status", "content", "overlay"}: the
overlay after the call (every file that now differs from the snapshot). Nothing survives the run:
the rollout's copy *is* the overlay the worker keeps between calls.
"""

import base64
import io
import json
import os
import re
import subprocess
import sys
import tarfile

SKIP_DIRECTORIES = ("__pycache__", ".pytest_cache", ".git")


def main():
    request = json.loads(sys.stdin.read())
    repo = os.path.join(os.getcwd(), "repo")
    original = extract(base64.b64decode(request["snapshot"]), repo)
    for path, text in request["overlay"].items():
        target = inside(repo, path)
        if text is None:
            if os.path.isfile(target):
                os.unlink(target)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as handle:
                handle.write(text)
    tool = TOOLS.get(request["tool"])
    arguments = request["arguments"] if isinstance(request["arguments"], dict) else {}
    try:
        status, content = (
            ("unknown_tool", {"error": f"unknown tool {request['tool']!r}"})
            if tool is None
            else tool(repo, request, **arguments)
        )
    except (ValueError, TypeError, OSError, re.error) as error:
        status, content = "bad_arguments", {"error": str(error)}
    reply = {"status": status, "content": json.dumps(content), "overlay": overlay(repo, original)}
    sys.stdout.write(json.dumps(reply))


def extract(data, repo):
    os.makedirs(repo)
    original = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member in archive.getmembers():
            name = os.path.normpath(member.name)
            if name.startswith(("/", "..")) or not member.isfile():
                continue
            target = os.path.join(repo, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            source = archive.extractfile(member)
            if source is None:
                continue
            data = source.read()
            with open(target, "wb") as handle:
                handle.write(data)
            original[name] = data
    return original


def inside(repo, path):
    if not isinstance(path, str):
        raise ValueError("path must be a string")
    target = os.path.normpath(os.path.join(repo, path))
    if target != repo and not target.startswith(repo + os.sep):
        raise ValueError(f"{path}: outside the repository")
    return target


def walk(repo):
    for directory, subdirectories, names in os.walk(repo):
        subdirectories[:] = sorted(name for name in subdirectories if name not in SKIP_DIRECTORIES)
        for name in sorted(names):
            path = os.path.join(directory, name)
            if not os.path.islink(path) and not name.endswith(".pyc"):
                yield os.path.relpath(path, repo)


def overlay(repo, original):
    changed: dict = {}
    present = set()
    for relative in walk(repo):
        present.add(relative)
        with open(os.path.join(repo, relative), "rb") as handle:
            data = handle.read()
        if original.get(relative) != data:
            try:
                changed[relative] = data.decode("utf-8")
            except UnicodeDecodeError:
                continue  # binary output of a command: not part of the rollout's edits
    for relative in original:
        if relative not in present:
            changed[relative] = None
    return changed


def list_files(repo, request, path=""):
    base = inside(repo, path)
    files = [relative for relative in walk(repo) if os.path.join(repo, relative).startswith(base)]
    return "ok", {"files": files[:2000], "truncated": len(files) > 2000}


def read_file(repo, request, path, start_line=1, end_line=None):
    with open(inside(repo, path), encoding="utf-8", errors="replace") as handle:
        lines = handle.read().splitlines()
    end = len(lines) if end_line is None else min(int(end_line), len(lines))
    start = max(int(start_line), 1)
    text = "\n".join(f"{number}: {lines[number - 1]}" for number in range(start, end + 1))
    return "ok", {"path": path, "lines": len(lines), "text": text[: request["output_chars"]]}


def search(repo, request, pattern, path=""):
    expression = re.compile(pattern)
    base = inside(repo, path)
    hits = []
    for relative in walk(repo):
        if not os.path.join(repo, relative).startswith(base):
            continue
        try:
            with open(os.path.join(repo, relative), encoding="utf-8") as handle:
                for number, line in enumerate(handle, 1):
                    if expression.search(line):
                        hits.append(f"{relative}:{number}: {line.rstrip()[:200]}")
        except UnicodeDecodeError:
            continue
        if len(hits) >= 200:
            break
    return "ok", {"matches": hits}


def write_file(repo, request, path, content):
    if not isinstance(content, str):
        raise ValueError("content must be a string")
    target = inside(repo, path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "w", encoding="utf-8") as handle:
        handle.write(content)
    return "ok", {"written": path, "bytes": len(content.encode("utf-8"))}


def apply_diff(repo, request, diff):
    if not isinstance(diff, str):
        raise ValueError("diff must be a string")
    path = os.path.join(os.getcwd(), "episode.patch")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(diff if diff.endswith("\n") else diff + "\n")
    completed = run(["git", "apply", "--verbose", "--whitespace=nowarn", path], repo, request)
    status = "ok" if completed["exit_code"] == 0 else "tool_error"
    return status, completed


def run_tests(repo, request, paths=None):
    targets = [str(path) for path in paths] if isinstance(paths, list) else []
    for target in targets:
        inside(repo, target.split("::", 1)[0])
    command = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *targets]
    return "ok", run(command, repo, request)


def run_command(repo, request, command):
    if not isinstance(command, str) or not command.strip():
        raise ValueError("command must be a non-empty string")
    return "ok", run(["/bin/sh", "-c", command], repo, request)


def run(command, repo, request):
    # `python` is the sandbox's interpreter, with the installed packages on its path.
    tools = os.path.join(os.getcwd(), ".bin")
    if not os.path.isdir(tools):
        os.makedirs(tools)
        for name in ("python", "python3"):
            os.symlink(request["python"], os.path.join(tools, name))
    environment = {
        "PATH": tools + ":/usr/local/bin:/usr/bin:/bin",
        "HOME": os.getcwd(),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONPATH": os.pathsep.join([repo, *[entry for entry in sys.path if entry]]),
    }
    try:
        completed = subprocess.run(
            command,
            cwd=repo,
            env=environment,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=request["command_seconds"],
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as expired:
        output = (expired.stdout or b"") + (expired.stderr or b"")
        return {"exit_code": None, "timed_out": True, "output": tail(output, request)}
    return {"exit_code": completed.returncode, "output": tail(completed.stdout + completed.stderr, request)}


def tail(output, request):
    text = output.decode("utf-8", "replace")
    limit = request["output_chars"]
    return text if len(text) <= limit else "...\n" + text[-limit:]


TOOLS: dict = {
    "list_files": list_files,
    "read_file": read_file,
    "search": search,
    "write_file": write_file,
    "apply_diff": apply_diff,
    "run_tests": run_tests,
    "run_command": run_command,
}

main()
