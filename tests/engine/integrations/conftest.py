"""A real release, built by the app, for the trainer integration tests.

The only coupling to the Django app is here: `release_dir` makes a release of the four tasks of
tests/releases/export_data.py (every band, so the tool task is in it too) and builds its files.
"""

import contextlib
import socket
import threading
import time

import pytest

from releases import services as releases
from tests.releases.export_data import calibrated_environment


@pytest.fixture
def release_dir(db, settings, tmp_path, arithmetic, alice, django_capture_on_commit_callbacks):
    """The folder of a ready release: native, trl, verifiers and nemo_gym, each as .jsonl and .parquet."""
    settings.MEDIA_ROOT = tmp_path / "media"
    model = calibrated_environment(arithmetic, alice)
    with django_capture_on_commit_callbacks(execute=False):  # build here, not on a Celery worker
        release = releases.release_create(user=alice, probe_model=model, environment=arithmetic, band="")
    release = releases.release_build(release_id=release.pk)
    assert release.status == "ready", release.status
    return releases.release_directory(release=release)


@contextlib.contextmanager
def serve_app(app):
    """Serve an ASGI app with uvicorn on a free port of 127.0.0.1 from a thread; yields its base URL."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws="websockets-sansio"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
