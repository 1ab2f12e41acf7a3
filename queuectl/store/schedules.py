"""Schedules in the store: add, list, remove, pause, and fire due slots (functions of the engine, which SqlStore gathers).

Firing: any worker calls `fire_schedules` about once a second (queuectl.scheduler). One
transaction takes the due schedules (on PostgreSQL FOR UPDATE SKIP LOCKED, so workers of
other hosts fire other schedules meanwhile, or wait for nothing), adds a run per slot and
moves `next_at` on. A run's id names the schedule and the slot (recurrence.slot_id) and
job ids are unique, so an attempt to fire a slot again adds nothing. Slots are due on the
store's clock (the server's on PostgreSQL): a step of a worker's host clock fires no slot
twice and skips none.

Missed slots: each look fires one slot per schedule, the last one due. Slots that passed
before it unfired (no worker ran, or none looked before the next slot came) are missed: that
one run stands for them all (a catch-up run, as systemd's Persistent=true timers give), never
a burst. Workers look about once a second, so slots a second or more apart fire each.

Overlap: with overlap "skip" a run takes the schedule's key (`schedule:NAME`, or the
template's own `key`), so that a slot whose previous run still holds it adds nothing: the
slot is skipped and counted. With "allow" runs take no key.
"""

import json
from typing import TYPE_CHECKING, NamedTuple, Sequence

from queuectl.domain.clock import Instant, instant
from queuectl.domain.errors import Conflict, InvalidInput
from queuectl.domain.jobspec import validate_job
from queuectl.domain.models import Schedule
from queuectl.store.shared_schema import KEY_HELD
from queuectl.store.core import SqlCore
from queuectl.store.jobs import insert_run

if TYPE_CHECKING:
    from queuectl.domain.recurrence import Rule


class Fired(NamedTuple):
    """What firing one slot of schedule `schedule` did: `outcome` "added" (job `job_id` was enqueued),
    "skipped" (the previous run `holder` has not ended: overlap skip), "exists" (job `job_id` exists
    already: the slot was fired before) or "invalid" (the stored template is not valid: `holder` says
    why). `missed` is (first, slot) for a catch-up run: the slots from `first` (Unix seconds) until
    this one passed unfired, and this run stands for them."""

    schedule: str
    slot: float
    job_id: str
    outcome: str
    holder: str | None = None
    missed: tuple[float, float] | None = None


def _recurrence():
    """queuectl.domain.recurrence, which only a schedule read or fired needs: zoneinfo, datetime and croniter's
    makings cost about 13 ms, which the start-up of every other command does not pay."""
    from queuectl.domain import recurrence  # seam: the schedules' rules

    return recurrence


def _rule(row) -> "Rule":
    """The recurrence rule of a row of the schedules table."""
    return _recurrence().Rule(row["kind"], row["expr"], row["zone"])


def schedule_key(name: str, template: dict, overlap: str) -> str | None:
    """The key a run of schedule `name` takes: the template's, else `schedule:NAME`; none with overlap allow."""
    if overlap == "allow":
        return None
    return template.get("key") or f"schedule:{name}"


def add_schedule(db: SqlCore, name: str, rule: "Rule", template: dict, overlap: str, now: Instant | float,
                 replace: bool = False) -> Schedule:
    """Add schedule `name`, or with `replace` replace its rule, template and overlap (its pause, last run
    and skipped count stay); return it. Its next slot is the first after `now`, on the store's clock.

    `template` must be what jobspec.parse_template returned. Raises Conflict if the name is
    taken and `replace` is False, InvalidInput for an overlap other than skip and allow.
    """
    if overlap not in ("skip", "allow"):
        raise InvalidInput(f"--overlap is skip or allow, got {overlap!r}")
    now = instant(now)
    next_at = rule.next_after(now.wall)
    values = (rule.kind, rule.expr, rule.zone, json.dumps(template, sort_keys=True), overlap, next_at)
    try:
        with db._write() as c:
            exists = c.execute(f"SELECT 1 FROM schedules WHERE name = ?{db.FOR_UPDATE}", (name,)).fetchone()
            if exists and not replace:
                raise Conflict(f"a schedule named {name!r} exists already; give --replace to replace it")
            if exists:
                c.execute("UPDATE schedules SET kind = ?, expr = ?, zone = ?, template = ?, overlap = ?, next_at = ?"
                          " WHERE name = ?", (*values, name))
            else:
                c.execute("INSERT INTO schedules (kind, expr, zone, template, overlap, next_at, name, created_at)"
                          " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (*values, name, now.wall))
    except db.UniqueViolation:  # PostgreSQL: another add of the name committed meanwhile
        raise Conflict(f"a schedule named {name!r} exists already; give --replace to replace it") from None
    return schedules(db, name)[0]


def schedules(db: SqlCore, name: str | None = None) -> list[Schedule]:
    """Every schedule (or only the one named `name`, if it exists), by name, with its last run's state."""
    where, args = (" WHERE s.name = ?", (name,)) if name is not None else ("", ())
    with db._errors():
        return [Schedule.from_row(r) for r in db.c.execute(
            "SELECT s.*, j.state AS last_state FROM schedules s LEFT JOIN jobs j ON j.id = s.last_job"
            f"{where} ORDER BY s.name", args)]


def remove_schedules(db: SqlCore, names: Sequence[str]) -> list[bool]:
    """Remove schedules, in one transaction; return for each whether it existed. Runs added stay."""
    with db._write() as c:
        return [c.execute("DELETE FROM schedules WHERE name = ?", (n,)).rowcount == 1 for n in names]


def set_schedules_paused(db: SqlCore, names: Sequence[str], paused: bool, now: Instant | float) -> list[bool | None]:
    """Pause or resume schedules; return for each whether it changed (False: it already was; None: no
    such schedule). A resumed schedule's next slot is the first after `now`: the slots that passed
    while it was paused give no catch-up run."""
    now = instant(now)
    out: list[bool | None] = []
    with db._write() as c:
        for name in names:
            row = c.execute(f"SELECT kind, expr, zone, paused_at FROM schedules WHERE name = ?{db.FOR_UPDATE}",
                            (name,)).fetchone()
            if row is None:
                out.append(None)
            elif paused == (row["paused_at"] is not None):
                out.append(False)
            elif paused:
                c.execute("UPDATE schedules SET paused_at = ? WHERE name = ?", (now.wall, name))
                out.append(True)
            else:
                next_at = _rule(row).next_after(now.wall)
                c.execute("UPDATE schedules SET paused_at = NULL, next_at = ? WHERE name = ?", (next_at, name))
                out.append(True)
    return out


def next_slot_at(db: SqlCore) -> float | None:
    """The earliest next slot of the schedules not paused (Unix seconds), or None if there is none."""
    with db._errors():
        return db.c.execute("SELECT min(next_at) FROM schedules WHERE paused_at IS NULL").fetchone()[0]


def fire_schedules(db: SqlCore, now: Instant | float) -> tuple[list[Fired], float | None]:
    """Fire the slots due at `now` (see the module); return (what each slot did, the earliest next slot
    afterwards or None). One read when nothing is due; else one write transaction."""
    now = instant(now)
    next_at = next_slot_at(db)
    if next_at is None or next_at > now.wall:
        return [], next_at
    with db._write() as c:
        rows = c.execute(f"SELECT name, kind, expr, zone, template, overlap, next_at FROM schedules"
                         f" WHERE paused_at IS NULL AND next_at <= ? ORDER BY name{db.SKIP_LOCKED}",
                         (now.wall,)).fetchall()
        fired = [_fire(db, c, row, now) for row in rows]
        if any(f.outcome == "added" for f in fired):
            db._notify(c)
        next_at = c.execute("SELECT min(next_at) FROM schedules WHERE paused_at IS NULL").fetchone()[0]
    return fired, next_at


def _fire(db: SqlCore, c, row, now: Instant) -> Fired:
    """Fire schedule `row`'s last due slot (standing for any missed before it), and move its next_at on."""
    rule, name = _rule(row), row["name"]
    template = json.loads(row["template"])
    key = schedule_key(name, template, row["overlap"])
    slot = rule.last_until(now.wall)  # at or after next_at, which is due
    missed = (row["next_at"], slot) if slot > row["next_at"] else None
    job_id = _recurrence().slot_id(name, slot)
    try:
        job = validate_job({**template, "id": job_id, "key": key}, now.wall)
    except InvalidInput as e:  # a template edited by hand: the slot passes
        fired = Fired(name, slot, job_id, "invalid", str(e), missed)
    else:
        if insert_run(c, job, now):
            fired = Fired(name, slot, job_id, "added", missed=missed)
        else:
            holder = c.execute(f"SELECT id FROM jobs WHERE key = ? AND {KEY_HELD}", (key,)).fetchone() if key else None
            fired = Fired(name, slot, job_id, "skipped" if holder else "exists", holder and holder[0], missed)
    added = fired.outcome == "added"
    c.execute("UPDATE schedules SET next_at = ?, last_slot = ?, last_job = coalesce(?, last_job),"
              " fired_at = coalesce(?, fired_at), skipped = skipped + ? WHERE name = ?",
              (rule.next_after(slot), slot, job_id if added else None, now.wall if added else None,
               int(fired.outcome == "skipped"), name))
    return fired
