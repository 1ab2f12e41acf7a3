"""`queuectl top`: a live view of the queue in the terminal, on the standard library's curses.

- model: what to show, from one reading of the api (pure; printable text only).
- layout: where it goes at a terminal's size (pure: lines of styled text).
- source: the api calls of one viewer (one snapshot and one history read per interval) and its actions.
- app: the curses loop, its keys, and giving the terminal back.

Only `queuectl top` imports this package (queuectl.cli.top), so no other command pays for curses.
"""
