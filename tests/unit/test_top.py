"""`queuectl top` without a terminal: what it reads (on both engines), its model, its layout at every size, and
the printable text it draws. The terminal itself is tested in tests/processes/test_top.py (tmux)."""

from __future__ import annotations

import re
import time

import pytest

from support.cli import assert_error
from queuectl.api import ops
from queuectl.domain.models import printable
from queuectl.store.request import Outcome
from queuectl.tui import layout, model
from queuectl.tui.layout import ASCII, MIN_SIZE, UNICODE, cells, clip, text_of
from queuectl.tui.source import Source
from support.jobs import enqueue_job
from support.worker_steps import claim, finish
from support.engines import BOTH_ENGINES, SQLITE_ONLY

pytestmark = BOTH_ENGINES


WORKER = {"name": "w1", "host": "testhost", "boot_id": "boot", "pid": 4242, "pid_start": None,
          "slots": 4, "queues": [], "unit": None}
NASTY = "echo \x1b[2J\x1b]52;c;aGk=\x07 \u202eevil\r\n"  # clears the screen, writes the clipboard, reorders


@pytest.fixture
def busy(store):
    """A queue with a running job, a dead one (with a nasty command and error), a completed one, a pending one in
    a paused and limited queue, and a worker."""
    wid, _ = store.register_worker(WORKER, store.now())
    for job_id in ("done", "gone"):
        enqueue_job(store, id=job_id, command=NASTY if job_id == "gone" else "true", max_retries=0)
    claim(store, wid, [], 2, store.now())
    finish(store, wid, [Outcome("done", True, 0, None, b"fine\n"),
                        Outcome("gone", False, 3, "exit code 3 \x1b[31mred", b"", b"boom\x1b[2J\n")], store.now())
    enqueue_job(store, id="long", command="sleep 100")
    claim(store, wid, [], 1, store.now())
    enqueue_job(store, id="later", queue="mail", command="true")
    ops.set_paused(store, ["mail"], True)
    store.set_limit("mail", store.now(), concurrency=2)
    return store


def test_a_reading_shows_each_pane_from_the_api(busy):
    reading = Source(busy).read()
    view = model.View()
    m = model.build(reading, view)
    panes = {p.name: p for p in m.panes}
    assert [r.cells[0] for r in panes["queues"].rows] == ["default", "mail"]
    mail = panes["queues"].rows[1].cells
    assert "paused" in mail and "concurrency 2" in mail[-1]
    assert [r.key for r in panes["running"].rows] == [("job", "long")]
    assert [r.key for r in panes["dead"].rows] == [("job", "gone")]
    assert [r.cells[:3] for r in panes["workers"].rows] == [("w1", "testhost", "running")]
    assert panes["workers"].rows[0].cells[3] == "1/4"
    throughput = {r.cells[0]: r.cells for r in panes["throughput"].rows}
    assert sum(throughput["default"][1].values) == 2  # done completed, gone dead: this minute
    assert m.selectable == [("queue", "default"), ("queue", "mail"), ("job", "long"), ("job", "gone")]
    assert view.selected == ("queue", "default")


def test_the_filter_keeps_matching_queues_and_jobs(busy):
    reading = Source(busy).read()
    view = model.View()
    view.filter = "MAIL"
    m = model.build(reading, view)
    assert m.selectable == [("queue", "mail")]
    view.filter = "sleep"
    assert model.build(reading, view).selectable == [("job", "long")]
    view.filter = "nothing-like-it"
    m = model.build(reading, view)
    assert m.selectable == [] and view.selected is None


def test_the_selection_moves_within_the_rows(busy):
    view = model.View()
    m = model.build(Source(busy).read(), view)
    model.move(view, m.selectable, 2)
    assert view.selected == ("job", "long")
    model.move(view, m.selectable, 99)
    assert view.selected == ("job", "gone")
    model.move(view, m.selectable, -99)
    assert view.selected == ("queue", "default")


def test_user_text_reaches_the_screen_escaped(busy):
    reading = Source(busy).read()
    m = model.build(reading, model.View())
    for size in ((80, 24), (200, 60)):
        drawn = "\n".join(text_of(ln) for ln in layout.screen(m, *size, ("job", "gone")))
        assert "\\x1b[31mred" in drawn or size == (80, 24)
        assert not any(ch in drawn for ch in "\x1b\x07\r\u202e")
    record, output = model.detail(Source(busy).job("gone"), time.time())
    text = "\n".join(record + output)
    assert "\\x1b]52;c;aGk=\\x07" in text and "\\u202eevil" in text and "boom\\x1b[2J" in text
    assert "\\x1b[31mred" in text
    assert not any(ch in text for ch in "\x1b\x07\r\u202e")


def test_printable_escapes_what_a_terminal_acts_on():
    assert printable("plain text") == "plain text"
    assert printable("a\tb") == "a\\tb"
    assert printable("\x1b[2J") == "\\x1b[2J"
    assert printable("\x9b31m\u200d\u2028") == "\\x9b31m\\u200d\\u2028"
    assert printable("\U000f0000") == "\\U000f0000"  # private use


def test_clip_counts_wide_characters_as_two_cells():
    assert cells("日本") == 4 and cells("ok") == 2
    assert clip("日本語テキスト", 6) == "日本…" and cells(clip("日本語テキスト", 6)) <= 6
    assert clip("abcdef", 4, "~") == "abc~" and clip("abc", 3) == "abc" and clip("abc", 0) == ""


@pytest.mark.parametrize("width,height", [(80, 24), (200, 60), (40, 10), (20, 5), (100, 30), (159, 12)])
@pytest.mark.parametrize("glyphs", [UNICODE, ASCII], ids=["utf8", "ascii"])
def test_every_size_fits_its_terminal(busy, width, height, glyphs):
    view = model.View()
    view.outage, view.outage_since = "server closed the connection", time.monotonic() - 5
    m = model.build(Source(busy).read(), view)
    lines = layout.screen(m, width, height, ("job", "gone"), glyphs)
    assert len(lines) <= height
    assert all(sum(cells(t) for t, _ in ln) <= width for ln in lines), [text_of(ln) for ln in lines]
    texts = [text_of(ln) for ln in lines]
    if (width, height) < MIN_SIZE or width < MIN_SIZE[0] or height < MIN_SIZE[1]:
        assert len(lines) == 1 and "need 40x10" in texts[0]
        return
    assert texts[0].startswith("queuectl top")
    assert any("database unavailable" in t for t in texts)
    assert any(t.startswith("default") for t in texts)
    if height >= 24:
        assert any(re.search(r"(^| )gone ", t) for t in texts), texts  # the dead job selected is on screen
    if glyphs is ASCII:
        assert all(t.isascii() for t in texts)


def test_a_wide_terminal_gets_two_columns_with_every_pane(busy):
    m = model.build(Source(busy).read(), model.View())
    texts = [text_of(ln) for ln in layout.screen(m, 200, 60)]
    assert any("Queues (2)" in t and "Workers (1)" in t for t in texts)
    for title in ("Throughput", "Running (1)", "Schedules (0)", "Dead letter queue"):
        assert any(title in t for t in texts), title


def test_a_short_terminal_cuts_rows_and_keeps_the_selection_in_view(store):
    for n in range(30):
        enqueue_job(store, id=f"j{n:02d}", queue=f"q{n:02d}", command="true")
    view = model.View()
    m = model.build(Source(store).read(), view)
    view.selected = ("queue", "q25")
    texts = [text_of(ln) for ln in layout.screen(m, 80, 24, view.selected)]
    assert len(texts) == 24
    assert any(t.startswith("q25") for t in texts)
    assert any("Queues (30), rows" in t for t in texts)


def test_the_sparkline_scales_to_the_busiest_minute():
    assert layout.spark((0, 1, 2, 4, 8), 5, UNICODE) == " ▁▂▄█"
    assert layout.spark((0, 1, 2, 4, 8), 3, ASCII) == ",-#"
    assert layout.spark((0, 0), 2, UNICODE) == "  "


def test_minutes_places_each_row_by_its_age():
    from queuectl.api.history import HistoryRow

    now = 10_000 * 60 + 30
    rows = [HistoryRow(10_000 * 60, "a", 1, 1, 0, 0, 0, 0, 0.1, 0.2, 1.0, 2.0),
            HistoryRow(9_998 * 60, "a", 3, 2, 1, 0, 0, 0, None, None, None, None),
            HistoryRow(9_000 * 60, "a", 9, 9, 0, 0, 0, 0, None, None, None, None)]  # over an hour ago
    per = model.minutes(rows, now)["a"]
    assert per["ended"][-1] == 1 and per["ended"][-3] == 3 and sum(per["ended"]) == 4 == per["total"]


def test_the_job_view_follows_the_end_of_the_output(busy):
    job = Source(busy).job("done")._replace(stdout=b"".join(b"line %d\n" % i for i in range(100)))
    record, output = model.detail(job, time.time())
    lines = [text_of(ln) for ln in layout.detail("job done", record, output, 80, 24, 0, "Esc: back")]
    assert len(lines) == 24 and lines[-2] == "line 99" and lines[-1] == "Esc: back"
    lines = [text_of(ln) for ln in layout.detail("job done", record, output, 80, 24, 10, "Esc: back")]
    assert lines[-2] == "line 89"
    assert "need 40x10" in text_of(layout.detail("t", record, output, 20, 5, 0, "")[0])


def test_help_lists_the_actions_unless_read_only():
    full = " ".join(text_of(ln) for ln in layout.help_screen(80, 24, False))
    assert "pause or resume" in full and "cancel" in full
    read_only = " ".join(text_of(ln) for ln in layout.help_screen(80, 24, True))
    assert "pause or resume" not in read_only and "read-only" in read_only


def test_actions_go_through_the_api_and_say_what_they_did(busy):
    source = Source(busy)
    assert source.toggle_pause("mail", True) == "queue mail resumed"
    assert "mail" not in busy.paused_queues()
    assert source.toggle_pause("mail", True) == "queue mail was already running"
    assert source.cancel("later") == "job later: cancelled"
    assert source.retry("later").startswith("job later: retried, now pending")
    assert source.retry("long").startswith("failed: ")  # a running job cannot be retried
    assert source.cancel("long").startswith("job long: cancel requested")
    assert busy.get_job("long").state.value == "processing"  # its worker stops it


def test_a_writable_database_can_be_written(store):
    assert Source(store).can_write() is None


@SQLITE_ONLY
def test_a_read_only_sqlite_file_says_why(store, tmp_path):
    import os

    if os.geteuid() == 0:
        pytest.skip("root may write any file")
    os.chmod(store.path, 0o444)
    try:
        assert "not writable" in Source(store).can_write()
    finally:
        os.chmod(store.path, 0o644)


def test_top_without_a_terminal_exits_2(run_cli):
    r = run_cli("top")
    assert_error(r, 2, "top draws on a terminal")


@pytest.mark.parametrize("value", ["0", "0.1", "nan", "-1", "2x", "forever", "2d"])
def test_a_bad_interval_is_one_line_and_exit_2(run_cli, value):
    r = run_cli("top", "--interval", value)
    assert_error(r, 2, "--interval")


def test_a_postgresql_role_that_may_only_read_gets_the_view_read_only(pg_uri):
    import uuid

    import psycopg

    from queuectl.store import open_store

    role = f"viewer_{uuid.uuid4().hex[:8]}"
    with open_store(pg_uri) as owner:
        enqueue_job(owner, id="j1", command="true")
    with psycopg.connect(pg_uri, autocommit=True) as con:
        con.execute(f"CREATE ROLE {role} LOGIN")
        con.execute(f"GRANT USAGE ON SCHEMA queuectl TO {role}")
        con.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA queuectl TO {role}")
    try:
        with open_store(pg_uri.replace("postgres@", f"{role}@", 1)) as viewer:
            source = Source(viewer)
            assert source.can_write() == "the role may not update jobs and queues"
            assert [r.cells[0] for r in model.build(source.read(), model.View()).panes[0].rows] == ["default"]
    finally:
        with psycopg.connect(pg_uri, autocommit=True) as con:
            con.execute(f"DROP OWNED BY {role}")
            con.execute(f"DROP ROLE {role}")


@SQLITE_ONLY
def test_a_sqlite_file_opened_read_only_reads_refuses_writes_and_says_why(busy, db):
    from queuectl.domain.errors import InvalidInput
    from queuectl.store import open_store

    with open_store(db, read_only=True) as viewer:
        source = Source(viewer)
        assert source.can_write() == f"{viewer.path} is not writable"
        assert model.build(source.read(), model.View()).selectable[:2] == [("queue", "default"), ("queue", "mail")]
        with pytest.raises(InvalidInput, match="cannot write to database .*readonly"):
            ops.set_paused(viewer, ["default"], True)
    assert "default" not in busy.paused_queues()


def test_a_missing_sqlite_file_is_not_created_read_only(tmp_path):
    from queuectl.domain.errors import InvalidInput
    from queuectl.store import open_store

    with pytest.raises(InvalidInput, match="does not exist"):
        open_store(str(tmp_path / "none.db"), read_only=True)
    assert not (tmp_path / "none.db").exists()
