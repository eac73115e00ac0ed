"""The README as a reader runs it: every block, extracted from README.md (not copied here), runs as written, in
order, on the demo data, in one shell session's environment (the README's setup block: its virtualenv and
DEBUG=1, no SECRET_KEY), from a folder of the reader's own beside the checkout's `manage.py` and `.venv`.

A block marked `<!-- syntax only: why -->` on the line above needs what the suite has not (a GPU server, the
network, Docker) or runs until stopped; tests/test_readme.py checks its syntax and arguments. What the reader
brings is brought here, and only that: `tasks.jsonl` holds the README's task on one line; the demo database is
loaded once for the module by `load_demo`, as `make run` does, and has tasks that a reviewer approved and a
probe found in band (what the trainer quickstart says it releases); the web server and one Celery worker run
as `make run` runs them, the server on a free port that replaces `127.0.0.1:8000` (a block's only change).
The embedded model takes minutes on this machine's CPU, so its probe model is served by the suite's
llama-server, the same SmolLM2-135M weights, with 32 new tokens a rollout rather than 96 (the server is
shared by the suite; the calibrate block is left out where no llama-server runs, and fails the test where
make test promised one).
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest
from django.conf import settings

from tests.support.readme import README, ROOT, readme_blocks, readme_shell_line
from tests.support.workers import flush_broker, start_worker, stop_worker, test_database_url, wait_for

# Not transactional: a transactional test's teardown empties the database, and the demo data is the module's
# (the fixture writes it, and empties the database after the last test). Each test's own transaction stays empty.
pytestmark = [pytest.mark.workers, pytest.mark.django_db]

README_ADDRESS = "http://127.0.0.1:8000"
RUNNABLE = [(line, language, body) for line, language, body, why in readme_blocks() if why is None]


@dataclass
class Reader:
    folder: Path
    env: dict[str, str]
    address: str
    state: Path
    model: bool  # whether the demo's probe model is served (by the suite's llama-server)
    outputs: dict[int, subprocess.CompletedProcess] = field(default_factory=dict)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _reader_env() -> dict[str, str]:
    """The environment a reader's shell starts from: no SECRET_KEY or DEBUG (the README's setup block sets
    DEBUG), the suite's test database and broker."""
    env = {key: value for key, value in os.environ.items() if key not in ("SECRET_KEY", "DEBUG", "VIRTUAL_ENV")}
    return {
        **env,
        "DATABASE_URL": test_database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "PYTHONPATH": str(ROOT),
    }


def _demo_as_reviewed(django_db_blocker) -> None:
    """What a reviewer and a probe leave before a trainer releases: every arithmetic task approved, in band for
    the demo's probe model (the README's calibrate block then re-probes the first three)."""
    from calibration.models import Calibration, ProbeModel
    from curation.models import Environment, TaskStatus

    with django_db_blocker.unblock():
        model = ProbeModel.objects.get(name="smollm2-135m")
        environment = Environment.objects.get(name="arithmetic")
        environment.tasks.update(status=TaskStatus.APPROVED)
        Calibration.objects.bulk_create(
            Calibration(
                task_version=task.current_version,
                probe_model=model,
                attempts=16,
                successes=6,
                pass_rate=6 / 16,
                interval_low=0.18,
                interval_high=0.61,
                band="in_band",
                decided=True,
            )  # fmt: skip
            for task in environment.tasks.select_related("current_version")
        )


def _served_by_the_suites_llama_server(django_db_blocker) -> bool:
    """Point the demo's probe model at the suite's llama-server (the same SmolLM2-135M, a shorter budget); False
    where none runs."""
    from calibration.models import ProbeModel

    url = os.environ.get("PASSBAND_TEST_LLAMA_SERVER", "").rstrip("/")
    try:
        healthy = bool(url) and httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        healthy = False
    if healthy:
        with django_db_blocker.unblock():
            ProbeModel.objects.filter(name="smollm2-135m").update(
                backend="openai", server="llama.cpp", base_url=f"{url}/v1", model="smollm2", max_new_tokens=32
            )
    return healthy


@pytest.fixture(scope="module")
def reader(tmp_path_factory, django_db_setup, django_db_blocker):
    from django.contrib.auth.models import Group
    from django.core.management import call_command

    from accounts.permissions import ROLES

    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)  # and sequences restart: the README's release is 1
        for role in ROLES:  # what migrate made, as on the reader's fresh database
            Group.objects.get_or_create(name=role)
        env = _reader_env()
    folder = tmp_path_factory.mktemp("reader")
    (folder / ".venv").symlink_to(Path(sys.prefix))
    (folder / "manage.py").symlink_to(ROOT / "manage.py")
    [task] = [body for _, language, body, _ in readme_blocks() if language == "json" and '"prompt"' in body]
    (folder / "tasks.jsonl").write_text(json.dumps(json.loads(task)) + "\n")
    # The weak-test check (mutants of each HumanEval reference) is half of load_demo's time and no block reads its
    # flags: off here, proved by tests/curation/test_weak_tests*.py.
    demo = subprocess.run(
        [sys.executable, "manage.py", "load_demo"], cwd=folder,
        env={**env, "DEBUG": "1", "PASSBAND_WEAK_TESTS_MUTANTS": "0"}, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stderr
    _demo_as_reviewed(django_db_blocker)
    llama = _served_by_the_suites_llama_server(django_db_blocker)
    flush_broker()
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"], cwd=folder,
        env={**env, "DEBUG": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    worker = start_worker(concurrency=2, extra_env={"DEBUG": "1"}, log_path=folder.parent / "worker.log")
    address = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(address), timeout=60, what="the web server")
        yield Reader(folder=folder, env=env, address=address, state=folder.parent / "shell-state.sh", model=llama)
    finally:
        server.terminate()
        server.wait(timeout=30)
        stop_worker(worker)
        with django_db_blocker.unblock():
            call_command("flush", interactive=False, verbosity=0)


def _answers(address: str) -> bool:
    try:
        return httpx.get(f"{address}/healthz", timeout=2).status_code < 500
    except httpx.HTTPError:
        return False


def _run_block(reader: Reader, line: int, language: str, body: str) -> subprocess.CompletedProcess:
    """The block in a bash session that starts where the previous block's left off (its exports) and leaves
    its own for the next; a python block is run by the session's `python`."""
    if README_ADDRESS in body:
        body = body.replace(README_ADDRESS, reader.address)
    if language == "python":
        body = f"python - <<'README_PYTHON_BLOCK'\n{body}README_PYTHON_BLOCK\n"
    script = (
        f"set -e\n[ -f {shlex.quote(str(reader.state))} ] && . {shlex.quote(str(reader.state))}\n"
        f"cd {shlex.quote(str(reader.folder))}\n{body}\nexport -p > {shlex.quote(str(reader.state))}\n"
    )
    return subprocess.run(
        ["bash", "-c", script], cwd=reader.folder, env=reader.env, capture_output=True, text=True, timeout=600
    )


def test_every_block_runs_as_written_and_does_what_the_readme_says(reader, django_db_blocker):
    """One test, the blocks in order (a shell session's state runs through them, so no process may take one
    away from the others); then what they left, so that a block that prints an error and exits 0 (curl
    answered 400) cannot pass: the task imported, the token's listing, the release downloaded, the export
    written, both probes done."""
    from calibration.models import Campaign
    from curation.models import Task

    assert "SECRET_KEY" not in reader.env and "export DEBUG=1" in README.read_text()
    for line, language, body in RUNNABLE:
        if language in ("json", "text"):
            continue  # data and output, not commands: the task above is the reader's tasks.jsonl
        if "calibrate" in body and not reader.model:
            if os.environ.get("PASSBAND_REQUIRE_LLAMA_SERVER") == "1":
                pytest.fail(f"README.md line {line}: no llama-server to serve the demo's SmolLM2")
            continue  # checked by tests/test_readme.py only, where no llama-server runs (make test starts one)
        ran = _run_block(reader, line, language, body)
        reader.outputs[line] = ran
        assert ran.returncode == 0, f"README.md line {line} failed ({ran.returncode}):\n{ran.stdout}\n{ran.stderr}"
    listed = json.loads(_output_of(reader, "/api/v1/tasks?"))
    assert listed["results"] and {row["environment"] for row in listed["results"]} == {"arithmetic"}
    downloaded = pq.read_table(reader.folder / "release-1-trl.parquet")
    assert downloaded.num_rows >= 57 and "task_key" in downloaded.column_names
    assert pq.read_table(reader.folder / "trl.parquet").num_rows >= 57
    with django_db_blocker.unblock():
        assert Task.objects.filter(environment__name="my-tasks", key="arith-0001").exists()
        if reader.model:
            assert Campaign.objects.filter(status=Campaign.Status.DONE).count() == 2
    # The Harbor export line of docs/trainers.md, on the same demo data.
    harbor = _run_block(reader, 0, "sh", readme_shell_line("export_harbor --environment humaneval") + "\n")
    assert harbor.returncode == 0, harbor.stderr
    assert any((reader.folder / "harbor").iterdir())


def _output_of(reader: Reader, containing: str) -> str:
    [line] = [line for line, _, body in RUNNABLE if containing in body]
    return reader.outputs[line].stdout
