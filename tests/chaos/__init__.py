"""The chaos tier (`pytest -m chaos`): kill storms, contention, a full disk and clock steps, at full size,
and the PostgreSQL fault tests: server restarts, a connection-kill storm and an outage.

Each test prints its figures (a line per measure) whether it passes or fails. Tests that
need root or a Debian package skip with the reason printed, and fail under CI (CI=true).
"""
