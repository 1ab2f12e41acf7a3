#!/bin/sh
# queuectl demo: compress and checksum the licence texts shipped with the system, with one job per
# file, plus a job that keeps failing (retried with backoff, then dead) and one that overruns its
# timeout. Everything lives in ./demo-work, recreated on each run; the database is queuectl's
# default path with XDG_DATA_HOME pointed there.
set -eu

SRC=/usr/share/common-licenses
[ -d "$SRC" ] || SRC=/usr/share/doc/base-files
WORK="$(pwd)/demo-work"
rm -rf "$WORK"
mkdir -p "$WORK/out"
export XDG_DATA_HOME="$WORK/data"
unset QUEUECTL_DB

echo "== enqueue: one job per file in $SRC, a failing job and a slow job"
python3 - "$SRC" "$WORK/out" > "$WORK/jobs.jsonl" <<'PY'
import json, os, shlex, sys
src, out = sys.argv[1], sys.argv[2]
for name in sorted(os.listdir(src)):
    path = os.path.join(src, name)
    if not os.path.isfile(path) or os.path.islink(path):
        continue
    gz = os.path.join(out, name + ".gz")
    command = (f"gzip -9 -c {shlex.quote(path)} > {shlex.quote(gz)}"
               f" && gzip -d -c {shlex.quote(gz)} | cmp -s - {shlex.quote(path)}"
               f" && sha256sum {shlex.quote(gz)} > {shlex.quote(gz)}.sha256")
    print(json.dumps({"id": "gzip-" + name, "command": command, "queue": "licenses"}))
print(json.dumps({"id": "fetch-mirror", "command": "ls /nonexistent/mirror", "max_retries": 2}))
print(json.dumps({"id": "slow-report", "command": "sleep 30", "timeout": 2, "max_retries": 0}))
PY
queuectl enqueue --file "$WORK/jobs.jsonl" | tr '\n' ' '
echo
echo
echo "== worker: 2 slots, --burst (exits once nothing is ready, waiting for a retry, or running)"
queuectl worker start --count 2 --burst 2>"$WORK/worker.log" || { cat "$WORK/worker.log"; exit 1; }
grep -E " (WARNING|ERROR) " "$WORK/worker.log" | sed 's/^[^ ]* [^ ]* //' || true
echo
echo "== queuectl status"
queuectl status
echo
echo "== queuectl dlq list"
queuectl dlq list
echo
echo "== results in $WORK/out"
(cd "$WORK/out" && ls -1 *.gz | wc -l | xargs echo "compressed files:" && cat *.sha256 | sha256sum -c --quiet - && echo "checksums: all OK")
