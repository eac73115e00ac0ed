"""The embedded default's broker: kombu's filesystem transport, made safe for several processes.

kombu's own transport writes a message file in place (under an advisory lock) while a reader moves and
reads it without the lock, so a worker can read half a message and stop on a JSONDecodeError; and it deletes
a message as it hands it out, so a worker killed with the message in hand loses it. Here:

- a message is written to a hidden temporary file in the queue folder and `os.replace`d to its name, so a
  reader sees a whole message or none;
- a worker takes a message by renaming it into its own in-flight folder (one rename wins; no copy), and the
  acknowledgement deletes it there; a rejected or restored message goes back to the queue;
- each in-flight folder holds a lock file its process keeps locked (flock) while it lives; a process that
  finds another's folder unlocked knows its owner is gone (the kernel drops the lock of a killed process)
  and moves its messages back to the queue.

Registered as the kombu transport `passband-filesystem`; settings turn `filesystem://` into it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
import uuid

from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.transport.virtual.base import QoS as BaseQoS
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)

ALIAS = "passband-filesystem"
IN_FLIGHT = "in-flight"
LOCK_NAME = ".owner.lock"
# How often a consuming process looks for in-flight folders of processes that are gone.
RECOVER_EVERY_S = 10.0


class QoS(BaseQoS):
    """Acknowledging a message deletes its in-flight file; rejecting one without requeue does too."""

    def ack(self, delivery_tag):
        self.channel.in_flight_done(delivery_tag)
        super().ack(delivery_tag)

    def reject(self, delivery_tag, requeue=False):
        super().reject(delivery_tag, requeue=requeue)
        self.channel.in_flight_done(delivery_tag)


class Channel(filesystem.Channel):
    QoS = QoS

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._in_flight: dict[str, str] = {}  # delivery tag -> its file in this process's in-flight folder
        self._own_folder: str | None = None
        self._owner_pid = 0
        self._lock_file = None
        self._recovered_at = 0.0
        self._no_ack_queues: set[str] = set()  # consumed without acknowledgements: nothing to keep in flight

    # -- writing -------------------------------------------------------------------------------------

    def _put(self, queue, payload, **kwargs):
        """Write the message whole under a hidden name, then rename it into place (atomic on one filesystem)."""
        name = f"{time.time_ns() // 1_000_000:015d}_{uuid.uuid4()}.{queue}.msg"
        temporary = os.path.join(self.data_folder_out, f".{uuid.uuid4().hex}.writing")
        try:
            with open(temporary, "wb") as handle:
                handle.write(dumps(payload).encode())
            os.replace(temporary, os.path.join(self.data_folder_out, name))
        except OSError as error:
            raise filesystem.ChannelError(f"Cannot add a message to {self.data_folder_out!r}: {error}") from error

    # -- reading -------------------------------------------------------------------------------------

    def _get(self, queue):
        """Take the oldest message of `queue` by renaming it into this process's in-flight folder."""
        if time.monotonic() - self._recovered_at > RECOVER_EVERY_S:
            self.recover_abandoned()
        suffix = f"{queue}.msg"
        no_ack = queue in self._no_ack_queues
        for filename in sorted(os.listdir(self.data_folder_in)):
            if filename.startswith(".") or filename.partition(".")[2] != suffix:
                continue
            source = os.path.join(self.data_folder_in, filename)
            target = os.path.join(self._in_flight_folder(), filename)
            try:
                os.rename(source, target)
            except FileNotFoundError:
                continue  # another worker took it first
            with open(target, "rb") as handle:
                payload = loads(handle.read())
            tag = payload.get("properties", {}).get("delivery_tag")
            if no_ack or tag is None:
                os.remove(target)
            else:
                self._in_flight[tag] = target
            return payload
        raise filesystem.Empty()

    def in_flight_done(self, delivery_tag) -> None:
        """The message was acknowledged, rejected or restored: its in-flight file goes."""
        path = self._in_flight.pop(delivery_tag, None)
        if path is not None:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass

    def _restore(self, message):
        super()._restore(message)  # a new file in the queue, then the in-flight copy goes
        self.in_flight_done(message.delivery_tag)

    # -- in-flight folders ---------------------------------------------------------------------------

    def _in_flight_root(self) -> str:
        return os.path.join(os.path.dirname(os.path.abspath(self.data_folder_in)), IN_FLIGHT)

    def _in_flight_folder(self) -> str:
        """This process's folder, locked for as long as the process lives (made on first use, and again
        after a fork: a child takes messages into a folder of its own)."""
        if self._own_folder is None or self._owner_pid != os.getpid():
            root = self._in_flight_root()
            name = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
            # Locked under a hidden name first, which recovery skips: it never sees the folder unlocked.
            making = os.path.join(root, f".{name}")
            os.makedirs(making)
            self._lock_file = open(os.path.join(making, LOCK_NAME), "w")
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(making, os.path.join(root, name))
            self._own_folder, self._owner_pid = os.path.join(root, name), os.getpid()
        return self._own_folder

    def recover_abandoned(self) -> int:
        """Move the messages of in-flight folders whose process is gone back to the queue; returns how many."""
        self._recovered_at = time.monotonic()
        root = self._in_flight_root()
        if not os.path.isdir(root):
            return 0
        moved = 0
        for name in os.listdir(root):
            folder = os.path.join(root, name)
            if name.startswith(".") or folder == self._own_folder:
                continue
            moved += _recover_folder(folder, queue_folder=self.data_folder_in)
        if moved:
            logger.warning("broker: %d message(s) of a worker that stopped were queued again", moved)
        return moved

    def basic_consume(self, queue, no_ack, *args, **kwargs):
        if not self._recovered_at:
            self.recover_abandoned()  # a worker starting takes back what a dead one had in hand
        if no_ack:
            self._no_ack_queues.add(queue)
        return super().basic_consume(queue, no_ack, *args, **kwargs)

    def basic_get(self, queue, no_ack=False, **kwargs):
        if not no_ack:
            return super().basic_get(queue, no_ack=no_ack, **kwargs)
        self._no_ack_queues.add(queue)
        try:
            return super().basic_get(queue, no_ack=no_ack, **kwargs)
        finally:
            self._no_ack_queues.discard(queue)


def _recover_folder(folder: str, *, queue_folder: str) -> int:
    """If no process holds `folder`'s lock, move its messages back to `queue_folder` and remove it."""
    try:
        lock = open(os.path.join(folder, LOCK_NAME), "a")
    except OSError:
        return 0
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # its process is alive
        moved = 0
        for filename in os.listdir(folder):
            if filename.endswith(".msg"):
                os.replace(os.path.join(folder, filename), os.path.join(queue_folder, filename))
                moved += 1
        os.remove(os.path.join(folder, LOCK_NAME))
        try:
            os.rmdir(folder)
        except OSError:
            pass
    return moved


class Transport(filesystem.Transport):
    Channel = Channel
    driver_name = ALIAS


TRANSPORT_ALIASES[ALIAS] = "passband.broker:Transport"
