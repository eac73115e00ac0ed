"""`make run`'s script prints the URL and the demo admin's sign-in last, once the server answers,
below every process's start-up output, where they cannot be missed."""

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_url_and_the_demo_admins_password_come_last(tmp_path):
    # A stand-in interpreter: each process prints start-up noise, then leaves a mark; the script's
    # wait for the server (`python -`) returns once all five (four workers and beat, the server) have
    # printed, so the order does not hang on how busy the machine is. The server's stand-in waits a
    # moment (the script stops everything once it returns).
    python = tmp_path / "python"
    python.write_text(
        "#!/bin/sh\n"
        'echo "start-up log of $*"\n'
        'case "$1" in\n'
        '  -) until [ "$(ls started.* 2>/dev/null | wc -l)" -ge 5 ]; do sleep 0.05; done ;;\n'
        '  manage.py) touch "started.$$"; sleep 2 ;;\n'
        '  *) touch "started.$$"; exec sleep 30 ;;\n'
        "esac\n"
        "exit 0\n"
    )
    python.chmod(0o755)
    var = tmp_path / "var"
    var.mkdir()
    (var / "demo-admin.txt").write_text("admin s3cret-pw\n")
    env = {**os.environ, "PASSBAND_VAR_DIR": str(var), "PORT": "8765"}
    env.pop("PASSBAND_BIND", None)
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "run-local.sh"), str(python)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    banner = lines[lines.index(next(line for line in lines if line.startswith("Passband is running"))) - 1 :]
    assert banner[1] == "Passband is running: http://127.0.0.1:8765/"
    assert "Sign in as: admin" in banner and "Password:   s3cret-pw" in banner
    assert banner[-1].startswith("====") and not any("start-up log" in line for line in banner)


def test_a_worker_that_exits_is_started_again_saying_so(tmp_path):
    # The generate worker's stand-in exits with status 3 the first time (as a crashed worker does), then stays up.
    python = tmp_path / "python"
    python.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        "  *generate*) if [ ! -e crashed ]; then touch crashed; exit 3; fi; touch generate.again; exec sleep 30 ;;\n"
        "esac\n"
        'case "$1" in\n'
        "  -) exit 0 ;;\n"
        "  manage.py) until [ -e generate.again ]; do sleep 0.1; done ;;\n"
        "  *) exec sleep 30 ;;\n"
        "esac\n"
    )
    python.chmod(0o755)
    env = {**os.environ, "PASSBAND_VAR_DIR": str(tmp_path / "var"), "PORT": "8766"}
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "run-local.sh"), str(python)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "run-local: the generate worker exited (status 3); starting it again" in result.stderr
    assert (tmp_path / "generate.again").exists()
    # Stopping is not a crash: nothing is started again after Ctrl-C (or the server's end).
    assert result.stderr.count("starting it again") == 1
