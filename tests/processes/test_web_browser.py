"""The dashboard (`queuectl web`) in a real browser: Debian's chromium, headless, through Selenium
(tests/support/browser.py), against `queuectl web` as a real process (tests/support/webserver.py) on both
engines, with real workers running the jobs. Each page visited is kept as a screenshot (the session says
where). What a browser would not do (a forged POST) is sent from Python with the same credentials.

Every wait is on a condition (WebDriverWait, wait_for), never a fixed time.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
from urllib.parse import urljoin, urlsplit

import pytest

from support.cli import QUEUECTL, dead_job, enqueued, queuectl, shown, status as queue_status
from support.engines import snapshot
from support.suite import require
from support.waiting import wait_for
from support import browser as chromium
from support.webserver import USERS, WebServer, request
from support.engines import BOTH_ENGINES, SQLITE_ONLY

pytestmark = BOTH_ENGINES


XSS = ("<script>window.__xss=1</script>", '"><img src=x onerror="window.__xss=2">')
#: Seconds a page may take to show what the queue did (the server reads the queue every second).
SHOWN = 20.0


@pytest.fixture(scope="session")
def shots(request, tmp_path_factory):
    """The run's screenshot directory, said once on the terminal."""
    path = chromium.artifacts_dir(tmp_path_factory.getbasetemp())
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if reporter is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\nbrowser screenshots: {path}")
    return path


@pytest.fixture
def browser(request, shots):
    require(chromium.missing(), "processes")
    b = chromium.Browser(shots, request.node.name)
    yield b
    b.close()


def state_of(db: str, job_id: str) -> str:
    return shown(db, job_id)["state"]


def on_dead_job_page(db: str, web, users: str, browser, user: str, shot: str) -> str:
    """Make a dead job (support.cli.dead_job), serve the dashboard with `users`, sign `user` in and open the job's page
    (screenshot `shot`); return the job's id."""
    job_id = dead_job(db)
    server = web(users=users)
    browser.sign_in(user, USERS[user][1])
    browser.visit(f"{server.url}/jobs/{job_id}", shot)
    return job_id


def shown_counts(driver) -> dict:
    """{queue: {state: n}} of the overview's table ("" for the totals row)."""
    return driver.execute_script("""
        const counts = {};
        for (const row of document.querySelectorAll('#counts tr[data-queue]')) {
          const per = counts[row.dataset.queue] = {};
          for (const cell of row.querySelectorAll('td[data-state]')) per[cell.dataset.state] = Number(cell.textContent);
        }
        return counts;""")


def status_counts(db: str) -> dict:
    now = queue_status(db)
    return {**now["queues"], "": now["jobs"]}


def token_of(server: WebServer, user: str, path: str) -> str:
    """The CSRF token in the forms of page `path` as `user` (an operator: a viewer's pages have no forms)."""
    status, _, body = request(server.url + path, user=user)
    assert status == 200, body
    return re.search(r'name="csrf" value="([0-9a-f]+)"', body).group(1)


def test_the_overview_counts_are_status_s_and_follow_the_queue(db, web, users, browser, workers, tmp_path):
    dead_job(db, queue="deploy")
    for n in range(3):
        enqueued(db, command="true", queue="build")
    server = web(users=users)
    browser.sign_in("victor", USERS["victor"][1])
    enqueued(db, command="true", queue="build")
    workers.start()
    wait_for(lambda: status_counts(db)["build"]["completed"] == 4, message="the quick jobs to end")
    gate = tmp_path / "gate"
    slow = enqueued(db, command=f"until [ -e {gate} ]; do sleep 0.05; done")
    expected = wait_for(lambda: (c := status_counts(db))[""]["processing"] == 1 and c,
                        message="the slow job to run")
    browser.visit(server.url + "/", "overview")
    browser.wait(lambda d: shown_counts(d) == expected, SHOWN, f"the overview to show {expected}")
    browser.driver.execute_script("window.__same_page = true")  # gone if the page were loaded again
    gate.touch()
    wait_for(lambda: state_of(db, slow) == "completed", message="the slow job to end")
    expected = status_counts(db)
    assert expected["default"]["completed"] == 1 and expected[""]["processing"] == 0
    browser.wait(lambda d: shown_counts(d) == expected, SHOWN, f"the overview to show {expected} by itself")
    assert browser.driver.execute_script("return window.__same_page") is True
    browser.screenshot("overview-after")


def test_a_dead_job_retried_by_a_click_is_pending(db, web, users, browser):
    job_id = on_dead_job_page(db, web, users, browser, "olga", "dead-job")
    from selenium.webdriver.common.by import By

    browser.driver.find_element(By.XPATH, "//form[contains(@action, '/retry')]/button").click()
    said = browser.wait(lambda d: d.find_elements(By.CSS_SELECTOR, "p.said"), SHOWN, "the page to say what happened")
    assert said[0].text == f"job {job_id} retried: now pending"
    assert browser.driver.find_element(By.CSS_SELECTOR, "h1 .state").text == "pending"
    assert urlsplit(browser.driver.current_url).path == f"/jobs/{job_id}"  # served without a prefix
    browser.screenshot("retried")
    assert state_of(db, job_id) == "pending"


def test_a_bulk_cancel_by_filter_cancels_exactly_what_the_filter_matches(db, web, users, browser):
    """As an operator: the jobs page filtered by queue and text, its bulk cancel, the confirmation's count, the
    click; every matching job cancelled and every other one left pending (no worker runs)."""
    from selenium.webdriver.common.by import By

    matched = [enqueued(db, queue="batch", command=f"echo nightly-{n}") for n in range(4)]
    others = [enqueued(db, queue="batch", command="echo other"), enqueued(db, queue="keep", command="echo nightly-9")]
    server = web(users=users)
    browser.sign_in("olga", USERS["olga"][1])
    browser.visit(f"{server.url}/jobs?queue=batch&text=nightly", "filtered")
    shown = [row.get_attribute("data-job") for row in browser.driver.find_elements(By.CSS_SELECTOR, "tr[data-job]")]
    assert sorted(shown) == sorted(matched)
    browser.driver.find_element(By.ID, "bulk-cancel").click()
    count = browser.wait(lambda d: d.find_elements(By.ID, "count"), SHOWN, "the confirmation")
    assert count[0].text.startswith("4 jobs match now")
    browser.screenshot("bulk-confirm")
    assert all(state_of(db, j) == "pending" for j in matched)  # the confirmation changed nothing
    browser.driver.find_element(By.CSS_SELECTOR, "#confirm button[type=submit]").click()
    said = browser.wait(lambda d: d.find_elements(By.CSS_SELECTOR, "p.said"), SHOWN, "the page to say what happened")
    assert said[0].text == "cancelled 4 of 4 matching jobs"
    browser.screenshot("bulk-done")
    assert {j: state_of(db, j) for j in matched + others} == {**{j: "cancelled" for j in matched},
                                                              **{j: "pending" for j in others}}


def test_a_running_job_s_output_shows_while_it_runs(db, web, browser, workers, tmp_path):
    gate = tmp_path / "gate"
    job_id = enqueued(db, command=f"echo first line; until [ -e {gate} ]; do sleep 0.05; done; echo second line")
    server = web()
    workers.start()
    wait_for(lambda: state_of(db, job_id) == "processing", message="the job to run")
    browser.visit(f"{server.url}/jobs/{job_id}", "running-job")
    from selenium.webdriver.common.by import By

    stdout = browser.driver.find_element(By.ID, "stdout")
    browser.wait(lambda d: stdout.text == "first line", SHOWN, "the first line to show")
    assert state_of(db, job_id) == "processing"  # shown before the job ended
    browser.screenshot("first-line")
    gate.touch()
    browser.wait(lambda d: stdout.text == "first line\nsecond line", SHOWN, "the second line to show")
    state = browser.driver.find_element(By.ID, "follow-state")
    browser.wait(lambda d: state.text == "the job has ended (completed)", SHOWN, "the page to say the job ended")
    browser.screenshot("ended")


def test_a_viewer_s_post_is_refused_and_changes_nothing(db, web, users):
    job_id = dead_job(db)
    server = web(users=users)
    token = token_of(server, "olga", f"/jobs/{job_id}")
    before = snapshot(db)
    for path in (f"/jobs/{job_id}/retry", "/queues/default/pause"):
        for form in ({"csrf": token}, {}):
            status, _, body = request(server.url + path, "POST", user="victor", form=form)
            assert (status, "your role may only look" in body) == (403, True), (path, form, status, body)
    assert snapshot(db) == before
    status, headers, _ = request(f"{server.url}/jobs/{job_id}/retry", "POST", user="olga", form={"csrf": token})
    assert status == 303 and state_of(db, job_id) == "pending"  # the same request as an operator acts


def test_a_post_without_the_token_or_from_another_site_is_refused(db, web, users):
    job_id = dead_job(db)
    server = web(users=users)
    token = token_of(server, "olga", f"/jobs/{job_id}")
    url = f"{server.url}/jobs/{job_id}/retry"
    before = snapshot(db)
    for form, headers, said in (({}, {}, "token is missing or stale"),
                                ({"csrf": "0" * 64}, {}, "token is missing or stale"),
                                ({"csrf": token[:-1] + ("1" if token[-1] == "0" else "0")}, {}, "token"),
                                ({"csrf": token}, {"Origin": "http://evil.example"}, "another origin"),
                                ({"csrf": token}, {"Origin": "null"}, "another origin"),
                                ({"csrf": token}, {"Sec-Fetch-Site": "cross-site"}, "another site"),
                                ({"csrf": token}, {"Sec-Fetch-Site": "same-site"}, "another site")):
        status, _, body = request(url, "POST", user="olga", form=form, headers=headers)
        assert status == 403 and said in body, (form, headers, status, body)
    status, _, body = request(url, "GET", user="olga")
    assert status == 405, body
    assert snapshot(db) == before
    status, _, _ = request(url, "POST", user="olga", form={"csrf": token},
                           headers={"Origin": server.origin, "Sec-Fetch-Site": "same-origin"})
    assert status == 303 and state_of(db, job_id) == "pending"


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@SQLITE_ONLY
def test_listening_beyond_loopback_needs_users(db, web, users):
    from support.pgserver import free_port

    port = free_port()
    done = subprocess.run([*QUEUECTL, "--db", db, "web", "--bind", f"0.0.0.0:{port}"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 78 and done.stdout == "", done
    assert re.fullmatch(r"queuectl: error: refusing to listen on 0\.0\.0\.0 without users: [^\n]+\n", done.stderr)
    assert not listening(port)
    from pathlib import Path

    assert not Path(db).exists()  # nothing made either
    server = web(users=users, host="0.0.0.0")
    assert request(server.origin + "/", user="victor")[0] == 200
    assert request(server.origin + "/")[0] == 401


def links_of(driver) -> list[tuple[str, str, str]]:
    """(what, method, raw address) of every link, asset and form of the page."""
    return driver.execute_script("""
        const found = [];
        for (const e of document.querySelectorAll('[href], [src], form')) {
          const raw = e.getAttribute(e.tagName === 'FORM' ? 'action' : (e.hasAttribute('href') ? 'href' : 'src'));
          found.push([e.tagName, (e.getAttribute('method') || 'get').toLowerCase(), raw]);
        }
        return found;""")


def test_every_page_works_under_a_url_prefix(db, web, users, browser):
    prefix = "/q/p"
    first = enqueued(db, command="true", queue="build")
    second = enqueued(db, command="true", after=[first])
    dead = dead_job(db)
    queuectl(db, "schedule", "add", "tick", "--every", "1h", json.dumps({"command": "true"}))
    queuectl(db, "pause", "build")
    server = web(users=users, prefix=prefix)
    browser.sign_in("olga", USERS["olga"][1])
    pages = ["/", "/jobs", "/jobs?state=dead", f"/jobs/{first}", f"/jobs/{second}", f"/jobs/{dead}", "/queues",
             "/workers", "/schedules"]
    checked: dict[str, int] = {}
    for page in pages:
        browser.visit(server.url + page, f"prefixed{page}")
        assert browser.driver.find_elements("css selector", "main h1"), page
        assert browser.driver.execute_script("return getComputedStyle(document.body).fontFamily") != "", page
        found = links_of(browser.driver)
        assert any(what == "SCRIPT" for what, _, _ in found) and any(what == "LINK" for what, _, _ in found), page
        for what, method, raw in found:
            url = urljoin(browser.driver.current_url, raw)
            assert urlsplit(url).path.startswith(prefix + "/"), (page, what, raw)
            if url not in checked:
                checked[url] = request(url, user="olga")[0]
            assert checked[url] == (405 if method == "post" else 200), (page, what, raw, checked[url])
    forms = [url for url, status in checked.items() if status == 405]
    assert any(url.endswith("/retry") for url in forms) and any(url.endswith("/resume") for url in forms), forms
    # the page's own script under the prefix: the live region and the output follow
    browser.visit(server.url + "/", "prefixed-live")
    read_at = "return document.querySelector('#live p.read-at').textContent"
    first_read = browser.driver.execute_script(read_at)
    browser.wait(lambda d: d.execute_script(read_at) != first_read, SHOWN, "the live region to refresh")
    for outside in ("/", "/jobs", "/static/style.css", f"/jobs/{first}", "/q", "/q/pp/"):
        assert request(server.origin + outside, user="olga")[0] == 404, outside
    status, headers, _ = request(server.origin + prefix, user="olga")
    assert (status, headers["location"]) == (308, prefix + "/")


def test_commands_are_shown_as_text_and_run_no_script(db, web, users, browser, workers, tmp_path):
    (tmp_path / "w").write_text("until [ -e gate ]; do sleep 0.05; done\n")
    words = " ".join(f"'{x}'" for x in XSS)
    command, dead_command = f"sh w {words}", f"false {words}"
    assert max(len(command), len(dead_command)) <= 80  # not cut short on the lists
    dead = dead_job(db, command=dead_command)
    running = enqueued(db, command=command, cwd=str(tmp_path))
    server = web(users=users)
    workers.start()
    wait_for(lambda: state_of(db, running) == "processing", message="the job to run")
    browser.sign_in("olga", USERS["olga"][1])
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    def harmless(where: str) -> None:
        assert browser.driver.execute_script("return window.__xss") is None, where
        assert browser.driver.find_elements(By.CSS_SELECTOR, "main img") == [], where
        with pytest.raises(NoAlertPresentException):
            browser.driver.switch_to.alert.text

    browser.visit(f"{server.url}/jobs/{running}", "xss-job")
    assert browser.driver.find_element(By.ID, "command").text == command
    harmless("the job's page")
    browser.visit(f"{server.url}/jobs/{dead}", "xss-dead-job")
    assert browser.driver.find_element(By.ID, "command").text == dead_command
    harmless("the dead job's page")
    browser.visit(f"{server.url}/jobs", "xss-jobs")
    shown = {row.get_attribute("data-job"): row.find_element(By.CSS_SELECTOR, "td.command").text
             for row in browser.driver.find_elements(By.CSS_SELECTOR, "#jobs tr[data-job]")}
    assert shown == {running: command, dead: dead_command}
    harmless("the jobs list")
    browser.visit(f"{server.url}/", "xss-overview")

    def rows(d):
        cells = d.find_elements(By.XPATH, f"//section[@aria-labelledby='h-running']//tr[td/a[text()='{running}']]"
                                          "/td[@class='command']")
        dead_rows = d.find_elements(By.XPATH, f"//section[@aria-labelledby='h-dead']//tr[td/a[text()='{dead}']]")
        return cells and dead_rows and cells[0].text == command
    browser.wait(rows, SHOWN, "the overview's running and dead tables to show the jobs")
    harmless("the overview")
    (tmp_path / "gate").touch()
    wait_for(lambda: state_of(db, running) == "completed", message="the job to end")


def test_the_csp_forbids_inline_script_and_no_page_has_any(db, web, users, browser):
    job_id = dead_job(db)
    server = web(users=users)
    browser.sign_in("olga", USERS["olga"][1])
    for page in ("/", "/jobs", f"/jobs/{job_id}", "/queues", "/workers", "/schedules", "/nowhere"):
        status, headers, body = request(server.url + page, user="olga")
        assert status == (404 if page == "/nowhere" else 200), page
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
        assert headers["x-content-type-options"] == "nosniff"
        browser.visit(server.url + page, f"csp{page}")
        assert browser.driver.execute_script("return document.querySelectorAll('script:not([src])').length") == 0
        assert browser.driver.execute_script("return document.querySelectorAll('[onclick],[onload],[onerror]')"
                                             ".length") == 0
    browser.console()  # what came before
    browser.driver.execute_script("""
        const s = document.createElement('script');
        s.textContent = 'window.__inline = 1';
        document.body.appendChild(s);""")
    assert browser.driver.execute_script("return window.__inline") is None
    violations = browser.wait(lambda d: [e for e in browser.console() if "Content Security Policy" in e["message"]],
                              SHOWN, "the console to report the CSP violation")
    assert "script-src 'self'" in violations[0]["message"]


@SQLITE_ONLY  # the browser's doing: the engine does not matter
def test_a_refresh_keeps_the_charts_the_tab_has_and_gets_them_again_when_they_change(db, web, browser):
    """The live part's refreshes name the charts' stamp: unchanged, the answer is small and the page keeps its
    own charts (the same elements); changed (another minute, new history), the new charts replace them."""
    server = web()
    driver = browser.driver
    browser.visit(server.url + "/", "charts-kept")
    driver.execute_script("window.shownCharts = document.querySelector('#live [data-charts]')")
    svgs = driver.execute_script("return window.shownCharts.querySelectorAll('svg').length")
    assert svgs >= 9

    def sizes() -> list[int]:
        return [int(n) for n in re.findall(r'"GET /\?part=live&charts=[0-9a-f]{8} HTTP/1.1" 200 (\d+)', server.log())]

    browser.wait(lambda d: len(sizes()) >= 3, SHOWN, "three refreshes")
    # At most one refresh crosses a minute (its charts sent again); the others are the small answer, and the page
    # still shows charts, the ones it had or their successors.
    assert sorted(sizes())[1] < 20_000, sizes()
    assert driver.execute_script("return document.querySelectorAll('#live [data-charts] svg').length") == svgs
    assert driver.execute_script("return document.querySelectorAll('#live [data-kept]').length") == 0
    same = driver.execute_script("return document.querySelector('#live [data-charts]') === window.shownCharts")
    changed = driver.execute_script("return document.querySelector('#live [data-charts]').dataset.charts"
                                    " !== window.shownCharts.dataset.charts")
    assert same or changed  # the charts it had, kept; or new ones: never the same ones sent again


@SQLITE_ONLY  # the browser's doing: the engine does not matter
def test_the_live_region_stops_refreshing_while_the_tab_is_hidden(db, web, browser):
    server = web()
    driver = browser.driver

    def refreshes(tab: str) -> int:
        """The live region's reads from the page opened as ?tab=`tab` (gunicorn's access log has the referer)."""
        return len(re.findall(rf'"GET /\?part=live(&charts=[0-9a-f]+)? HTTP/1.1" 200 \d+ "[^"]*/\?tab={tab}"',
                              server.log()))

    browser.visit(server.url + "/?tab=first", "live-first")
    browser.wait(lambda d: refreshes("first") >= 2, SHOWN, "the shown tab to refresh")
    first = driver.current_window_handle
    driver.switch_to.new_window("tab")  # in front: the first tab is hidden
    browser.visit(server.url + "/?tab=second", "live-second")
    assert driver.execute_script("return document.visibilityState") == "visible"
    hidden_at = refreshes("first")
    browser.wait(lambda d: refreshes("second") >= 4, SHOWN, "the second tab to refresh four times")
    assert refreshes("first") <= hidden_at + 1  # one read may have been on its way when it was hidden
    driver.switch_to.window(first)  # in front again: it refreshes at once, and on
    browser.wait(lambda d: refreshes("first") >= hidden_at + 3, SHOWN, "the first tab to refresh again")


def luminance(css: str) -> float:
    """The relative luminance (WCAG 2: 0 black to 1 white) of a computed colour, "rgb(r, g, b)" or "rgba(...)"."""
    channels = [int(c) / 255 for c in re.findall(r"\d+(?:\.\d+)?", css)[:3]]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    """WCAG 2's contrast ratio of two computed colours (1 to 21)."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def colours(driver) -> dict:
    """The computed colours of the overview: the page's background and text, and in each span's wait and run time
    charts the y axis's text and each percentile's mark (a line's stroke, or a lone step's dot's fill)."""
    return driver.execute_script("""
        const style = e => getComputedStyle(e);
        const out = {bg: style(document.body).backgroundColor, fg: style(document.body).color, charts: {}};
        for (const svg of document.querySelectorAll('figure.chart svg.lines')) {
          const key = svg.closest('figure').id + ' ' + svg.getAttribute('class');
          const marks = {};
          for (const p of ['p50', 'p95']) {
            const e = svg.querySelector('g.' + p + ' > polyline, g.' + p + ' > circle');
            marks[p] = e && (e.tagName === 'circle' ? style(e).fill : style(e).stroke);
          }
          out.charts[key] = {text: style(svg.querySelector('text.mark')).fill, ...marks};
        }
        return out;""")


def test_the_overview_charts_wait_and_run_times_in_the_light_and_the_dark_theme(db, web, browser):
    """The wait and run time charts of every span show the jobs that ran, as lines or dots with a text alternative;
    the page and its charts are light by default and dark when the browser prefers dark (emulated through the
    DevTools protocol), every chart's marks and labels readable on its background (WCAG contrast 3 or more)."""
    from selenium.webdriver.common.by import By

    dead_job(db)
    for _ in range(2):
        enqueued(db, command="true")
    queuectl(db, "worker", "start", "--burst")
    wait_for(lambda: any(r["run_p50"] is not None and r["wait_p50"] is not None
                         for r in json.loads(queuectl(db, "history", "--json", "--since", "2h").stdout)),
             message="the history to hold the runs")
    server = web()
    browser.visit(server.url + "/", "overview-light")
    for span in ("hour", "day", "week"):
        for kind, heading in (("wait", "Wait time (due to start)"), ("run", "Run time (start to end)")):
            svg = browser.driver.find_element(By.CSS_SELECTOR, f"#chart-{span} svg.lines.{kind}")
            label = svg.get_attribute("aria-label")
            assert label.startswith(heading) and label.endswith("with a sample"), (span, kind, label)
            marks = svg.find_elements(By.CSS_SELECTOR, "g.p50 > polyline, g.p50 > circle, g.p95 > polyline,"
                                                       " g.p95 > circle")
            # Drawn: shown by its style, with an extent. Not is_displayed(): a line whose two steps have one value is
            # horizontal, its box 0 high, and WebDriver takes that for hidden (the runs fell in two minutes).
            assert marks and all(browser.driver.execute_script(
                "const e = arguments[0], box = e.getBBox(), style = getComputedStyle(e);"
                " return style.visibility !== 'hidden' && style.display !== 'none' && box.width + box.height > 0"
                " && e.getBoundingClientRect().width > 0;", m) for m in marks), (span, kind)
            assert svg.find_elements(By.CSS_SELECTOR, "rect.tip > title"), (span, kind)
            assert svg.size["width"] > 300 and svg.size["height"] > 40, (span, kind, svg.size)
    assert browser.driver.execute_script("return matchMedia('(prefers-color-scheme: dark)').matches") is False
    light = colours(browser.driver)
    assert luminance(light["bg"]) > 0.8 and luminance(light["fg"]) < 0.1, light
    browser.driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                                   {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    browser.visit(server.url + "/", "overview-dark")
    assert browser.driver.execute_script("return matchMedia('(prefers-color-scheme: dark)').matches") is True
    dark = colours(browser.driver)
    assert luminance(dark["bg"]) < 0.05 and luminance(dark["fg"]) > 0.6, dark
    assert set(light["charts"]) == set(dark["charts"]) and len(dark["charts"]) == 6
    for theme in (light, dark):
        for key, chart in theme["charts"].items():
            assert all(contrast(chart[c], theme["bg"]) >= 3 for c in ("text", "p50", "p95")), (key, theme)
    changed = [key for key in dark["charts"] if dark["charts"][key]["p50"] != light["charts"][key]["p50"]]
    assert changed == list(dark["charts"]), (light, dark)  # the charts' colours follow the theme too


def test_the_workers_page_shows_each_worker_s_unit(db, web, browser, workers):
    """A worker under a unit (QUEUECTL_UNIT, as queuectl-worker@.service sets it) shows its unit; its state
    and restarts come from systemd on this host only, so without systemd here they are "-" (under systemd:
    tests/system/test_web_service.py)."""
    from queuectl.host.units import systemd_booted

    workers.start("--name", "w-unit", env={"QUEUECTL_UNIT": "queuectl-worker@w-unit.service"})
    workers.start("--name", "w-plain")
    wait_for(lambda: {w["name"] for w in queue_status(db)["workers"]}
             == {"w-unit", "w-plain"}, message="both workers to register")
    server = web()
    browser.visit(server.url + "/workers", "workers")
    found = {row.find_element("css selector", "td").text: row
             for row in browser.driver.find_elements("css selector", "#workers tbody tr")}
    cells = {name: {c: row.find_element("css selector", f"td.{c}").text for c in ("unit", "unit-state", "restarts")}
             for name, row in found.items()}
    assert cells["w-plain"] == {"unit": "-", "unit-state": "-", "restarts": "-"}
    assert cells["w-unit"]["unit"] == "queuectl-worker@w-unit.service"
    if not systemd_booted():
        assert cells["w-unit"] == {"unit": "queuectl-worker@w-unit.service", "unit-state": "-", "restarts": "-"}
    browser.screenshot("workers-units")


def test_a_job_s_page_shows_its_attempts(db, web, users, browser):
    from selenium.webdriver.common.by import By

    on_dead_job_page(db, web, users, browser, "victor", "job-attempts")
    rows = [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
            for row in browser.driver.find_elements(By.CSS_SELECTOR, "#attempts tr[data-attempt]")]
    assert [(r[0], r[1], r[5], r[6]) for r in rows] == [("1", "dead", "3", "exit code 3")]


@SQLITE_ONLY  # the browser's doing: the engine does not matter
def test_under_an_allowed_name_everything_works_and_a_rebound_name_reads_nothing(db, web, users, shots, request,
                                                                                 workers, tmp_path):
    """DNS rebinding as the browser lives it: two names that resolve to this host (chromium's resolver rules, no
    DNS), one given with --allow-host and one not, as a page that re-pointed its own name at 127.0.0.1 would
    have it. Under the allowed name the pages, the live refresh, a running job's output and an action work;
    under the other, the page and its own script's reads (same-origin for the browser) get 421 and nothing,
    with the operator's credentials sent all along."""
    from selenium.webdriver.common.by import By

    from support import webserver

    require(chromium.missing(), "processes")
    rules = "MAP queue.test 127.0.0.1, MAP rebind.test 127.0.0.1"
    b = chromium.Browser(shots, request.node.name, (f"--host-resolver-rules={rules}",))
    try:
        dead = dead_job(db)
        gate = tmp_path / "gate"
        running = enqueued(db, command=f"echo first line; until [ -e {gate} ]; do sleep 0.05; done")
        server = web("--allow-host", "queue.test", users=users)
        b.sign_in("olga", USERS["olga"][1])
        allowed, rebound = f"http://queue.test:{server.port}", f"http://rebind.test:{server.port}"
        workers.start()
        wait_for(lambda: state_of(db, running) == "processing", message="the job to run")
        b.visit(allowed + "/", "allowed-overview")
        expected = status_counts(db)
        b.wait(lambda d: shown_counts(d) == expected, SHOWN, f"the overview to show {expected}")
        enqueued(db, command="true", queue="later", delay=3600)
        expected = wait_for(lambda: (c := status_counts(db)).get("later") and c, message="the delayed job")
        b.wait(lambda d: shown_counts(d) == expected, SHOWN, "the live refresh to show the new job")
        b.visit(f"{allowed}/jobs/{running}", "allowed-output")
        stdout = b.driver.find_element(By.ID, "stdout")
        b.wait(lambda d: stdout.text == "first line", SHOWN, "the running job's output to show")
        b.visit(f"{allowed}/jobs/{dead}", "allowed-action")
        b.driver.find_element(By.XPATH, "//form[contains(@action, '/retry')]/button").click()
        said = b.wait(lambda d: d.find_elements(By.CSS_SELECTOR, "p.said"), SHOWN, "the page to say what happened")
        assert said[0].text.startswith(f"job {dead} retried")
        assert urlsplit(b.driver.current_url).netloc == f"queue.test:{server.port}"
        # The rebound name: the page, and what its own script reads as its origin.
        b.visit(f"{rebound}/jobs/{running}", "rebound-job")
        page = b.driver.page_source
        assert "does not answer to the host name rebind.test" in page, page
        assert running not in page and "first line" not in page and "<table" not in page
        reads = b.driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            Promise.all(arguments[0].map(p => fetch(p, {credentials: 'same-origin'})
                .then(async r => [r.status, await r.text()])))
              .then(done, e => done(String(e)));""",
            [f"/jobs/{running}/output.json", "/?part=live", "/jobs", f"/jobs/{dead}"])
        for status, body in reads:
            assert status == 421 and running not in body and dead not in body and "first line" not in body, body
        # A raw request naming the rebound host, as a script that is no browser sends it.
        status, _, body = webserver.request(f"http://127.0.0.1:{server.port}/jobs/{running}", user="olga",
                                  headers={"Host": f"rebind.test:{server.port}"})
        assert status == 421 and running not in body
        lines = [line for line in server.log().splitlines() if "refusing requests for host rebind.test:" in line]
        assert len(lines) == 1, server.log()
    finally:
        gate.touch()
        b.close()
