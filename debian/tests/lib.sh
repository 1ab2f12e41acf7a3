# Shared by the DEP-8 tests of this folder (sourced, never run): waiting on conditions and failing with
# what was seen. autopkgtest runs each test from the source tree's root, as root on a booted machine.

# fail MESSAGE...: say why on stderr and exit 1.
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# until_true SECONDS WHAT COMMAND...: run COMMAND every POLL seconds (0.2 unless set) until it succeeds; fail
# naming WHAT after SECONDS.
until_true() {
    limit=$1 what=$2
    shift 2
    deadline=$(( $(date +%s) + limit ))
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "$what: not within ${limit} s"
        sleep "${POLL:-0.2}"
    done
}

# state ID: the job's state.
state() {
    queuectl show "$1" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["state"])'
}

# state_is ID STATE: whether the job is in that state.
state_is() {
    [ "$(state "$1")" = "$2" ]
}

# unit_is UNIT ACTIVESTATE: whether the unit is in that state.
unit_is() {
    [ "$(systemctl show -p ActiveState --value "$1")" = "$2" ]
}

# http URL [HOST]: print the status of a GET of URL (naming HOST, if given), then its body.
http() {
    python3 - "$@" <<'PY'
import sys, urllib.error, urllib.request
request = urllib.request.Request(sys.argv[1])
if len(sys.argv) > 2:
    request.add_header("Host", sys.argv[2])
try:
    with urllib.request.urlopen(request, timeout=60) as response:
        status, body = response.status, response.read()
except urllib.error.HTTPError as e:
    status, body = e.code, e.read()
print(status)
print(body.decode("utf-8", "replace"))
PY
}
