"""Schedules: add (with the zone a replaced schedule keeps), list, pause and resume, remove."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Callable, Sequence
from queuectl.domain.errors import InvalidInput
from queuectl.domain.jobspec import parse_template
from queuectl.domain.models import iso
from queuectl.domain.recurrence import Rule, check_name, local_zone, parse_rule


@dataclass(frozen=True)
class Draft:
    """A schedule checked before the store is opened: its name, rule (its zone not yet settled when
    `zone` is None), job template fields, and overlap ("skip" or "allow")."""

    name: str
    rule: object
    fields: dict
    overlap: str
    zone: str | None


def draft(name: str, template: str, cron: str | None = None, every: str | None = None, zone: str | None = None,
          overlap: str = "skip") -> Draft:
    """Check a schedule to add: `name`, the job JSON `template`, one of `cron` (five fields or @daily...) and
    `every` (30s, 5m...), the cron rule's `zone` (an IANA name; None: see `add`), `overlap`. Raises
    InvalidInput; `every` takes no zone (its slots are multiples since 1970-01-01 UTC)."""
    check_name(name)
    if every is not None and zone is not None:
        raise InvalidInput("--tz applies to --cron only: the slots of --every are its multiples since 1970-01-01 UTC")
    rule = parse_rule(cron, every, "UTC" if zone is None else zone)  # "" is a bad zone, not none
    return Draft(name, rule, parse_template(template, overlap == "allow"), overlap, zone)


@dataclass(frozen=True)
class Added:
    """A schedule as added: the stored Schedule and its rule with the zone it took."""

    schedule: object
    rule: object


def add(store, new: Draft, replace: bool = False, warn: Callable[[str], None] = lambda line: None) -> Added:
    """Add the schedule `new` (see `draft`), or with `replace` replace the one of that name.

    The zone of a cron rule: the draft's, else with `replace` the replaced schedule's, else this
    host's (queuectl.domain.recurrence.local_zone; `warn` gets a line when $TZ names no zone). A
    replaced schedule keeps its pause, last run and skipped count. Raises Conflict for a name
    taken without `replace`.
    """
    zone, cron = new.zone, new.rule.kind == "cron"
    if zone is None and replace and cron:
        zone = next((s.zone for s in store.schedules(new.name)), None)  # replaced: its zone stays
    if zone is None and cron:
        zone, tz = local_zone(), os.environ.get("TZ", "").lstrip(":")
        if tz and tz != zone:
            warn(f"$TZ ({tz}) names no time zone; the schedule takes {zone} (give --tz)")
    rule = dataclasses.replace(new.rule, zone=zone or local_zone())  # a stored or host zone: valid, the rule read once
    return Added(store.add_schedule(new.name, rule, new.fields, new.overlap, store.now(), replace=replace), rule)


def list_schedules(store) -> list:
    """Return every schedule (queuectl.domain.models.Schedule), by name."""
    return store.schedules()


def to_dict(schedule) -> dict:
    """Return a schedule (queuectl.domain.models.Schedule) as a JSON-ready dict; times as ISO-8601 UTC, and the next
    slot also as wall time in its zone (both None while paused: `resume` sets the next slot)."""
    rule, paused = Rule.of(schedule), schedule.paused_at is not None
    return {
        "name": schedule.name,
        "rule": rule.text,
        "cron": schedule.expr if schedule.kind == "cron" else None,
        "every_seconds": int(schedule.expr) if schedule.kind == "every" else None,
        "zone": schedule.zone,
        "overlap": schedule.overlap,
        "paused": paused,
        "next_at": None if paused else iso(schedule.next_at),
        "next_local": None if paused else rule.local(schedule.next_at),
        "last_slot": iso(schedule.last_slot),
        "last_job": schedule.last_job,
        "last_state": schedule.last_state.value if schedule.last_state else None,
        "fired_at": iso(schedule.fired_at),
        "skipped": schedule.skipped,
        "template": schedule.template,
    }


def remove(store, names: Sequence[str]) -> list[tuple[str, bool | None]]:
    """Remove schedules (the runs they enqueued stay); return (name, True, or None for no such schedule)
    for each name given once."""
    names = list(dict.fromkeys(names))
    return [(n, True if r else None) for n, r in zip(names, store.remove_schedules(names))]


def set_paused(store, names: Sequence[str], paused: bool) -> list[tuple[str, bool | None]]:
    """Pause or resume schedules (a resumed one fires from its next slot); return (name, whether it
    changed, or None for no such schedule) for each name given once."""
    names = list(dict.fromkeys(names))
    return list(zip(names, store.set_schedules_paused(names, paused, store.now())))
