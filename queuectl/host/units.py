"""The worker's systemd units, read and stopped through systemctl(1)."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Sequence

from queuectl.domain.errors import QueuectlError

#: The template's instances, as a systemctl pattern.
UNIT_PATTERN = "queuectl-worker@*.service"
PROPERTIES = ("Id", "ActiveState", "SubState", "NRestarts", "StatusText", "MainPID")


def systemd_booted() -> bool:
    """Return True if systemd is the init system here (sd_booted(3): /run/systemd/system exists)."""
    return os.path.isdir("/run/systemd/system") and shutil.which("systemctl") is not None


def show(units: Sequence[str] = (UNIT_PATTERN,)) -> list[dict[str, str]]:
    """Return the PROPERTIES of the loaded units matching `units` (names or patterns), by Id.

    Returns [] when systemd is not running or systemctl fails (status is best-effort).
    """
    if not systemd_booted():
        return []
    try:
        out = subprocess.run(
            ["systemctl", "show", "--no-pager", "-p", ",".join(PROPERTIES), "--", *units],
            capture_output=True, text=True, timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    found, current = [], {}
    for line in out.stdout.splitlines() + [""]:
        if not line:
            if current.get("Id"):
                found.append(current)
            current = {}
            continue
        key, _, value = line.partition("=")
        current[key] = value
    return sorted(found, key=lambda u: u["Id"])


def stop(units: Sequence[str]) -> None:
    """Start stopping `units` without waiting (systemctl stop --no-block); raises QueuectlError on failure."""
    _systemctl("stop", "--no-block", units)


def kill(units: Sequence[str], sig: int) -> None:
    """Send `sig` to the main process of each unit (systemctl kill); raises QueuectlError on failure."""
    _systemctl("kill", f"--kill-who=main --signal={int(sig)}", units)


def _systemctl(verb: str, options: str, units: Sequence[str]) -> None:
    if not units:
        return
    argv = ["systemctl", verb, *options.split(), "--", *units]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise QueuectlError(f"systemctl {verb} {' '.join(units)} failed: {e}") from None
    if out.returncode != 0:
        reason = (out.stderr.strip().splitlines() or [f"exit code {out.returncode}"])[0]
        if os.geteuid() != 0 and ("denied" in reason.lower() or "interactive authentication" in reason.lower()):
            reason += " (stopping a service needs root: run it with sudo)"
        raise QueuectlError(f"systemctl {verb} {' '.join(units)} failed: {reason}")


def is_stopped(unit: str) -> bool:
    """Return True once `unit` is no longer active, activating, deactivating or reloading."""
    states = show([unit])
    return not states or states[0].get("ActiveState") in ("inactive", "failed")
