"""Keep parallel test processes (pytest-xdist) apart: each its own Redis database, SQLite file and var folder.

Loaded with `-p tests.support.parallel` (pyproject's addopts), before pytest-django reads the settings, so the
environment it rewrites is the one settings.py and every worker subprocess see. PostgreSQL needs nothing here:
pytest-django already gives each process its own test database (test_passband_gw0, test_passband_gw1, ...).
A run without xdist is left exactly as it was.
"""

import os
import re
from pathlib import Path

_REDIS_DATABASES = 16


def _worker_number() -> int | None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    match = re.fullmatch(r"gw(\d+)", worker)
    return int(match.group(1)) if match else None


def _own_redis_database(url: str, number: int) -> str:
    """redis://host:port/14 -> redis://host:port/(14 + number) mod 16; a URL without a database starts at 0."""
    match = re.fullmatch(r"(rediss?://[^/]*)(?:/(\d*))?", url)
    if not match:
        return url
    base = int(match.group(2) or 0)
    return f"{match.group(1)}/{(base + number) % _REDIS_DATABASES}"


def _own_sqlite_file(url: str, number: int) -> str:
    if not url.startswith("sqlite:///"):
        return url
    path = Path(url.removeprefix("sqlite:///"))
    return "sqlite:///" + str(path.with_name(f"{path.stem}-gw{number}{path.suffix}"))


def isolate(environ: dict, number: int) -> None:
    """Rewrite the shared resources in `environ` for parallel process `number`."""
    if "CELERY_BROKER_URL" in environ:
        environ["CELERY_BROKER_URL"] = _own_redis_database(environ["CELERY_BROKER_URL"], number)
    if "DATABASE_URL" in environ:
        environ["DATABASE_URL"] = _own_sqlite_file(environ["DATABASE_URL"], number)
    # Each process's share of the cores for torch's and BLAS's thread pools: two processes each spinning
    # as many threads as the machine has cores slow each other down several times over.
    processes = int(environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // processes)))
    root = Path(__file__).resolve().parents[2]
    environ["PASSBAND_VAR_DIR"] = str(Path(environ.get("PASSBAND_VAR_DIR", root / "var")) / f"gw{number}")


_number = _worker_number()
if _number is not None:
    isolate(os.environ, _number)
