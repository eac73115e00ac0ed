"""The embedded default's broker (passband/broker.py) between real processes: a reader never sees half a
message, every message is read once, and a message a killed worker had in hand is handed out again."""

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from kombu import Connection

import passband.broker  # noqa: F401  (registers the transport)

ROOT = Path(__file__).resolve().parents[1]
PAYLOAD = "x" * 200_000  # large enough that a write takes several system calls


def _connection(folder: Path) -> Connection:
    return Connection(
        "passband-filesystem://",
        transport_options={
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "control_folder": str(folder / "control"),
            "polling_interval": 0.01,
        },
    )


def _folders(tmp_path: Path) -> Path:
    for name in ("queue", "control", "in-flight"):
        (tmp_path / name).mkdir()
    return tmp_path


def _queue_name(folder: Path) -> str:
    # One per test: kombu remembers in the process which exchanges it declared, whatever their folder.
    return f"jobs-{folder.name}"


def _write(folder: Path, start: int, count: int) -> None:
    with _connection(folder) as connection:
        queue = connection.SimpleQueue(_queue_name(folder))
        for number in range(start, start + count):
            queue.put({"number": number, "payload": PAYLOAD})
        queue.close()


def _read(folder: Path, results) -> None:
    """Read until no message comes for a while; report every number read (and any error)."""
    seen = []
    try:
        with _connection(folder) as connection:
            queue = connection.SimpleQueue(_queue_name(folder))
            while True:
                try:
                    message = queue.get(timeout=3)
                except queue.Empty:
                    break
                body = message.payload
                assert body["payload"] == PAYLOAD
                seen.append(body["number"])
                message.ack()
            queue.close()
    except Exception as error:  # reported to the test, which fails on it
        results.put(("error", repr(error)))
    results.put(("seen", seen))


def test_readers_beside_writers_get_every_message_whole_and_once(tmp_path):
    folder = _folders(tmp_path)
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    readers = [context.Process(target=_read, args=(folder, results)) for _ in range(3)]
    writers = [context.Process(target=_write, args=(folder, 1000 * n, 60)) for n in range(3)]
    for process in readers + writers:
        process.start()
    for process in writers + readers:
        process.join(timeout=120)
    reports = [results.get(timeout=10) for _ in readers]
    assert [report for report in reports if report[0] == "error"] == []
    numbers = sorted(number for _, seen in reports for number in seen)
    assert numbers == sorted(1000 * n + i for n in range(3) for i in range(60))
    # Acknowledged: nothing left in the queue or in flight, and no half-written file.
    assert os.listdir(folder / "queue") == []
    assert [name for _, _, files in os.walk(folder / "in-flight") for name in files if name.endswith(".msg")] == []


TAKE_AND_HANG = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from tests.test_filesystem_broker import _connection, _queue_name
    with _connection(Path(sys.argv[1])) as connection:
        queue = connection.SimpleQueue(_queue_name(Path(sys.argv[1])))
        message = queue.get(timeout=30)
        print(message.payload["number"], flush=True)
        time.sleep(600)  # killed here, holding the message unacknowledged
    """
)


def test_a_message_a_killed_worker_held_is_handed_out_again(tmp_path):
    folder = _folders(tmp_path)
    _write(folder, 7, 1)
    holder = subprocess.Popen(
        [sys.executable, "-c", TAKE_AND_HANG, str(folder), str(ROOT)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "7"
        assert os.listdir(folder / "queue") == []  # in flight, not in the queue
        with _connection(folder) as connection:
            queue = connection.SimpleQueue(_queue_name(folder))
            try:
                queue.get(timeout=0.5)
                raise AssertionError("a message held by a live worker was handed out twice")
            except queue.Empty:
                pass
            queue.close()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    with _connection(folder) as connection:  # a worker starting takes back what the dead one held
        queue = connection.SimpleQueue(_queue_name(folder))
        message = queue.get(timeout=5)
        assert message.payload["number"] == 7
        message.ack()
        queue.close()
    assert os.listdir(folder / "queue") == []


def test_a_rejected_message_goes_back_to_the_queue(tmp_path):
    folder = _folders(tmp_path)
    _write(folder, 1, 1)
    with _connection(folder) as connection:
        queue = connection.SimpleQueue(_queue_name(folder))
        queue.get(timeout=5).requeue()
        again = queue.get(timeout=5)
        assert again.payload["number"] == 1
        again.ack()
        queue.close()
    assert os.listdir(folder / "queue") == []
