"""A stand-in for systemd's notify socket: a real AF_UNIX datagram socket that records every message a process
sends to NOTIFY_SOCKET (sd_notify(3)), with its arrival time and its sender's pid."""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field

from support.waiting import wait_for


@dataclass
class Message:
    """One datagram: when it arrived (time.monotonic()), who sent it (pid), and its text."""

    at: float
    pid: int | None
    text: str
    lines: list[str] = field(init=False)

    def __post_init__(self):
        self.lines = self.text.split("\n")

    def get(self, key: str) -> str | None:
        values = [line.split("=", 1)[1] for line in self.lines if line.startswith(key + "=")]
        return values[-1] if values else None


_SETTLE = "X-QUEUECTL-TEST-SETTLE="


class NotifySocket:
    """A bound AF_UNIX datagram socket recording every message, like systemd's notify socket.

    `address` is what goes into NOTIFY_SOCKET: a path, or "@name" for an abstract socket.
    `on_message(message)` runs in the reader thread before the message is recorded, so a
    test that waits for the message also sees what the callback found at that moment.
    """

    def __init__(self, address: str, on_message=None, prepare=None):
        self.address = address
        self.on_message = on_message
        self.prepare = prepare  # run first in the reader thread (e.g. to open a store there)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind("\0" + address[1:] if address.startswith("@") else address)
        self.sock.settimeout(0.05)
        self._messages: list[Message] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.errors: list[BaseException] = []
        self._settled: set[str] = set()
        self._thread = threading.Thread(target=self._read, name=f"notify-{address}", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        creds = struct.calcsize("3i")
        if self.prepare is not None:
            try:
                self.prepare()
            except BaseException as e:
                self.errors.append(e)
        while not self._stop.is_set():
            try:
                data, ancillary, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(creds))
            except socket.timeout:
                continue
            except OSError:
                return
            at = time.monotonic()
            pid = None
            for level, kind, cdata in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid = struct.unpack("3i", cdata[:creds])[0]
            message = Message(at, pid, data.decode("utf-8", "replace"))
            if message.text.startswith(_SETTLE):
                self._settled.add(message.text)
                continue
            if self.on_message is not None:
                try:
                    self.on_message(message)
                except BaseException as e:  # reported by the test, not lost in the thread
                    self.errors.append(e)
            with self._lock:
                self._messages.append(message)

    def settle(self, timeout: float = 30.0) -> None:
        """Return once every datagram already sent here has been recorded.

        Sends a marker and waits for the reader to see it: a datagram socket's queue is
        first in, first out, so what a worker sent before it exited comes first.
        """
        marker = f"{_SETTLE}{uuid.uuid4().hex}"
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(marker.encode(), self.sock.getsockname())
        wait_for(lambda: marker in self._settled, timeout=timeout, message="the notify reader to catch up")

    @property
    def messages(self) -> list[Message]:
        with self._lock:
            return list(self._messages)

    def with_line(self, line: str) -> list[Message]:
        return [m for m in self.messages if line in m.lines]

    def pings(self) -> list[float]:
        """Arrival times of the WATCHDOG=1 messages."""
        return [m.at for m in self.with_line("WATCHDOG=1")]

    def statuses(self) -> list[str]:
        return [s for s in (m.get("STATUS") for m in self.messages) if s is not None]

    def dump(self, since: float = 0.0) -> str:
        return "\n".join(f"  {m.at - since:8.3f} pid={m.pid} {m.text!r}" for m in self.messages)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()
