"""Make the README's screenshot of the dashboard's overview (docs/images/overview.png) from a demo queue.

    .venv/bin/python demo/overview_screenshot.py [OUT.png] [--dark]

A SQLite queue in a temporary directory gets a week of activity history (two queues, a daily rhythm, a few
hours without work, a job in twenty dead), written through the store as a worker would record it; then a
worker that is running a job, a paused queue with jobs waiting, two schedules. `queuectl web` serves it
and Debian's headless chromium (tests/support/browser.py: `apt-get install chromium chromium-driver`)
takes the picture; --dark as the browser preferring the dark theme. Nothing outside the temporary
directory is written but OUT.png.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

#: The browser's window's width, pixels (its height: the overview's, whole).
WIDTH = 1280


def history(store, now: float) -> None:
    """A week of jobs of queues build and mail, ended through a past worker's exchanges."""
    from queuectl.domain.jobspec import parse_job
    from queuectl.store.request import Exchange, Outcome

    rnd = random.Random(28)
    worker = store.register_worker({"name": "w0", "host": "vm", "boot_id": "b", "pid": 1, "pid_start": 1,
                                    "slots": 64, "queues": [], "unit": None}, now - 8 * 86400)[0]
    n = 0

    def ran(t: float, count: int, wait: float, run: float) -> None:
        nonlocal n
        jobs = []
        for _ in range(count):
            n += 1
            queue = "mail" if n % 3 else "build"
            jobs.append(parse_job(json.dumps({"id": f"{queue}-{n}", "queue": queue, "max_retries": 0,
                                              "command": "./send.sh" if queue == "mail" else "make"}), t))
        store.enqueue(jobs, t)
        store.exchange(worker, Exchange(claim=count), [], t + wait)
        ends = []
        for job in jobs:
            took = run * rnd.lognormvariate(0, 0.5)
            ok = rnd.random() > 0.05
            ends.append(Outcome(job.id, ok, 0 if ok else 3, None if ok else "exit code 3", started_at=t + wait,
                                ended_at=t + wait + took))
        store.exchange(worker, Exchange(ended=ends), [], t + wait + 5 * run)

    for h in range(167, 1, -1):  # the last hour: its minutes, below
        if 40 <= h < 46:
            continue  # a quiet night
        day = 1 + math.sin((now // 3600 - h) / 24 * 2 * math.pi)
        ran((now // 3600 - h) * 3600 + 60, int(15 + 30 * day), 0.2 + 1.5 * day, 0.4 + 0.8 * day)
    for m in range(59, 0, -1):
        if m not in (12, 13, 31):
            ran((now // 60 - m) * 60 + 1, rnd.randint(1, 4), 0.05 + rnd.random() * (3 if m < 20 else 0.5),
                1 + rnd.random() * 2)
    store.maintain(worker)
    store.deregister(worker, now=now - 60)


def present(store, db: str, now: float) -> None:
    """A worker running a job, a paused queue with jobs waiting, two schedules."""
    from queuectl.domain.jobspec import parse_job
    from queuectl.store.request import Exchange, Running

    worker = store.register_worker({"name": "w1", "host": "vm", "boot_id": "b", "pid": 1, "pid_start": 1,
                                    "slots": 2, "queues": [], "unit": "queuectl-worker@1.service"}, now - 300)[0]
    store.enqueue([parse_job(json.dumps({"id": "deploy-42", "queue": "build",
                                         "command": "./deploy.sh --env staging"}), now - 8)], now - 8)
    store.exchange(worker, Exchange(claim=1), ["build"], now - 7)
    store.exchange(worker, Exchange(running=[Running("deploy-42", now - 6)]), [], now - 1)
    store.heartbeat(worker, now)
    store.enqueue([parse_job(json.dumps({"id": f"report-{i}", "queue": "reports", "command": "./report.py"}), now)
                   for i in range(30)], now)
    for args in (["pause", "reports"],
                 ["schedule", "add", "tick", "--every", "5m", '{"command": "true"}'],
                 ["schedule", "add", "nightly", "--cron", "30 2 * * *", '{"command": "./backup.sh"}']):
        subprocess.run([sys.executable, "-m", "queuectl", "--db", db, *args], check=True, capture_output=True)


def main(argv: list[str]) -> int:
    from queuectl.api.database import Database
    from support.browser import Browser, missing
    from support.webserver import WebServer

    out = Path(next((a for a in argv if not a.startswith("--")), ROOT / "docs/images/overview.png"))
    if why := missing():
        print(f"overview_screenshot: {why}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "queue.db")
        store = Database(db, "demo").store()
        now = time.time()
        history(store, now)
        present(store, db, time.time())
        store.close()
        server = WebServer(db, Path(tmp), interval="3").start()
        browser = Browser(Path(tmp), "overview")
        try:
            if "--dark" in argv:
                browser.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
                    "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
            browser.driver.get(server.url + "/")
            height = browser.driver.execute_script(
                "return document.documentElement.scrollHeight + window.outerHeight - window.innerHeight")
            browser.driver.set_window_size(WIDTH, height)
            browser.driver.save_screenshot(str(out))
        finally:
            browser.close()
            server.stop()
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
