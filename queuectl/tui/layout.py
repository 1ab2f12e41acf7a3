"""Where `queuectl top` puts what it shows: pure, from a Model and a terminal's size to the lines to draw.

A screen is a list of lines, each a tuple of (text, style) segments whose text is at most the
terminal's width in cells; styles are names ("title", "head", "selected", "alert", "dim",
"normal") that queuectl.tui.app maps to curses attributes. Panes stack in one column, or two
from WIDE columns on; when the height is short, rows are cut (the title says how many are
shown) and then whole panes are left out, least needed first; below MIN_SIZE the screen is one
line saying what it needs.
"""

from __future__ import annotations

from typing import NamedTuple

from queuectl.tui.model import Model, Pane, Spark

#: The smallest terminal laid out (columns, lines); a smaller one gets one line that says so.
MIN_SIZE = (40, 10)
#: From this many columns on, the panes go in two columns.
WIDE = 160
#: Panes left out first when the height is short (the queues pane stays).
DROP_PANES = ("schedules", "dead", "workers", "throughput", "running")
#: The order in which panes get the lines left once each shows a row: the most needed first.
GROW_ORDER = ("queues", "running", "throughput", "dead", "workers", "schedules")
#: Which panes go in which column of a wide terminal.
LEFT, RIGHT = ("queues", "throughput", "schedules"), ("workers", "running", "dead")
#: The widest a column other than the flexible one grows (ids and names past it are cut).
COLUMN_MAX = 28


def cells(text: str) -> int:
    """Return the terminal cells `text` (already printable) takes: 2 for each wide (East Asian) character, 0 for
    a combining one."""
    if text.isascii():
        return len(text)
    from unicodedata import combining, east_asian_width

    return sum(0 if combining(ch) else 2 if east_asian_width(ch) in "WF" else 1 for ch in text)


def clip(text: str, width: int, more: str = "…") -> str:
    """Return `text` (already printable) cut to at most `width` terminal cells, ending in `more` (one cell) where
    it was cut."""
    if width <= 0:
        return ""
    if cells(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        w = cells(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + more


class Glyphs(NamedTuple):
    """The characters drawn: Unicode blocks where the terminal's encoding is UTF-8, ASCII elsewhere."""

    levels: str
    more: str
    rule: str


UNICODE = Glyphs(" ▁▂▃▄▅▆▇█", "…", "│")
ASCII = Glyphs(" .,:-=+*#", "~", "|")

Line = tuple  # of (text, style) segments


def line(text: str, style: str, width: int, glyphs: Glyphs = UNICODE) -> Line:
    """One line of one segment, cut to `width` cells."""
    return ((clip(text, width, glyphs.more), style),)


def text_of(ln: Line) -> str:
    """The text of a line, its segments joined (for tests and captures)."""
    return "".join(t for t, _ in ln)


def too_small(width: int, height: int) -> list[Line]:
    """The one line of a terminal below MIN_SIZE."""
    full = f"terminal too small: need {MIN_SIZE[0]}x{MIN_SIZE[1]}"
    short = f"need {MIN_SIZE[0]}x{MIN_SIZE[1]}"
    return [line(full if width >= len(full) else short, "alert", width)] if height > 0 and width > 0 else []


def spark(values: tuple[int, ...], width: int, glyphs: Glyphs) -> str:
    """Draw the last `width` values as a sparkline scaled to their largest (0: a blank)."""
    shown = values[-width:] if width > 0 else ()
    top = max(shown, default=0)
    steps = len(glyphs.levels) - 1
    return "".join(glyphs.levels[0 if v <= 0 else max(1, round(v * steps / top))] for v in shown)


def screen(model: Model, width: int, height: int, selected=None, glyphs: Glyphs = UNICODE) -> list[Line]:
    """Return the lines of the main view of `model` in a `width` x `height` terminal (at most `height` lines)."""
    if width < MIN_SIZE[0] or height < MIN_SIZE[1]:
        return too_small(width, height)
    top = [line(t, s, width, glyphs) for t, s in model.header]
    bottom = [line(model.footer, "dim" if model.footer.startswith("j/k") else "alert",
                   width, glyphs)]
    room = height - len(top) - len(bottom)
    if width >= WIDE:
        half = (width - 3) // 2
        columns = [stack([p for p in model.panes if p.name in names], half, room, selected, glyphs)
                   for names in (LEFT, RIGHT)]
        left, right = (c + [()] * (room - len(c)) for c in columns)
        body = [pad(a, half) + ((f" {glyphs.rule} ", "dim"),) + b for a, b in zip(left, right)]
    else:
        body = stack(model.panes, width, room, selected, glyphs)
    return top + body + [()] * (room - len(body)) + bottom


def pad(ln: Line, width: int) -> Line:
    """`ln` filled with spaces to `width` cells."""
    used = sum(cells(t) for t, _ in ln)
    return ln + ((" " * (width - used), "normal"),) if used < width else ln


def stack(panes: list[Pane], width: int, height: int, selected, glyphs: Glyphs) -> list[Line]:
    """Lay `panes` one under the other in `height` lines: each gets its title, its header and as many rows as
    fit, shared in turn; panes that cannot get a row are left out (DROP_PANES' order)."""
    panes = list(panes)
    want = {p.name: 2 + len(p.rows) if p.rows else 1 for p in panes}

    def least(p):
        return min(want[p.name], 3)
    for name in DROP_PANES:
        if sum(least(p) for p in panes) <= height:
            break
        panes = [p for p in panes if p.name != name]
    while panes and sum(least(p) for p in panes) > height:
        panes.pop()
    given = {p.name: least(p) for p in panes}
    left = height - sum(given.values())
    for p in panes:  # the queues first, up to half the height: what the view is for
        if p.name == "queues":
            more = min(left, max(0, min(want[p.name], height // 2) - given[p.name]))
            given[p.name] += more
            left -= more
    while left > 0:  # a line each in turn, the most needed first (GROW_ORDER)
        grew = False
        for p in sorted(panes, key=lambda p: GROW_ORDER.index(p.name)):
            if left and given[p.name] < want[p.name]:
                given[p.name] += 1
                left -= 1
                grew = True
        if not grew:
            break
    out: list[Line] = []
    for p in panes:
        out.extend(draw_pane(p, width, given[p.name], selected, glyphs))
    return out


def draw_pane(pane: Pane, width: int, height: int, selected, glyphs: Glyphs) -> list[Line]:
    """A pane in `width` x `height`: its title, its header, and the rows that fit (the selected one among them)."""
    if not pane.rows or height < 3:
        return [line(pane.title, "title", width, glyphs)][:height]
    room = height - 2
    keys = [r.key for r in pane.rows]
    at = keys.index(selected) if selected in keys else 0
    start = min(max(0, at - room + 1), max(0, len(pane.rows) - room))
    shown = pane.rows[start:start + room]
    title = pane.title if len(pane.rows) <= room else f"{pane.title}, rows {start + 1}-{start + len(shown)}"
    widths, kept = fit(pane, width)
    out = [line(title, "title", width, glyphs),
           line(join([pane.columns[i] for i in kept], widths), "head", width, glyphs)]
    for row in shown:
        texts = [spark(c.values, widths[n], glyphs) if isinstance(c, Spark) else c
                 for n, c in ((n, row.cells[i]) for n, i in enumerate(kept))]
        texts = [clip(t, w, glyphs.more) for t, w in zip(texts, widths)]
        chosen = row.key is not None and row.key == selected
        text = join(texts, widths)
        out.append(line(text + " " * (width - cells(text)) if chosen else text, "selected" if chosen else "normal",
                        width, glyphs))  # the selected row's bar spans its pane
    return out


def join(texts: list[str], widths: list[int]) -> str:
    """Cells padded to their columns' widths, two spaces apart (the last not padded)."""
    parts = [t + " " * (w - cells(t)) for t, w in zip(texts[:-1], widths[:-1])]
    return "  ".join(parts + texts[-1:]).rstrip()


def fit(pane: Pane, width: int) -> tuple[list[int], list[int]]:
    """Return the widths of the columns kept and their indexes: columns of `pane.drop` are left out in turn
    until the rest fit in `width`; the flexible column takes what is left."""
    def natural(i):
        sample = [r.cells[i] for r in pane.rows]
        if any(isinstance(c, Spark) for c in sample):
            return max(len(c.values) for c in sample)
        size = max([cells(pane.columns[i]), *(cells(c) for c in sample)])
        return size if i == pane.flex else min(size, COLUMN_MAX)

    kept = list(range(len(pane.columns)))
    sizes = {i: natural(i) for i in kept}
    floor = {i: max(4, cells(pane.columns[i])) if i == pane.flex else min(sizes[i], 12) for i in kept}

    def need(cols):
        return sum(floor[i] if i == pane.flex else sizes[i] for i in cols) + 2 * (len(cols) - 1)
    for i in pane.drop:
        if need(kept) <= width:
            break
        kept.remove(i)
    widths = dict(sizes)
    if pane.flex in kept:
        others = sum(sizes[i] for i in kept if i != pane.flex) + 2 * (len(kept) - 1)
        widths[pane.flex] = max(floor[pane.flex], min(sizes[pane.flex], width - others))
    over = sum(widths[i] for i in kept) + 2 * (len(kept) - 1) - width
    for i in reversed(kept):  # still too wide: cut the others from the right, down to their floors
        if over <= 0:
            break
        cut = min(over, widths[i] - floor[i])
        widths[i] -= cut
        over -= cut
    return [widths[i] for i in kept], kept


def detail(title: str, record: list[str], output: list[str], width: int, height: int, back: int,
           footer: str, glyphs: Glyphs = UNICODE) -> list[Line]:
    """The job view: `title`, the record, then as much of the output as fits, its end shown unless scrolled
    `back` lines up (the output is followed: new lines appear at the bottom)."""
    if width < MIN_SIZE[0] or height < MIN_SIZE[1]:
        return too_small(width, height)
    top = [line(title, "title", width, glyphs)] + [line(t, "normal", width, glyphs) for t in record]
    top = top[:max(1, height - 4)]
    room = height - len(top) - 2
    back = max(0, min(back, len(output) - room))
    end = len(output) - back
    shown = output[max(0, end - room):end]
    what = f"output, lines {end - len(shown) + 1}-{end} of {len(output)}" if output else "output"
    body = [line(what, "head", width, glyphs)] + [line(t, "normal", width, glyphs) for t in shown]
    return top + body + [()] * (room - len(shown)) + [line(footer, "dim", width, glyphs)]


#: The keys, as the help screen (`?`) lists them; actions are left out in a read-only view.
KEYS = (("up/down, j/k", "select a queue or a job", False),
        ("PgUp/PgDn, g/G", "move a page, to the first or the last", False),
        ("Enter", "open the selected job: its record and output, followed live (Esc or q: back)", False),
        ("/", "filter by queue or text (Enter keeps it, Esc clears it)", False),
        ("p", "pause or resume the selected queue (or the selected job's queue)", True),
        ("c", "cancel the selected job (y to confirm)", True),
        ("r", "retry the selected dead or cancelled job (y to confirm)", True),
        ("?", "show these keys", False),
        ("q, Ctrl+C", "quit", False))


def help_screen(width: int, height: int, read_only: bool, glyphs: Glyphs = UNICODE) -> list[Line]:
    """The keys, one a line, and how to go back."""
    if width < MIN_SIZE[0] or height < MIN_SIZE[1]:
        return too_small(width, height)
    rows = [line("queuectl top: keys" + (" (read-only: no actions)" if read_only else ""), "title", width, glyphs)]
    rows += [line(f"{k:<16}{what}", "normal", width, glyphs) for k, what, act in KEYS if not (act and read_only)]
    rows = rows[:height - 1]
    return rows + [()] * (height - 1 - len(rows)) + [line("any key: back", "dim", width, glyphs)]
