"""Hostile programs: each ends as fail, timeout or error with a reason, never pass, and the
calling process, the host filesystem and the network are untouched.

Every program defines ``solve()`` that returns 42 only if its attack worked, and the task
asserts ``solve() == 42``: a pass would mean the attack succeeded. The same programs run under
the kernel isolation (namespaces) when this machine allows it and under the fallback.
"""

import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.sandbox import SERVER_SCRIPT, Sandbox, SandboxLimits
from engine.sandbox.view import SandboxView
from engine.verifiers import verify
from engine.verifiers.kinds import code as code_kind

# Short limits: every stall here ends as a timeout whichever limit fires first (no test asserts which one), and
# the honest solution needs milliseconds of either; the code kind rounds CPU up to whole seconds, so 1 is its least.
TASK = {
    "kind": "code",
    "style": "asserts",
    "asserts": ["assert solve() == 42"],
    "timeout_seconds": 2,
    "cpu_seconds": 1,
    "memory_mb": 256,
}
ISOLATIONS = ["auto", "fallback"]


@pytest.fixture(params=ISOLATIONS)
def sandbox(request, monkeypatch):
    """A fresh sandbox with the code verifier's view (its server starts after the test's environment is set up)."""
    instance = Sandbox(isolation=request.param, view=SandboxView.of())
    monkeypatch.setattr(code_kind, "code_sandbox", lambda config: instance)
    yield instance
    instance.close()


def check_rejected(program: str, *, expected: tuple[str, ...] = ("fail", "timeout", "error")):
    verdict = verify(verifier=TASK, completion=program)
    assert verdict.outcome in expected, verdict
    assert verdict.outcome != "pass"
    assert verdict.detail
    # The caller lives on and the sandbox still works.
    assert verify(verifier=TASK, completion="def solve():\n    return 42\n").outcome == "pass"
    return verdict


def test_infinite_loop(sandbox):
    # CPU or wall clock: whichever limit the machine's load lets win first; the outcome is what counts.
    check_rejected("def solve():\n    while True:\n        pass\n", expected=("timeout",))


def test_sleeping_forever(sandbox):
    check_rejected("import time\ndef solve():\n    time.sleep(3600)\n", expected=("timeout",))


def test_fork_bomb(sandbox):
    program = (
        "import os\n"
        "def solve():\n"
        "    while True:\n"
        "        try:\n"
        "            os.fork()\n"
        "        except OSError:\n"
        "            pass\n"
    )
    check_rejected(program, expected=("timeout", "fail"))


def test_fork_bomb_children_do_not_outlive_the_run(sandbox):
    if sandbox.isolation()["mode"] != "namespaces":
        pytest.skip("the fallback refuses fork outright")
    program = (
        "import os, time\n"
        "def solve():\n"
        "    for _ in range(100):\n"
        "        try:\n"
        "            if os.fork() == 0:\n"
        "                os.setsid()  # escape the process group: only the pid namespace catches it\n"
        "                time.sleep(3600)\n"
        "        except OSError:\n"
        "            break\n"
        "    return 0\n"
    )
    verdict = verify(verifier=TASK, completion=program)
    assert verdict.outcome == "fail"
    deadline = time.monotonic() + 10  # teardown is asynchronous; allow it to finish
    while _stray_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _stray_processes() == []


SPARE_PROCESSES_PER_SERVER = 2  # each idle server keeps one prepared sandbox: its setup process and program


def _stray_processes():
    """Sandbox processes of this test process beyond its servers and their idle spare sandboxes, and
    any orphaned sandbox process.

    Found by command line (this checkout's server path), then traced up to the topmost sandbox
    process of each tree: a tree under this test process is ours; one whose top was orphaned to
    init is a stray whoever started it; one under any other process (a parallel test process, a
    Celery worker, another checkout's run) is theirs, not counted."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if str(SERVER_SCRIPT).encode() not in (entry / "cmdline").read_bytes():
                continue
            parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue

    def top(pid: int) -> int:
        while parents.get(pid) in parents:
            pid = parents[pid]
        return pid

    servers = [pid for pid, parent in parents.items() if parent == os.getpid()]
    ours = [pid for pid in parents if pid not in servers and parents[top(pid)] == os.getpid()]
    orphans = [pid for pid in parents if parents[top(pid)] == 1]
    return orphans + (ours if len(ours) > SPARE_PROCESSES_PER_SERVER * len(servers) else [])


def test_process_limit_is_enforced_per_run(sandbox):
    if sandbox.isolation()["mode"] != "namespaces":
        pytest.skip("RLIMIT_NPROC needs the per-run user namespace")
    program = (
        "import os, time\n"
        "def solve():\n"
        "    children = 0\n"
        "    for _ in range(50):\n"
        "        try:\n"
        "            if os.fork() == 0:\n"
        "                time.sleep(30)\n"
        "                os._exit(0)\n"
        "            children += 1\n"
        "        except OSError:\n"
        "            break\n"
        "    return 42 if children >= 50 else children\n"
    )
    # The children sleep: on a loaded machine the wall clock may end the run first.
    check_rejected(program, expected=("fail", "timeout"))


def test_memory_bomb(sandbox):
    program = "def solve():\n    hoard = []\n    while True:\n        hoard.append(bytearray(50 * 1024 * 1024))\n"
    # MemoryError, a kill at the address-space limit, or a time limit under load: never a pass.
    check_rejected(program, expected=("fail", "timeout"))


def test_one_hundred_megabytes_of_output(sandbox):
    program = (
        "import sys\n"
        "chunk = 'x' * (1 << 20)\n"
        "for _ in range(100):\n"
        "    sys.stdout.write(chunk)\n"
        "sys.stdout.flush()\n"
        "def solve():\n"
        "    return 42\n"
    )
    check_rejected(program, expected=("fail", "timeout"))


def test_sys_exit_before_the_tests(sandbox):
    verdict = check_rejected("import sys\nsys.exit(0)\ndef solve():\n    return 0\n", expected=("fail",))
    assert "sys.exit" in verdict.detail


def test_os_exit_before_the_tests(sandbox):
    verdict = check_rejected("import os\nos._exit(0)\ndef solve():\n    return 0\n", expected=("fail",))
    assert "before the tests finished" in verdict.detail


def test_os_exit_inside_the_tested_function(sandbox):
    check_rejected("import os\ndef solve():\n    os._exit(0)\n", expected=("fail",))


def test_killing_its_parent(sandbox):
    program = (
        "import os\n"
        "try:\n"
        "    os.kill(os.getppid(), 9)\n"
        "except Exception:\n"
        "    pass\n"
        "os._exit(0)  # and pretend all went well\n"
        "def solve():\n"
        "    return 42\n"
    )
    check_rejected(program, expected=("fail", "error"))


def test_killing_its_parent_through_a_pidfd(sandbox):
    program = (
        "import os, signal\n"
        "try:\n"
        "    signal.pidfd_send_signal(os.pidfd_open(os.getppid()), signal.SIGKILL)\n"
        "except Exception:\n"
        "    pass\n"
        "def solve():\n"
        "    return 0\n"
    )
    check_rejected(program, expected=("fail", "error"))


def test_a_caller_running_python_with_optimizations_keeps_the_asserts(sandbox, tmp_path):
    """`python -O` (or PYTHONOPTIMIZE) strips asserts from code the caller compiles: the tests must keep theirs."""
    script = tmp_path / "optimized.py"
    script.write_text(
        "import sys\n"
        "from engine.sandbox import Sandbox\n"
        "from engine.verifiers import verify\n"
        "from engine.verifiers.kinds import code\n"
        f"sandbox = Sandbox(isolation={sandbox.requested_isolation!r})\n"
        "code.code_sandbox = lambda config: sandbox\n"
        "assert sys.flags.optimize == 1\n"
        f"task = {TASK!r}\n"
        "print(verify(verifier=task, completion='def solve():\\n    return 0\\n').outcome)\n"
        "sandbox.close()\n"
    )
    root = Path(__file__).resolve().parents[3]
    result = subprocess.run(
        [sys.executable, "-O", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "fail"


def test_a_huge_return_value_is_refused_not_decoded(sandbox):
    # 64 MB across to the judge: over the frame limit, so the judge never spends seconds decoding it.
    check_rejected("def solve():\n    return 'x' * (64 << 20)\n")


def test_signalling_the_supervisor(sandbox):
    program = (
        "import os, signal, time\n"
        "for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGKILL):\n"
        "    for target in (1, os.getppid()):\n"
        "        try:\n"
        "            os.kill(target, number)\n"
        "        except Exception:\n"
        "            pass\n"
        "time.sleep(0.2)\n"
        "def solve():\n"
        "    return 0\n"
    )
    verdict = check_rejected(program, expected=("fail",))
    assert "assert 1 of 1 failed" in verdict.detail or "not allowed" in verdict.detail


def test_killing_every_process_it_can(sandbox):
    program = (
        "import os, signal\n"
        "try:\n"
        "    os.kill(-1, signal.SIGKILL)\n"
        "except Exception:\n"
        "    pass\n"
        "def solve():\n"
        "    return 0\n"
    )
    check_rejected(program, expected=("fail", "error"))


def test_reading_the_worker_environment(sandbox, monkeypatch):
    secret = f"passband-secret-{secrets.token_hex(8)}"
    monkeypatch.setenv("PASSBAND_TEST_SECRET", secret)
    sandbox.close()  # the next run starts a server after the secret is set
    program = (
        "import os, glob\n"
        "def solve():\n"
        "    seen = repr(dict(os.environ))\n"
        "    for path in glob.glob('/proc/*/environ'):\n"
        "        try:\n"
        "            with open(path, 'rb') as handle:\n"
        "                seen += handle.read().decode('utf-8', 'replace')\n"
        "        except OSError:\n"
        "            pass\n"
        "    print(seen)\n"
        "    return 42 if 'passband-secret-' in seen or 'PASSBAND_TEST_SECRET' in seen else 0\n"
    )
    check_rejected(program, expected=("fail",))
    run = sandbox.run_script(program=program + "solve()\n", stdin="", limits=SandboxLimits())
    assert run.status == "exited"
    assert secret not in run.stdout and "PASSBAND_TEST_SECRET" not in run.stdout


def test_connecting_to_localhost(sandbox):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    program = (
        "import socket\n"
        "def solve():\n"
        f"    connection = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        "    connection.sendall(b'escaped')\n"
        "    return 42\n"
    )
    try:
        verdict = check_rejected(program, expected=("fail",))
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()
    assert "Error" in verdict.detail


def test_writing_outside_its_directory(sandbox, tmp_path):
    targets = [
        f"/tmp/passband-escape-{secrets.token_hex(6)}",
        str(tmp_path / "passband-escape"),
        str(Path(__file__).parent / f"passband-escape-{secrets.token_hex(6)}"),
    ]
    program = (
        "def solve():\n"
        f"    for path in {targets!r}:\n"
        "        try:\n"
        "            with open(path, 'w') as handle:\n"
        "                handle.write('escaped')\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 0\n"
    )
    check_rejected(program, expected=("fail",))
    for target in targets:
        assert not os.path.exists(target), target


def test_the_filesystem_is_read_only_outside_tmp(sandbox):
    if sandbox.isolation()["mode"] != "namespaces":
        pytest.skip("the fallback has no private filesystem view")
    program = (
        "import os\n"
        "def solve():\n"
        "    written = []\n"
        "    for directory in ['/', '/etc', '/usr', '/dev', '/proc']:\n"
        "        try:\n"
        "            with open(os.path.join(directory, 'escape'), 'w'):\n"
        "                written.append(directory)\n"
        "        except OSError:\n"
        "            pass\n"
        "    open('/tmp/allowed', 'w').write('ok')\n"
        "    return 42 if written else 0\n"
    )
    check_rejected(program, expected=("fail",))


def test_the_host_directories_are_not_visible(sandbox):
    if sandbox.isolation()["mode"] != "namespaces":
        pytest.skip("the fallback has no private filesystem view")
    repository = str(Path(__file__).resolve().parents[3])
    program = f"import os\ndef solve():\n    return 42 if os.path.exists({repository + '/pyproject.toml'!r}) else 0\n"
    check_rejected(program, expected=("fail",))


def test_isolation_is_described(sandbox):
    description = sandbox.isolation()
    assert description["mode"] in ("namespaces", "fallback")
    assert {"network", "filesystem", "processes", "environment", "user"} <= set(description)


def test_signalling_itself_does_not_pose_as_a_timeout(sandbox):
    if sandbox.isolation()["mode"] != "namespaces":
        pytest.skip("the fallback refuses os.kill")
    program = "import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)\ndef solve():\n    return 0\n"
    verdict = check_rejected(program, expected=("fail",))
    # Killed by its own signal, or (as pid 1 of its namespace) left alive by it to fail the test.
    assert "SIGXCPU" in verdict.detail or "assert 1 of 1 failed" in verdict.detail


# -- the task's own tests stall the judge: still a timeout, never a hang or an error ---------

JUDGE_STALLS = {
    "a loop that catches the deadline, then sleeps": (
        "import time\ntry:\n    for _ in range(10**12):\n        pass\nexcept BaseException:\n    pass\ntime.sleep(3600)\n"
    ),
    "a call into C that never checks for signals": (
        "import hashlib\nhashlib.pbkdf2_hmac('sha256', b'x', b'y', 2**31 - 1)\n"
    ),
    "the alarm ignored": "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\ntime.sleep(3600)\n",
}


@pytest.mark.parametrize("test", JUDGE_STALLS.values(), ids=JUDGE_STALLS.keys())
def test_tests_that_stall_the_judge_end_as_a_timeout(sandbox, test):
    run = sandbox.run_tests(
        program="def f(x):\n    return x\n", tests=[test], limits=SandboxLimits(wall_seconds=1, cpu_seconds=1)
    )
    assert run.status == "timeout", run
    assert not run.passed
