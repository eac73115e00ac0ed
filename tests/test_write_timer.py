"""passband/write_timer.py: each process reports its longest SQLite write transaction, from BEGIN (the lock taken)
to COMMIT or ROLLBACK; off unless asked for."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import sys, time
    import django
    django.setup()
    from django.db import connection, transaction
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE held (x INTEGER)")
    cursor = connection.cursor()
    cursor.execute("INSERT INTO held VALUES (1)")  # alone: not timed (its time would include its wait)
    with transaction.atomic():
        connection.cursor().execute("UPDATE held SET x = 2")
        time.sleep(float(sys.argv[1]))  # the lock is held meanwhile
    try:
        with transaction.atomic():
            connection.cursor().execute("DELETE FROM held")
            time.sleep(float(sys.argv[2]))
            raise RuntimeError("rolled back")
    except RuntimeError:
        pass
    """
)


def run(tmp_path: Path, *, committed_s: float, rolled_back_s: float, enabled: bool) -> list[dict]:
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(
        PASSBAND_VAR_DIR=str(tmp_path / "var"),
        DATABASE_URL=f"sqlite:///{tmp_path / 'timed.sqlite3'}",
        PASSBAND_TIME_WRITE_TRANSACTIONS="1" if enabled else "0",
        DJANGO_SETTINGS_MODULE="passband.settings",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")])),
    )
    subprocess.run(
        [sys.executable, "-c", SCRIPT, str(committed_s), str(rolled_back_s)], env=env, check=True, cwd=ROOT, timeout=120
    )
    folder = tmp_path / "var" / "write-transactions"
    return [json.loads(path.read_text()) for path in folder.glob("*.json")] if folder.exists() else []


def test_the_longest_committed_transaction_is_reported_with_its_first_statement(tmp_path):
    (report,) = run(tmp_path, committed_s=0.4, rolled_back_s=0, enabled=True)
    assert report["max_ms"] >= 400 and report["statement"].startswith("UPDATE held")
    assert report["pid"] > 0 and "-c" in report["process"]


def test_a_rolled_back_transaction_counts_too(tmp_path):
    (report,) = run(tmp_path, committed_s=0, rolled_back_s=0.4, enabled=True)
    assert report["max_ms"] >= 400 and report["statement"].startswith("DELETE FROM held")


def test_nothing_is_timed_unless_asked_for(tmp_path):
    assert run(tmp_path, committed_s=0, rolled_back_s=0, enabled=False) == []
