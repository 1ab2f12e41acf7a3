"""What touches the machine the worker runs on: jobs as process groups (runner), process identity that
resists PID reuse (procs), stop signals (signals), systemd's notify protocol (notify) and units (units),
wake-ups between workers on one host (wake), whether a registered worker is alive (liveness), stopping
workers from another process (control), logging (logsetup; whether stderr is the journal: journal) and
detaching from a terminal (daemonize). It may import queuectl.domain, never the store, the library or a front end."""
