"""queuectl-worker@.service under a real systemd: readiness, draining stops, watchdog and crash restarts."""

from __future__ import annotations

import json
import time


from support.cli import queuectl
from queuectl.store import open_store

from support.suite import require

from .container import TIER, container_until, q
from .container import debian_python_missing



def start(c, *instances: str) -> None:
    c.run("systemctl", "start", *[f"queuectl-worker@{i}" for i in instances], timeout=60)
    for i in instances:
        assert c.show(f"queuectl-worker@{i}", "ActiveState")["ActiveState"] == "active"


def job(c, job_id: str):
    return json.loads(q(c, "show", job_id, "--json").stdout)


def shows_state(c, job_id: str, state: str):
    """A predicate: `queuectl show` in the container gives job `job_id` in `state`."""
    return lambda: job(c, job_id)["state"] == state


def enqueue(c, **fields) -> None:
    q(c, "enqueue", json.dumps(fields))


def main_pid(c, instance: str) -> int:
    return int(c.show(f"queuectl-worker@{instance}", "MainPID")["MainPID"])


def test_two_instances_run_20_jobs_and_status_shows_their_units(sysd):
    c = sysd
    start(c, "1", "2")
    lines = "\n".join(json.dumps({"id": f"j{i}", "command": f"sleep 0.2; echo {i}; id -un"}) for i in range(20))
    c.run("queuectl", "enqueue", "--file", "-", input=lines)
    container_until(lambda: json.loads(q(c, "status", "--json").stdout)["jobs"]["completed"] == 20, "20 completed jobs")
    assert q(c, "logs", "j7").stdout == "7\nqueuectl\n"  # ran as the service's user
    status = json.loads(q(c, "status", "--json").stdout)
    assert sorted(w["name"] for w in status["workers"]) == ["1", "2"]
    # the sandboxed services and this shell agree that the workers are local and alive
    assert [w["state"] for w in status["workers"]] == ["running", "running"]
    assert {w["unit"] for w in status["workers"]} == {"queuectl-worker@1.service", "queuectl-worker@2.service"}
    units = {u["unit"]: u for u in status["units"]}
    for name in ("queuectl-worker@1.service", "queuectl-worker@2.service"):
        assert units[name]["active_state"] == "active" and units[name]["sub_state"] == "running"
        assert units[name]["status_text"].startswith("idle, 1 slot(s);"), units[name]
    done = sum(int(u["status_text"].split("; ")[1].split()[0]) for u in units.values())
    assert done == 20  # both StatusTexts count what their instance ran
    text = q(c, "status").stdout
    assert "Units (2)" in text and "queuectl-worker@1.service  active  running" in text


def test_systemctl_stop_drains_the_running_job_and_does_not_restart(sysd):
    c = sysd
    start(c, "1")
    enqueue(c, id="long", command="sleep 10; echo finished")
    container_until(shows_state(c, "long", "processing"), "the job to start")
    began = time.monotonic()
    c.run("systemctl", "stop", "queuectl-worker@1", timeout=120)  # returns once the unit has stopped
    assert time.monotonic() - began > 5  # it waited for the job rather than killing it
    info = job(c, "long")
    assert (info["state"], info["attempts"]) == ("completed", 1)
    assert q(c, "logs", "long").stdout == "finished\n"
    props = c.show("queuectl-worker@1", "ActiveState", "Result", "NRestarts", "ExecMainStatus")
    assert props == {"ActiveState": "inactive", "Result": "success", "NRestarts": "0", "ExecMainStatus": "0"}
    assert "STOPPING" not in c.journal("queuectl-worker@1")  # notify messages are not log lines
    assert "stop requested: draining 1 running job(s)" in c.journal("queuectl-worker@1")
    time.sleep(3)  # longer than RestartSec: no restart follows a requested stop
    assert c.show("queuectl-worker@1", "ActiveState")["ActiveState"] == "inactive"


def watchdog_dropin(c, seconds: int) -> None:
    """A site's drop-in shortening the watchdog, as `systemctl edit` would write it."""
    c.write("/etc/systemd/system/queuectl-worker@.service.d/watchdog.conf",
            f"[Service]\nWatchdogSec={seconds}s\nTimeoutAbortSec=3s\n")
    c.run("systemctl", "daemon-reload")


def slow_first_attempt(c, job_id: str) -> None:
    """A job whose first attempt takes 60 s and later ones end at once."""
    enqueue(c, id=job_id, command='if [ "$QUEUECTL_ATTEMPT" = 1 ]; then sleep 60; fi; echo "attempt $QUEUECTL_ATTEMPT"')
    container_until(lambda: job(c, job_id)["state"] == "processing", "the job to start")


def assert_recovered_by_next_incarnation(c, job_id: str, began: float) -> None:
    container_until(shows_state(c, job_id, "completed"), "the job to be recovered and completed", timeout=25)
    # stale-after is 30 s by default: the new incarnation recovered its predecessor's job at once
    assert time.monotonic() - began < 25
    info = job(c, job_id)
    assert info["attempts"] == 2
    assert q(c, "logs", job_id).stdout == "attempt 2\n"
    assert f"recovered job {job_id} from its previous incarnation (worker lost)" in c.journal("queuectl-worker@1")
    container_until(lambda: c.show("queuectl-worker@1", "ActiveState")["ActiveState"] == "active", "the unit to run again")
    assert int(c.show("queuectl-worker@1", "NRestarts")["NRestarts"]) >= 1


def test_a_hung_worker_is_killed_by_the_watchdog_restarted_and_its_job_recovered(sysd):
    c = sysd
    watchdog_dropin(c, 3)
    start(c, "1")
    slow_first_attempt(c, "hung")
    first = main_pid(c, "1")
    began = time.monotonic()
    c.run("kill", "-STOP", str(first))  # alive but silent: no heartbeat, so no watchdog ping
    container_until(lambda: "Failed with result 'watchdog'" in c.journal("queuectl-worker@1"), "systemd's watchdog",
          timeout=30)
    assert_recovered_by_next_incarnation(c, "hung", began)
    assert main_pid(c, "1") != first


def test_a_worker_on_postgresql_rides_out_an_outage_longer_than_its_watchdog(pg_server, pg_uri, sysd):
    # The session's server, on this machine's loopback, which the container shares. The worker
    # pings through the outage (the watchdog rule): no restart, and its jobs are not killed. (The
    # database outlives the unit: pg_uri comes before sysd, so its teardown comes after.)
    require(debian_python_missing(("click", "sdnotify", "daemon", "psycopg"), root=sysd.lower), TIER)
    c = sysd
    watchdog_dropin(c, 10)
    c.write("/etc/queuectl/worker-1.env", f"QUEUECTL_DB={pg_uri}\nQUEUECTL_WORKER_COUNT=2\n")

    def state(job_id: str) -> tuple[str, int]:
        with open_store(pg_uri) as s:
            job = s.get_job(job_id)
        return job.state.value, job.attempts

    earlier = len(c.journal("queuectl-worker@1"))  # what the module's earlier tests logged
    try:
        start(c, "1")
        for job_id in ("through", "during"):  # each runs until the test creates its file
            command = f"until [ -e /var/lib/queuectl/{job_id} ]; do sleep 0.1; done"
            queuectl(pg_uri, "enqueue", json.dumps({"id": job_id, "command": command}))
        container_until(lambda: state("through")[0] == state("during")[0] == "processing", "both jobs to run")
        pid = main_pid(c, "1")
        pg_server.stop()
        down = time.monotonic()
        c.run("touch", "/var/lib/queuectl/during")  # ends while the server is down: its result is held
        container_until(lambda: "1 result(s) held" in c.show("queuectl-worker@1", "StatusText")["StatusText"],
              "STATUS= to say that the database is unavailable and a result is held")
        said = c.show("queuectl-worker@1", "StatusText")["StatusText"]
        time.sleep(max(0.0, 20 - (time.monotonic() - down)))  # the outage: twice WatchdogSec
        during = c.show("queuectl-worker@1", "ActiveState", "NRestarts", "MainPID")
        pg_server.start()
        container_until(lambda: state("during") == ("completed", 1), "the held result to be recorded", timeout=30)
        c.run("touch", "/var/lib/queuectl/through")
        container_until(lambda: state("through") == ("completed", 1), "the job that ran through the outage to complete")
        journal = c.journal("queuectl-worker@1")[earlier:]
        print(f"\n  an outage of 20 s under WatchdogSec=10s: {during}; STATUS={said!r}")
        assert during == {"ActiveState": "active", "NRestarts": "0", "MainPID": str(pid)}, journal
        assert c.show("queuectl-worker@1", "NRestarts", "MainPID") == {"NRestarts": "0", "MainPID": str(pid)}, journal
        assert said.startswith("database unavailable for ") and "1 job(s) running" in said, said
        assert "watchdog" not in journal and "takes writes again" in journal, journal
    finally:  # whatever failed, the jobs end and the server is up for the unit's stop at teardown
        c.run("touch", "/var/lib/queuectl/during", "/var/lib/queuectl/through")
        if not pg_server.running():
            pg_server.start()


def test_a_killed_worker_is_restarted_and_its_job_recovered(sysd):
    c = sysd
    start(c, "1")
    slow_first_attempt(c, "killed")
    first = main_pid(c, "1")
    began = time.monotonic()
    c.run("systemctl", "kill", "-s", "KILL", "queuectl-worker@1")
    container_until(lambda: main_pid(c, "1") not in (0, first), "a new incarnation")
    assert_recovered_by_next_incarnation(c, "killed", began)
    assert "sleep 60" not in c.run("ps", "-eo", "args").stdout  # the old attempt's processes are gone


def test_queuectl_worker_stop_stops_every_instance_through_systemctl(sysd):
    c = sysd
    start(c, "1", "2")
    enqueue(c, id="drained", command="sleep 3; echo ok")
    container_until(shows_state(c, "drained", "processing"), "the job to start")
    pids = {i: main_pid(c, i) for i in ("1", "2")}
    out = q(c, "worker", "stop").stdout
    assert sorted(out.splitlines()) == [f"{i} (pid {pids[i]}): stopped" for i in ("1", "2")]
    assert shows_state(c, "drained", "completed")()
    for i in ("1", "2"):
        props = c.show(f"queuectl-worker@{i}", "ActiveState", "Result", "NRestarts")
        assert props == {"ActiveState": "inactive", "Result": "success", "NRestarts": "0"}
    assert json.loads(q(c, "status", "--json").stdout)["workers"] == []


def test_a_bad_configuration_exits_78_and_is_not_restarted(sysd):
    c = sysd
    c.write("/etc/queuectl/worker-3.env", "QUEUECTL_WORKER_COUNT=0\n")
    c.run("systemctl", "start", "queuectl-worker@3", check=False)
    container_until(lambda: c.show("queuectl-worker@3", "ActiveState")["ActiveState"] == "failed", "the unit to fail")
    time.sleep(3)  # longer than RestartSec
    props = c.show("queuectl-worker@3", "ActiveState", "Result", "NRestarts", "ExecMainStatus")
    assert props == {"ActiveState": "failed", "Result": "exit-code", "NRestarts": "0", "ExecMainStatus": "78"}
    assert "QUEUECTL_WORKER_COUNT" in c.journal("queuectl-worker@3") or "--count" in c.journal("queuectl-worker@3")


def test_per_instance_environment_file_sets_slots_and_queues(sysd):
    c = sysd
    c.write("/etc/queuectl/worker-4.env", "QUEUECTL_WORKER_COUNT=3\nQUEUECTL_WORKER_QUEUES=build deploy\n")
    start(c, "4")
    [w] = json.loads(q(c, "status", "--json").stdout)["workers"]
    assert (w["name"], w["slots"], sorted(w["queues"])) == ("4", 3, ["build", "deploy"])


def test_a_drop_in_names_every_instance_after_its_host(sysd):
    # Hosts that share a PostgreSQL queue need worker names of their own: Environment= in a
    # drop-in for the template renames every instance, and worker-N.env still wins over it.
    c = sysd
    c.write("/etc/systemd/system/queuectl-worker@.service.d/name.conf",
            "[Service]\nEnvironment=QUEUECTL_WORKER_NAME=%H-%i\n")
    c.write("/etc/queuectl/worker-6.env", "QUEUECTL_WORKER_NAME=six\n")
    c.run("systemctl", "daemon-reload")
    try:
        start(c, "5", "6")
        names = sorted(w["name"] for w in json.loads(q(c, "status", "--json").stdout)["workers"]
                       if w["unit"] in ("queuectl-worker@5.service", "queuectl-worker@6.service"))
        host = c.run("hostname").stdout.strip()
        assert names == [f"{host}-5", "six"], names
    finally:
        c.run("systemctl", "stop", "queuectl-worker@5", "queuectl-worker@6", check=False)
        c.run("rm", "-r", "/etc/systemd/system/queuectl-worker@.service.d", "/etc/queuectl/worker-6.env")
        c.run("systemctl", "daemon-reload")


def test_enqueue_wakes_a_sandboxed_worker_at_once(sysd):
    c = sysd
    start(c, "1")
    q(c, "config", "set", "poll-interval", "60")  # without the wake-up, a minute's wait
    time.sleep(6.5)  # past a heartbeat (5 s), where the worker re-reads its settings: it now polls once a minute
    began = time.monotonic()
    enqueue(c, id="woken", command="true")
    container_until(shows_state(c, "woken", "completed"), "the woken worker to run the job", timeout=20)
    assert time.monotonic() - began < 10


def test_the_metrics_timer_writes_a_file_that_parses(sysd):
    from prometheus_client.parser import text_string_to_metric_families

    c = sysd
    start(c, "1")
    enqueue(c, id="m1", command="true")
    container_until(shows_state(c, "m1", "completed"), "a job to complete")
    c.run("mkdir", "-p", "/var/lib/prometheus/node-exporter")  # what prometheus-node-exporter ships
    c.run("chmod", "0755", "/var/lib/prometheus/node-exporter")
    c.run("systemctl", "start", "queuectl-metrics.timer")  # OnBootSec passed long ago: it fires at once
    path = "/var/lib/prometheus/node-exporter/queuectl.prom"
    container_until(lambda: c.run("test", "-s", path, check=False).returncode == 0, "the timer to write the file")
    text = c.run("cat", path).stdout
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("queuectl_job_runs_total", (("outcome", "completed"), ("queue", "default")))] == 1
    assert samples[("queuectl_workers", (("state", "running"),))] == 1
    assert c.run("stat", "-c", "%a", path).stdout.strip() == "644"
    props = c.show("queuectl-metrics.service", "Result", "ExecMainStatus")
    assert props == {"Result": "success", "ExecMainStatus": "0"}
    c.run("systemctl", "stop", "queuectl-metrics.timer")
