"""Run jobs as shell processes, many at once, from one thread.

Each job is `/bin/sh -c COMMAND` in a new session (so its own process group): a Ctrl+C in
the worker's terminal never reaches it, and a signal to the group reaches its
grandchildren. Output is read while the job runs (no pipe deadlock), keeping the last
`output_limit` bytes of each stream. A timeout sends SIGTERM to the group, then SIGKILL
after `kill_grace` seconds.
"""

from __future__ import annotations

import os
import selectors
import signal
import time
from dataclasses import dataclass
from typing import Callable, Hashable

from queuectl.host import procs

#: Seconds between SIGTERM and SIGKILL when a job's group is stopped.
KILL_GRACE = 5.0
#: Variables that belong to the worker's service manager and must not leak into jobs:
#: a job that inherited them could send READY/WATCHDOG for the worker (sd_notify(3)).
SCRUBBED_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
_READ_SIZE = 65536


@dataclass(frozen=True)
class RunResult:
    """How one run ended. `exit_code` is None if the job never started or died by a signal.

    `error` is None on success, else one line: "exit code 3", "killed by signal 9",
    "timed out after 2 s", "cannot start: ...". `duration` is seconds.
    """

    exit_code: int | None
    error: str | None
    stdout: bytes
    stderr: bytes
    duration: float
    timed_out: bool = False
    written: tuple[int, int] = (0, 0)  # bytes the run wrote in all to stdout and to stderr

    @property
    def ok(self) -> bool:
        return self.error is None


class Tail:
    """The last `limit` bytes written to a stream."""

    def __init__(self, limit: int):
        self.limit = limit
        self.buf = bytearray()
        self.total = 0  # bytes written in all

    def add(self, data: bytes) -> None:
        self.buf += data
        self.total += len(data)
        if len(self.buf) > 2 * self.limit:  # trim rarely: amortised O(1) per byte
            del self.buf[: len(self.buf) - self.limit]

    def value(self) -> bytes:
        return bytes(self.buf[-self.limit:]) if self.limit else b""

    def since(self, position: int) -> bytes:
        """The bytes written after the first `position` that the tail still holds (the last `limit` at most)."""
        n = min(self.total - position, len(self.buf), self.limit)
        return bytes(self.buf[-n:]) if n > 0 else b""


def job_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Return the worker's environment without SCRUBBED_ENV, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env.update(extra or {})
    return env


class JobEnvironment:
    """job_environment, encoded once: jobs get the worker's environment as it was at start.

    subprocess encodes every str variable on every start; bytes pass through, which
    saves a measurable share of a short job's cost.
    """

    def __init__(self):
        self.base = {os.fsencode(k): os.fsencode(v) for k, v in job_environment().items()}

    def job(self, extra: dict[str, str]) -> dict[bytes, bytes]:
        """Return the base environment plus `extra` (bytes)."""
        return {**self.base, **{os.fsencode(k): os.fsencode(v) for k, v in extra.items()}}


def signal_name(number: int) -> str:
    """Return "SIGTERM" for 15; real-time and unknown signals get "SIG<number>"."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def close_inherited_on_exec() -> None:
    """Mark every descriptor above 2 close-on-exec, so no job inherits one.

    posix_spawn has no close_fds: descriptors this process inherited from its parent (a
    terminal multiplexer's, a CI runner's) would reach every job. Python's own are
    close-on-exec already (PEP 446), and so are SQLite's.
    """
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                os.set_inheritable(fd, False)
            except OSError:
                pass  # the descriptor listing /proc/self/fd itself, gone by now


def spawn(command: str, cwd: str | None, env) -> tuple[int, int, int]:
    """Start `/bin/sh -c -- command` in a new session; return (pid, stdout fd, stderr fd) to read.

    stdin is /dev/null. Uses posix_spawn(3) (vfork and exec, none of subprocess's Python
    work per start, which is a large share of a short job's cost). Like subprocess, it
    gives the job default dispositions for SIGPIPE and SIGXFSZ, which Python ignores. The
    cwd is entered around the spawn, which is safe as the worker has one thread. Raises
    OSError (for example FileNotFoundError for a missing cwd) if the job cannot start.
    """
    out_r, out_w = os.pipe()  # both ends close on exec (PEP 446); dup2 onto 1 and 2 clears that
    err_r, err_w = os.pipe()
    here = None
    try:
        if cwd is not None:
            here = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
            os.chdir(cwd)
        pid = os.posix_spawn(
            "/bin/sh", ["/bin/sh", "-c", "--", command], env,  # --: a command may begin with a dash
            file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                          (os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)],
            setsid=True, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
        )
    except OSError:
        os.close(out_r)
        os.close(err_r)
        raise
    finally:
        if here is not None:
            os.fchdir(here)
            os.close(here)
        os.close(out_w)
        os.close(err_w)
    return pid, out_r, err_r


class RunningJob:
    """One started job: its process, its output so far, and its timeout state."""

    def __init__(self, pid: int, stdout: int, stderr: int, timeout: float | None, output_limit: int,
                 started: float):
        self.pid = pid
        self.pgid = pid  # a new session: the shell leads its own group
        self._pgid_start: int | None = None
        self.returncode: int | None = None
        self.started = started
        self.deadline = started + timeout if timeout else None
        self.timeout = timeout
        self.kill_at: float | None = None
        self.timed_out = False
        self.streams = {stdout: Tail(output_limit), stderr: Tail(output_limit)}
        self.flushed: tuple[int, int] = (0, 0)  # bytes of stdout and stderr the store has (live output)
        self.flushed_at = started  # monotonic time of the last live output recorded (or the start)
        for fd in self.streams:
            os.set_blocking(fd, False)
        try:
            self.pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.pidfd = None  # kernels before 5.3: exit is found by polling

    @property
    def pgid_start(self) -> int | None:
        """The shell's start time (clock ticks since boot), read when first asked for.

        Read late on purpose: /proc/PID/stat of a process in the middle of exec waits
        for it, which would cost every short job a share of its run.
        """
        if self._pgid_start is None and self.returncode is None:
            self._pgid_start = procs.process_start_time(self.pid)
        return self._pgid_start

    @property
    def written(self) -> tuple[int, int]:
        """Bytes written so far to stdout and to stderr."""
        out, err = self.streams.values()
        return out.total, err.total

    def unflushed(self) -> bool:
        """True if it wrote output that the store does not have yet (and the tail keeps any)."""
        return self.written != self.flushed and next(iter(self.streams.values())).limit > 0

    def output_since(self, positions: tuple[int, int]) -> tuple[bytes, bytes]:
        """What stdout and stderr hold of the bytes written after `positions`."""
        out, err = self.streams.values()
        return out.since(positions[0]), err.since(positions[1])

    def poll(self) -> bool:
        """Reap the shell if it has exited (without waiting); return True once it has."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode is not None

    def read(self, fd: int) -> bool:
        """Read what is available on `fd`; return False at end of file."""
        try:
            data = os.read(fd, _READ_SIZE)
        except BlockingIOError:
            return True
        if not data:
            return False
        self.streams[fd].add(data)
        return True

    def _drain(self, fd: int, max_reads: int = 1024) -> None:
        """Read what is buffered now; bounded, as a stray grandchild may still be writing."""
        for _ in range(max_reads):
            try:
                data = os.read(fd, _READ_SIZE)
            except (BlockingIOError, OSError):
                return
            if not data:
                return
            self.streams[fd].add(data)

    def stop(self, sig: int, now: float, grace: float) -> None:
        """Signal the job's process group; SIGKILL follows `grace` seconds later if it lives."""
        procs.signal_group(self.pgid, sig)
        if sig != signal.SIGKILL and self.kill_at is None:
            self.kill_at = now + grace

    def tick(self, now: float, grace: float) -> float | None:
        """Enforce the timeout at monotonic time `now`; return the next deadline, or None."""
        if self.deadline is not None and now >= self.deadline and not self.timed_out:
            self.timed_out = True
            self.stop(signal.SIGTERM, now, grace)
        if self.kill_at is not None and now >= self.kill_at:
            procs.signal_group(self.pgid, signal.SIGKILL)
            self.kill_at = None
        pending = [t for t in (None if self.timed_out else self.deadline, self.kill_at) if t is not None]
        return min(pending) if pending else None

    def finish(self, now: float) -> RunResult:
        """Reap the exited shell, drain its pipes and return the result."""
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        code = self.returncode
        for fd in self.streams:
            self._drain(fd)
            os.close(fd)
        if self.pidfd is not None:
            os.close(self.pidfd)
        if self.timed_out or self.kill_at is not None:
            # It was stopped (a timeout, a forced stop): no member that ignored SIGTERM may outlive it.
            procs.signal_group(self.pgid, signal.SIGKILL)
        if self.timed_out:
            error = f"timed out after {self.timeout:g} s"
        elif code < 0:
            error = f"killed by signal {-code} ({signal_name(-code)})"
        elif code > 0:
            error = f"exit code {code}"
        else:
            error = None
        stdout, stderr = (self.streams[fd].value() for fd in self.streams)
        return RunResult(
            exit_code=code if code >= 0 else None,
            error=error,
            stdout=stdout,
            stderr=stderr,
            duration=now - self.started,
            timed_out=self.timed_out,
            written=self.written,
        )


class Runner:
    """Start jobs and wait for any of them to end, multiplexing their pipes with one selector.

    Keys are the caller's (job ids). `clock` is monotonic seconds; tests may inject one.
    """

    def __init__(self, output_limit: int, kill_grace: float = KILL_GRACE,
                 clock: Callable[[], float] = time.monotonic):
        close_inherited_on_exec()
        self.output_limit = output_limit
        self.kill_grace = kill_grace
        self.clock = clock
        self.running: dict[Hashable, RunningJob] = {}
        self._done: list[tuple[Hashable, RunResult]] = []
        self._sel = selectors.DefaultSelector()
        self._wake_fds: set[int] = set()

    def close(self) -> None:
        self._sel.close()

    def add_wake_fd(self, fd: int) -> None:
        """Make `wait` return early when `fd` becomes readable (the caller drains it)."""
        self._sel.register(fd, selectors.EVENT_READ, ("wake", None))
        self._wake_fds.add(fd)

    def remove_wake_fd(self, fd: int) -> None:
        """Stop watching `fd` (it may be closed already)."""
        if fd in self._wake_fds:
            self._wake_fds.discard(fd)
            self._sel.unregister(fd)

    def start(self, key: Hashable, command: str, *, cwd: str | None = None, timeout: float | None = None,
              env: dict[str, str] | None = None) -> RunningJob | None:
        """Start `command` under /bin/sh; return the RunningJob, or None if it could not start.

        A job that cannot start (missing cwd, no permission) is reported by the next
        `wait` as a failed RunResult, not raised.
        """
        now = self.clock()
        try:
            pid, stdout, stderr = spawn(command, cwd, env if env is not None else job_environment())
        except OSError as e:
            reason = e.strerror or str(e)
            where = f": {e.filename}" if e.filename else ""
            self._done.append((key, RunResult(None, f"cannot start: {reason}{where}", b"", b"", 0.0)))
            return None
        job = RunningJob(pid, stdout, stderr, timeout, self.output_limit, now)
        self.running[key] = job
        for fd in job.streams:
            self._sel.register(fd, selectors.EVENT_READ, ("out", key))
        if job.pidfd is not None:
            self._sel.register(job.pidfd, selectors.EVENT_READ, ("exit", key))
        return job

    def stop_all(self, sig: int = signal.SIGTERM) -> None:
        """Signal every running job's process group (SIGKILL follows after kill_grace)."""
        now = self.clock()
        for job in self.running.values():
            job.stop(sig, now, self.kill_grace)

    def wait(self, timeout: float | None) -> tuple[list[tuple[Hashable, RunResult]], bool]:
        """Wait up to `timeout` seconds (None: forever) for jobs to end.

        Return (finished [(key, result)], woken): `woken` is True if a wake fd became
        readable. Returns as soon as at least one job has ended or a wake fd fires.
        """
        end = None if timeout is None else self.clock() + timeout
        woken = polled = False
        while True:
            now = self.clock()
            next_deadline = end
            for key, job in list(self.running.items()):
                d = job.tick(now, self.kill_grace)
                if d is not None and (next_deadline is None or d < next_deadline):
                    next_deadline = d
                if job.pidfd is None and job.poll():
                    self._reap(key)
            if self._done or woken:
                done, self._done = self._done, []
                return done, woken
            if end is not None and now >= end and polled:
                return [], False  # after one look at the pipes, even for a timeout of 0
            wait_for = None if next_deadline is None else max(0.0, next_deadline - now)
            if any(j.pidfd is None for j in self.running.values()):
                wait_for = 0.05 if wait_for is None else min(wait_for, 0.05)
            polled = True
            if not self._sel.get_map():
                time.sleep(wait_for if wait_for is not None else 0.05)
                continue
            for sel_key, _ in self._sel.select(wait_for):
                kind, key = sel_key.data
                if kind == "wake":
                    woken = True
                elif kind == "out" and key in self.running:
                    if not self.running[key].read(sel_key.fd):
                        self._sel.unregister(sel_key.fd)
                elif kind == "exit" and key in self.running:
                    self._reap(key)

    def _reap(self, key: Hashable) -> None:
        job = self.running.pop(key)
        for fd in (*job.streams, job.pidfd):
            if fd is not None and fd in self._sel.get_map():
                self._sel.unregister(fd)
        self._done.append((key, job.finish(self.clock())))


def run(command: str, *, cwd: str | None = None, timeout: float | None = None, output_limit: int = 1 << 20,
        env: dict[str, str] | None = None, kill_grace: float = KILL_GRACE) -> RunResult:
    """Run one job to its end and return its RunResult (a convenience over Runner)."""
    runner = Runner(output_limit, kill_grace)
    try:
        runner.start(0, command, cwd=cwd, timeout=timeout, env=env)
        while True:
            done, _ = runner.wait(None)
            if done:
                return done[0][1]
    finally:
        runner.close()
