"""The terminal side of `queuectl top`: the curses loop, its keys, and giving the terminal back.

The loop reads through a queuectl.tui.source.Source once per interval, builds the model
(queuectl.tui.model) and draws the layout (queuectl.tui.layout) without flicker: the window is
erased, not cleared, and drawn with noutrefresh and one doupdate, so curses sends only the
cells that changed. It redraws after a reading, a key or a resize (KEY_RESIZE), never in between.

The terminal is always given back: `session` restores it on any way out of the loop, and
SIGTERM and SIGHUP (an SSH session that drops) raise Ended inside it, as Ctrl+C raises
KeyboardInterrupt. A database that becomes unavailable (DatabaseUnavailable: a PostgreSQL
server restarting, a SQLite file locked past the busy timeout) is said in the header while the
last reading stays on screen, and read again each interval, as queuectl.api.outage rides out
outages; any other error ends the view.
"""

from __future__ import annotations

import curses
import signal
import time

from queuectl.domain.errors import DatabaseUnavailable, NotFound
from queuectl.tui import layout, model
from queuectl.domain.models import printable
from queuectl.tui.layout import ASCII, UNICODE, cells

#: Milliseconds a key is waited for before the loop looks at the clock again.
TICK_MS = 100
#: Seconds between two reads of the job a job view follows, at most (a shorter interval reads more often).
FOLLOW_EVERY = 1.0
#: Keys, as get_wch returns them.
ENTER = ("\n", "\r", curses.KEY_ENTER)
ESC = "\x1b"
BACKSPACE = ("\x7f", "\b", curses.KEY_BACKSPACE)
UP, DOWN = (curses.KEY_UP, "k"), (curses.KEY_DOWN, "j")
PAGE_UP, PAGE_DOWN = (curses.KEY_PPAGE,), (curses.KEY_NPAGE, " ")
FIRST, LAST = (curses.KEY_HOME, "g"), (curses.KEY_END, "G")
#: The keys that leave the job view, besides Esc and q.
BACK = (*BACKSPACE, curses.KEY_LEFT, "h")


class Ended(BaseException):
    """A signal ended the view (SIGTERM, SIGHUP): raised inside the loop so that `session` gives the
    terminal back. A BaseException, as KeyboardInterrupt is, so that no `except Exception` holds it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def run(source, view: model.View, first: model.Reading, encoding: str) -> None:
    """Show the view on this terminal until `q`; raises Ended (SIGTERM, SIGHUP), KeyboardInterrupt (Ctrl+C)
    or the error that ended it, the terminal given back each time.

    `first`: the reading to show at once; `encoding`: the locale's (UTF-8 draws Unicode blocks, else ASCII).
    """
    def end(signum, frame):
        raise Ended(signum)

    kept = {s: signal.signal(s, end) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        session(Top(source, view, first, encoding).loop)
    finally:
        for s, handler in kept.items():
            signal.signal(s, handler)


def session(loop) -> None:
    """Run `loop(window)` in curses and give the terminal back however it ends, as curses.wrapper does, except
    that a terminal already gone (SIGHUP after an SSH session dropped) does not turn the way out into an
    error: each step of giving it back is tried alone."""
    scr = curses.initscr()
    try:
        curses.noecho()
        curses.cbreak()
        scr.keypad(True)
        try:
            curses.start_color()
        except curses.error:
            pass
        loop(scr)
    finally:
        for restore in (lambda: scr.keypad(False), curses.echo, curses.nocbreak, curses.endwin):
            try:
                restore()
            except curses.error:  # nothing left to give back to
                pass


class Top:
    """One viewer's loop: what it shows (`mode`: main, help, filter, confirm or job) and its keys."""

    def __init__(self, source, view: model.View, first: model.Reading, encoding: str):
        self.source = source
        self.view = view
        self.reading = first
        self.encoding = encoding
        self.glyphs = UNICODE if encoding.replace("-", "").lower() == "utf8" else ASCII
        self.mode = "main"
        self.pending: tuple[str, str] | None = None  # the action a confirmation waits for: (verb, job id or queue)
        self.job_id: str | None = None  # the job the job view follows
        self.job = None
        self.back = 0  # lines the job view is scrolled up from the end of the output
        self.model = model.build(first, view)
        self.next_read = time.monotonic() + view.interval
        self.styles: dict[str, int] = {}

    def loop(self, scr) -> None:
        """Read, draw and take keys until `q`."""
        self.setup(scr)
        self.draw(scr)
        while True:
            changed = self.tick()
            try:
                key = scr.get_wch()
            except curses.error:  # no key within TICK_MS
                key = None
            if key == curses.KEY_RESIZE:
                curses.update_lines_cols()
                changed = True
            elif key is not None:
                if self.key(key) == "quit":
                    return
                changed = True
            if changed:
                self.draw(scr)

    def setup(self, scr) -> None:
        """Hide the cursor, take keys as they come (TICK_MS at most), and name the styles' attributes."""
        try:
            curses.curs_set(0)
        except curses.error:  # a terminal that cannot hide it
            pass
        curses.set_escdelay(25)  # Esc alone is a key here, not the start of a sequence to wait a second for
        scr.keypad(True)
        scr.timeout(TICK_MS)
        alert = curses.A_BOLD
        if curses.has_colors():
            curses.use_default_colors()
            curses.init_pair(1, curses.COLOR_RED, -1)
            alert |= curses.color_pair(1)
        self.styles = {"normal": curses.A_NORMAL, "title": curses.A_BOLD, "head": curses.A_UNDERLINE,
                       "selected": curses.A_REVERSE, "alert": alert, "dim": curses.A_DIM}

    def tick(self) -> bool:
        """Read again when the interval has passed (the followed job in the job view); return True if it did."""
        now = time.monotonic()
        if now < self.next_read:
            return False
        if self.mode == "job":
            self.next_read = now + min(self.view.interval, FOLLOW_EVERY)
            self.read_job()
            return True
        self.next_read = now + self.view.interval
        try:
            self.reading = self.source.read()
        except DatabaseUnavailable as e:
            if self.view.outage is None:
                self.view.outage_since = now
            self.view.outage = str(e)
        else:
            self.view.outage = self.view.outage_since = None
            self.view.read_at = time.time()
        self.model = model.build(self.reading, self.view)
        return True

    def read_job(self) -> None:
        """Read the followed job and its output; an outage or a job gone is said in the job view's footer."""
        try:
            self.job = self.source.job(self.job_id)
            self.view.message = ""
        except DatabaseUnavailable as e:
            self.view.message = f"database unavailable: {e}; retrying"
        except NotFound:
            self.view.message = "the job is gone (purged)"

    # -- keys -------------------------------------------------------------------------------------

    def key(self, key) -> str | None:
        """Act on one key in the current mode; return "quit" to end the view."""
        if self.mode == "help":
            self.mode = "main"
        elif self.mode == "filter":
            self.filter_key(key)
        elif self.mode == "confirm":
            self.confirm_key(key)
        elif self.mode == "job":
            self.job_key(key)
        else:
            return self.main_key(key)
        return None

    def main_key(self, key) -> str | None:
        """A key of the main view."""
        self.view.message = ""
        selectable, page = self.model.selectable, max(1, curses.LINES // 3)
        steps = {**dict.fromkeys(UP, -1), **dict.fromkeys(DOWN, 1), **dict.fromkeys(PAGE_UP, -page),
                 **dict.fromkeys(PAGE_DOWN, page), **dict.fromkeys(FIRST, -len(selectable)),
                 **dict.fromkeys(LAST, len(selectable))}
        selected = self.view.selected
        if key in steps:
            model.move(self.view, selectable, steps[key])
        elif key == "q":
            return "quit"
        elif key == "?":
            self.mode = "help"
        elif key == "/":
            self.mode = "filter"
        elif key == ESC:
            self.view.filter = ""
        elif key in ENTER:
            if selected and selected[0] == "job":
                self.open_job(selected[1])
            else:
                self.view.message = "Enter opens a job: select a running or dead one"
        elif key in ("p", "c", "r"):
            self.action(key, selected)
        self.model = model.build(self.reading, self.view)
        return None

    def action(self, key: str, selected) -> None:
        """Start `p` (at once), or `c` and `r` (after a confirmation), on the selection."""
        if self.view.read_only:
            self.view.message = "read-only: no actions (" + (self.view.why_read_only or "--read-only") + ")"
            return
        if selected is None:
            self.view.message = "nothing selected"
            return
        if key == "p":
            queue = selected[1] if selected[0] == "queue" else self.queue_of(selected[1])
            if queue is not None:
                self.view.message = self.source.toggle_pause(queue, queue in self.reading.snapshot.paused)
                self.next_read = 0.0  # show what it did at once
            return
        if selected[0] != "job":
            self.view.message = f"select a job to {'cancel' if key == 'c' else 'retry'}"
            return
        verb = "cancel" if key == "c" else "retry"
        self.pending = (verb, selected[1])
        self.mode = "confirm"
        self.view.message = f"{verb} job {selected[1]}? y: yes, any other key: no"

    def queue_of(self, job_id: str) -> str | None:
        """The queue of a job of the reading."""
        return next((j.queue for j in (*self.reading.running, *self.reading.dead) if j.id == job_id), None)

    def confirm_key(self, key) -> None:
        """y does the action waiting for it; any other key drops it."""
        verb, job_id = self.pending
        self.mode, self.pending = "main", None
        if key in ("y", "Y"):
            self.view.message = self.source.cancel(job_id) if verb == "cancel" else self.source.retry(job_id)
            self.next_read = 0.0
        else:
            self.view.message = f"not done: {verb} job {job_id}"
        self.model = model.build(self.reading, self.view)

    def filter_key(self, key) -> None:
        """Typing the filter: it applies as it is typed; Enter keeps it, Esc clears it."""
        if key in ENTER:
            self.mode = "main"
        elif key == ESC:
            self.view.filter, self.mode = "", "main"
        elif key in BACKSPACE:
            self.view.filter = self.view.filter[:-1]
        elif isinstance(key, str) and key.isprintable():
            self.view.filter += key
        self.model = model.build(self.reading, self.view)

    def open_job(self, job_id: str) -> None:
        """Show job `job_id`, followed."""
        self.mode, self.job_id, self.job, self.back = "job", job_id, None, 0
        self.read_job()
        self.next_read = time.monotonic() + min(self.view.interval, FOLLOW_EVERY)

    def job_key(self, key) -> None:
        """A key of the job view: scroll its output, or go back."""
        page = max(1, curses.LINES - 8)
        scroll = {**dict.fromkeys(UP, 1), **dict.fromkeys(DOWN, -1), **dict.fromkeys(PAGE_UP, page),
                  **dict.fromkeys(PAGE_DOWN, -page), **dict.fromkeys(LAST, -self.back)}
        if key in (ESC, "q") or key in BACK:
            self.mode, self.view.message = "main", ""
            self.next_read = 0.0
        elif key in scroll:
            self.back = max(0, self.back + scroll[key])

    # -- drawing ----------------------------------------------------------------------------------

    def lines(self, width: int, height: int) -> list:
        """The lines of the current mode at this size."""
        if self.mode == "help":
            return layout.help_screen(width, height, self.view.read_only, self.glyphs)
        if self.mode == "job":
            live = "" if self.job is not None and self.job.state.ended else "following; "  # an ended job's output is all
            title = f"queuectl top - job {printable(self.job_id)} ({live}Esc or q: back)"
            if self.job is None:
                record, output = [self.view.message or "reading..."], []
            else:
                record, output = model.detail(self.job, time.time())
            footer = self.view.message or "up/down: scroll the output  End: follow its end  Esc or q: back"
            return layout.detail(title, record, output, width, height, self.back, footer, self.glyphs)
        shown = self.model
        if self.mode == "filter":
            shown = shown._replace(footer=f"filter: {printable(self.view.filter)}_  (Enter: keep, Esc: clear)")
        return layout.screen(shown, width, height, self.view.selected, self.glyphs)

    def draw(self, scr) -> None:
        """Draw the current mode over what is on screen, erased not cleared; one doupdate."""
        height, width = scr.getmaxyx()
        scr.erase()
        for y, ln in enumerate(self.lines(width, height)[:height]):
            x = 0
            for text, style in ln:
                if self.glyphs is ASCII:
                    text = text.encode("ascii", "replace").decode("ascii")
                attr = self.styles.get(style, curses.A_NORMAL)
                try:
                    scr.addstr(y, x, text[:max(0, width - x)], attr)
                except curses.error:  # the bottom-right cell: curses cannot move past it, the text is drawn
                    pass
                x += cells(text)
        scr.noutrefresh()
        curses.doupdate()

