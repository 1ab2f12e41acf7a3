"""Text from users (job ids, commands, queue names, output, errors) made safe to draw on a terminal.

A job's command or output may hold control characters and escape sequences (ESC [ 2 J clears
the screen, OSC 52 writes the clipboard, a bidirectional override reorders what follows); drawn
raw, they act on the operator's terminal. `printable` is the one place that turns them into
visible escapes; every front end that draws user data on a terminal passes it through here.
"""

from __future__ import annotations

#: What a tab becomes: the terminal views lay out cells, and a raw tab would move the cursor.
TAB = "    "


def printable(value) -> str:
    """Return `value` as text with every character a terminal would act on shown as an escape.

    `value`: text, or bytes (decoded as UTF-8, U+FFFD for bad bytes). Control characters (C0,
    DEL, C1), format characters (bidirectional overrides, zero-width joiners), line and
    paragraph separators, surrogates, private-use and unassigned code points become Python's
    escapes (\\x1b, \\u202e); a tab becomes TAB. Everything str.isprintable accepts, and the
    space, is kept as it is.
    """
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else TAB if ch == "\t" else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    """One character as a visible escape: \\xNN, \\uNNNN or \\UNNNNNNNN."""
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def cells(text: str) -> int:
    """Return the terminal cells `text` (already printable) takes: 2 for each wide (East Asian) character."""
    if text.isascii():
        return len(text)
    from unicodedata import combining, east_asian_width

    return sum(0 if combining(ch) else 2 if east_asian_width(ch) in "WF" else 1 for ch in text)


def clip(text: str, width: int, more: str = "…") -> str:
    """Return `text` (already printable) cut to at most `width` terminal cells, ending in `more` (one
    cell) where it was cut."""
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
