"""A real terminal for tests: a tmux server on a socket of its own, a shell in its one pane, keys typed with
send-keys and the screen read with capture-pane (Debian's tmux; `apt-get install tmux`).

Each Terminal runs `sh` with a plain prompt, so that a test can type a command line, watch the screen
while the program runs, and read the shell's prompt and earlier lines back after it exits: the terminal
given back. Waits poll the screen until a condition holds, with a deadline; none sleeps a fixed time.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
import uuid

#: The shell's prompt in the pane.
PROMPT = "tty$ "


def missing() -> str | None:
    """Why a Terminal cannot run here (no tmux), or None."""
    return None if shutil.which("tmux") else "tmux is not installed (apt-get install tmux)"


class Terminal:
    """A tmux server of its own with one `width` x `height` pane running sh; `close` kills it and what it ran."""

    def __init__(self, width: int = 100, height: int = 30, env: dict | None = None):
        self.socket = f"qtest-{uuid.uuid4().hex[:12]}"
        environ = {**os.environ, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", **(env or {})}
        environ.pop("TMUX", None)
        self.env = environ
        self.tmux("new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height), "sh")
        try:
            self.tmux("set-option", "-g", "status", "off")  # the whole pane is the program's
            self.type(f"PS1='{PROMPT}'; clear")  # dash sets root's "# " whatever the environment says
            self.keys("Enter")
            self.wait_for(lambda s: s.strip() == PROMPT.strip(), message="the shell's prompt")
        except BaseException:  # no fixture will close a terminal that never came up
            self.close()
            raise

    def tmux(self, *args: str) -> str:
        """Run a tmux command on this server; return its stdout."""
        done = subprocess.run(["tmux", "-u", "-L", self.socket, "-f", "/dev/null", *args], capture_output=True,
                              text=True, env=self.env, timeout=30)
        if done.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def run(self, argv: list[str]) -> None:
        """Type a command line running `argv` and then echoing its exit status as "exit=N"."""
        self.type(f"{shlex.join(argv)}; echo exit=$?")
        self.keys("Enter")

    def type(self, text: str) -> None:
        """Type `text` literally."""
        self.tmux("send-keys", "-t", "t", "-l", text)

    def keys(self, *keys: str) -> None:
        """Press keys by tmux's names (Enter, Escape, Up, C-c) or as single characters."""
        self.tmux("send-keys", "-t", "t", *keys)

    def screen(self) -> str:
        """The pane's text as shown now, one line per row (trailing blanks cut)."""
        return self.tmux("capture-pane", "-p", "-t", "t")

    def lines(self) -> list[str]:
        return self.screen().splitlines()

    def size(self) -> tuple[int, int]:
        """The pane's (width, height)."""
        w, h = self.tmux("display-message", "-p", "-t", "t", "#{pane_width} #{pane_height}").split()
        return int(w), int(h)

    def resize(self, width: int, height: int) -> None:
        """Resize the window (the program gets SIGWINCH)."""
        self.tmux("resize-window", "-t", "t", "-x", str(width), "-y", str(height))

    def wait_for(self, condition, timeout: float = 30.0, message: str = "the screen") -> str:
        """Poll the screen until `condition(screen)` is true (a str: is on it); return that screen.
        Fails after `timeout` seconds, showing the last screen."""
        check = (lambda s: condition in s) if isinstance(condition, str) else condition
        deadline = time.monotonic() + timeout
        while True:
            shown = self.screen()
            if check(shown):
                return shown
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {message!r}; the screen:\n{shown}")
            time.sleep(0.05)

    def program_pid(self, timeout: float = 30.0) -> int:
        """The pid of the program the shell runs now (the shell's child)."""
        shell = int(self.tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip())
        deadline = time.monotonic() + timeout
        while True:
            try:
                with open(f"/proc/{shell}/task/{shell}/children") as f:
                    children = f.read().split()
            except OSError:
                children = []
            if children:
                return int(children[0])
            if time.monotonic() > deadline:
                raise AssertionError("the shell runs no program")
            time.sleep(0.05)

    def close(self) -> None:
        """Kill the server and the pane's processes (tmux sends them SIGHUP)."""
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, env=self.env, timeout=30)
