"""A busy day on the embedded default: `make run`'s processes under load, for the test and the benchmark.

`busy_day(folder, model_url=...)` runs what `make run` runs (migrate, load_demo, scripts/run-local.sh: the SQLite
file and the filesystem broker under `folder/var`, the real workers under their supervisors, beat, the web
server), with every process timing its write transactions (passband/write_timer.py). While the similarity worker
indexes the demo set, it uploads a repository task through the page (its audit runs the tests in the sandbox),
runs a campaign on the scripted model at `model_url` (an OpenAI-compatible server), and signs in and uploads task
files in two loops beside them; in the middle of the campaign it kills the generate worker (SIGKILL to its process
group). It returns what each client was answered and what the processes reported. Needs no Django in the caller.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.engine.repo_tasks.tiny_repo import SNAPSHOT, tiny_row
from tests.support.llama_server import free_port
from tests.support.workers import PR_SET_PDEATHSIG, _libc

ROOT = Path(__file__).resolve().parents[2]
WORKERS = {"generate": "-Q generate", "cpu": "-Q verify,default", "similarity": "-Q similarity", "beat": " beat "}


@dataclass
class Answer:
    """One request: when it left and came back (monotonic seconds), and its status (0: no answer)."""

    started: float
    ended: float
    status: int


@dataclass
class BusyDayReport:
    first_sign_in: Answer | None = None  # before the uploads and the campaign: the baseline
    sign_ins: list[Answer] = field(default_factory=list)
    uploads: list[Answer] = field(default_factory=list)
    repository_upload: Answer | None = None
    campaign: dict = field(default_factory=dict)
    versions: int = 0
    indexed: int = 0
    write_reports: list[dict] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)
    workers_alive: dict = field(default_factory=dict)
    server_errors: list[str] = field(default_factory=list)

    @property
    def longest_write(self) -> dict:
        return max(self.write_reports, key=lambda report: report["max_ms"], default={"max_ms": 0.0})


def busy_day(
    folder: Path, *, model_url: str, demo: tuple[str, ...] = (), tasks: int = 12, kill_after_rollouts: int = 4
) -> BusyDayReport:
    """The day in `folder`; `demo` names the demo environments to load (all when empty; arithmetic and
    repositories are needed), `tasks` the campaign's arithmetic tasks, `kill_after_rollouts` when to kill."""
    var = folder / "var"
    port = free_port()
    env = _environment(var, port)
    manage = [sys.executable, "manage.py"]
    loads = [["load_demo", "--no-audit", "--only", name] for name in demo] or [["load_demo", "--no-audit"]]
    for command in (["migrate", "--no-input"], *loads):
        subprocess.run(manage + command, cwd=ROOT, env=env, check=True, capture_output=True, timeout=900)
    subprocess.run(
        manage + ["add_probe_model", "scripted", "--backend", "openai", "--base-url", model_url, "--model", "m"],
        cwd=ROOT, env=env, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    shutil.rmtree(var / "write-transactions", ignore_errors=True)  # the setup's own are not the day's
    out, err = open(folder / "run-local.out", "wb"), open(folder / "run-local.err", "wb")
    # If this process dies, the script is sent SIGTERM (Ctrl-C's way) and stops its workers.
    script = subprocess.Popen(
        ["bash", "scripts/run-local.sh", sys.executable], cwd=ROOT, env=env, stdout=out, stderr=err,
        start_new_session=True, preexec_fn=lambda: _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0),
    )  # fmt: skip
    report = BusyDayReport()
    try:
        _wait(lambda: b"Passband is running" in (folder / "run-local.out").read_bytes(), 600, "the web server")
        _day(report, var, f"http://127.0.0.1:{port}", env, tasks=tasks, kill_after_rollouts=kill_after_rollouts)
    finally:
        report.workers_alive = {name: bool(_worker_pids(var, flag)) for name, flag in WORKERS.items()}
        os.killpg(script.pid, signal.SIGTERM)  # Ctrl-C's way: the script stops its supervisors in order
        try:
            script.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(script.pid, signal.SIGKILL)
        for flag in WORKERS.values():
            for pid in _worker_pids(var, flag):
                os.killpg(pid, signal.SIGKILL)
    log = (folder / "run-local.err").read_text(errors="replace")
    report.restarted = re.findall(r"run-local: (.+?) exited", log)
    report.server_errors = [line for line in log.splitlines() if re.search(r'" 50[0-9] ', line)]
    report.write_reports = [json.loads(path.read_text()) for path in (var / "write-transactions").glob("*.json")]
    return report


def _environment(var: Path, port: int) -> dict:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DATABASE_URL", "CELERY_"))}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update(
        PASSBAND_VAR_DIR=str(var),
        PORT=str(port),
        DEBUG="1",
        PASSBAND_TIME_WRITE_TRANSACTIONS="1",
        # Small jobs, so the killed worker has some in hand; a quick beat, so a stalled round shows soon.
        PASSBAND_TASKS_PER_JOB="2",
        PASSBAND_ROUND_LEASE_S="6",
        PASSBAND_RECONCILE_EVERY="2",
        PASSBAND_STALLED_AFTER="30",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])),
    )
    return env


def _day(report: BusyDayReport, var: Path, url: str, env: dict, *, tasks: int, kill_after_rollouts: int) -> None:
    username, password = (var / "demo-admin.txt").read_text().split()
    database = var / "passband.sqlite3"
    demo_versions, last_demo_version = _row(database, "SELECT count(*), max(id) FROM curation_taskversion")
    stop = threading.Event()
    started = time.monotonic()
    status = _sign_in(url, username, password)
    report.first_sign_in = Answer(started, time.monotonic(), status)
    author = _signed_in(url, username, password)
    loops = [
        threading.Thread(target=_loop, args=(stop, report.sign_ins, lambda: _sign_in(url, username, password), 0.5)),
        threading.Thread(target=_loop, args=(stop, report.uploads, lambda: _upload_tasks(author, url), 2.0)),
    ]
    for loop in loops:
        loop.start()
    try:
        repository = threading.Thread(target=lambda: setattr(report, "repository_upload", _upload_repo(author, url)))
        repository.start()
        subprocess.run(
            [sys.executable, "manage.py", "calibrate", "--environment", "arithmetic", "--model", "scripted",
             "--rollouts", "2", "--round-size", "1", "--limit", str(tasks)],
            cwd=ROOT, env=env, check=True, capture_output=True, timeout=300,
        )  # fmt: skip
        _wait(lambda: _scalar(database, "SELECT count(*) FROM calibration_rollout") >= kill_after_rollouts, 600, "")
        for pid in _worker_pids(var, WORKERS["generate"]):
            os.killpg(pid, signal.SIGKILL)
        repository.join(timeout=900)
        done = "SELECT count(*) FROM calibration_campaign WHERE status != 'done'"
        _wait(lambda: _scalar(database, done) == 0, 900, "the campaign to finish")
        signed = f"SELECT count(*) FROM similarity_versionsignature WHERE task_version_id <= {last_demo_version}"
        _wait(lambda: _scalar(database, signed) >= demo_versions, 900, "the similarity index of the demo set")
        report.versions, report.indexed = demo_versions, _scalar(database, signed)
        query = "SELECT status, stalled_rounds FROM calibration_campaign"
        report.campaign = dict(zip(("status", "stalled_rounds"), _row(database, query)))
        _wait(lambda: _worker_pids(var, WORKERS["generate"]), 120, "the generate worker to come back")
    finally:
        stop.set()
        for loop in loops:
            loop.join(timeout=120)
        author.close()


def _loop(stop: threading.Event, answers: list[Answer], request, pause_s: float) -> None:
    while not stop.is_set():
        started = time.monotonic()
        try:
            status = request()
        except httpx.HTTPError:
            status = 0
        answers.append(Answer(started, time.monotonic(), status))
        stop.wait(pause_s)


def _csrf(client: httpx.Client, url: str) -> str:
    page = client.get(url, timeout=120)
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)


def _sign_in(url: str, username: str, password: str) -> int:
    with httpx.Client() as client:
        return _post_sign_in(client, url, username, password)


def _post_sign_in(client: httpx.Client, url: str, username: str, password: str) -> int:
    token = _csrf(client, f"{url}/login/")
    form = {"username": username, "password": password, "csrfmiddlewaretoken": token}
    return client.post(f"{url}/login/", data=form, headers={"Referer": f"{url}/login/"}, timeout=120).status_code


def _signed_in(url: str, username: str, password: str) -> httpx.Client:
    client = httpx.Client()
    if _post_sign_in(client, url, username, password) != 302:
        raise AssertionError("the demo admin could not sign in")
    return client


_uploaded = iter(range(10**6))


def _upload_tasks(client: httpx.Client, url: str) -> int:
    number = next(_uploaded)
    rows = "".join(
        json.dumps({"key": f"busy-{number}-{i}", "prompt": f"What is {number} + {i}?", "answer": str(number + i)})
        + "\n"
        for i in range(3)
    )
    return _post_upload(client, url, {"environment": "arithmetic"}, [("file", (f"busy-{number}.jsonl", rows.encode()))])


def _upload_repo(client: httpx.Client, url: str) -> Answer:
    started = time.monotonic()
    rows = json.dumps(tiny_row("calc.tar.gz", key="busy-calc-clamp")).encode() + b"\n"
    files = [("file", ("tasks.jsonl", rows)), ("snapshots", ("calc.tar.gz", SNAPSHOT))]
    status = _post_upload(client, url, {"environment": "repositories"}, files)
    return Answer(started, time.monotonic(), status)


def _post_upload(client: httpx.Client, url: str, data: dict, files: list) -> int:
    page = f"{url}/tasks/upload/"
    data = {**data, "csrfmiddlewaretoken": _csrf(client, page)}
    return client.post(page, data=data, files=files, headers={"Referer": page}, timeout=900).status_code


def _worker_pids(var: Path, flag: str) -> list[int]:
    """Main processes (session leaders) of this run's Celery workers or beat whose command line holds `flag`."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if "celery" not in command or flag not in command or os.getsid(int(entry)) != int(entry):
                continue
            if f"PASSBAND_VAR_DIR={var}\0".encode() in Path(f"/proc/{entry}/environ").read_bytes():
                found.append(int(entry))
        except OSError:
            continue
    return found


def _row(database: Path, query: str) -> tuple:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30) as connection:
        return connection.execute(query).fetchone() or ()


def _scalar(database: Path, query: str):
    return _row(database, query)[0]


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what or 'the campaign'}")
        time.sleep(0.5)
