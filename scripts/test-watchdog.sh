#!/usr/bin/env bash
# Runs a test command (default: swift test) with a time limit, and when the limit is reached
# says what was hanging before stopping it: the tests that started and never finished, and the
# backtrace of every thread of the test process (gdb, else lldb). Output is line-buffered, so
# the log shows every line the tests printed up to the hang.
#
#   scripts/test-watchdog.sh MINUTES [command …]
#
# The command runs in a session of its own, and everything in that session is stopped at the
# limit or when the watchdog itself is interrupted (INT, TERM): SwiftPM starts the test binary
# in a process group of its own, and the tests start servers in theirs, so a process group
# would not reach them. TEST_WATCHDOG_SECONDS, when set, is the limit in seconds instead (for
# testing the watchdog).
#
# Exits with the command's status, or 125 when the limit was reached.
set -uo pipefail

if [ $# -lt 1 ] || ! [[ "$1" =~ ^[0-9]+$ ]] || [ "$1" -eq 0 ]; then
    echo "usage: scripts/test-watchdog.sh MINUTES [command …]  (MINUTES a whole number above 0)" >&2
    exit 2
fi
limit=$(( $1 * 60 ))
label="$1 minutes"
if [ -n "${TEST_WATCHDOG_SECONDS:-}" ]; then
    [[ "$TEST_WATCHDOG_SECONDS" =~ ^[0-9]+$ ]] && [ "$TEST_WATCHDOG_SECONDS" -gt 0 ] || { echo "test-watchdog: TEST_WATCHDOG_SECONDS must be a whole number above 0" >&2; exit 2; }
    limit="$TEST_WATCHDOG_SECONDS"
    label="$limit seconds"
fi
shift
[ $# -gt 0 ] || set -- swift test
# With job control on, the background child would lead a process group and setsid would fork,
# so the session found below would not be the command's.
set +m

log="$(mktemp "${TMPDIR:-/tmp}/test-watchdog.XXXXXX")"

# stdbuf makes stdio line-buffered in the command and its children (LD_PRELOAD is inherited),
# so nothing the tests printed is lost in a buffer when the process is stopped.
buffering=()
command -v stdbuf >/dev/null 2>&1 && buffering=(stdbuf -oL -eL)

# setsid -w: the command leads a new session (its pid is the session id), and setsid waits
# for it should it have to fork.
setsid -w "${buffering[@]}" "$@" > >(tee -a "$log") 2> >(tee -a "$log" >&2) &
pid=$!
session="$pid"

# Stops every process of the command's session: TERM, up to 10 s to end, then KILL.
stop_session() {
    pkill -TERM -s "$session" 2>/dev/null || true
    for _ in $(seq 1 20); do
        pgrep -s "$session" >/dev/null 2>&1 || return 0
        sleep 0.5
    done
    pkill -KILL -s "$session" 2>/dev/null || true
}
trap 'rm -f "$log"' EXIT
trap 'echo "test-watchdog: interrupted; stopping the tests" >&2; stop_session; exit 143' INT TERM

deadline=$(( $(date +%s) + limit ))
while kill -0 "$pid" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "test-watchdog: '$*' did not finish within $label" >&2
        echo "test-watchdog: tests started and not finished:" >&2
        # Swift Testing prints "◇ Test name() started." and "✔/✘ Test name() passed/failed…";
        # XCTest prints "Test Case '…' started[ at <time>]." and "… passed/failed (…)".
        awk '
            { gsub(/\033\[[0-9;]*m/, "") }
            /◇ Test .* started\./ { s = $0; sub(/^.*◇ Test /, "", s); sub(/ started\.$/, "", s); open[s] = 1; next }
            /[✔✘] Test / { s = $0; sub(/^.*[✔✘] Test /, "", s); sub(/ (passed|failed).*$/, "", s); sub(/ with [0-9]+ test cases?$/, "", s); delete open[s]; next }
            /Test Case .* started/ { s = $0; sub(/^.*Test Case /, "", s); sub(/ started.*$/, "", s); open[s] = 1; next }
            /Test Case .* (passed|failed)/ { s = $0; sub(/^.*Test Case /, "", s); sub(/ (passed|failed).*$/, "", s); delete open[s]; next }
            END { n = 0; for (s in open) { print "  " s; n++ } if (n == 0) print "  (none seen)" }
        ' "$log" >&2
        found=0
        for tpid in $(pgrep -s "$session" 2>/dev/null); do
            name="$(readlink "/proc/$tpid/exe" 2>/dev/null || true)"
            case "$name" in
                *.xctest|*PackageTests*) ;;
                *) continue ;;
            esac
            found=$(( found + 1 ))
            # At most two processes, a minute each, so the report fits in the step's margin.
            [ "$found" -le 2 ] || { echo "test-watchdog: more test processes; process $tpid not traced" >&2; continue; }
            echo "test-watchdog: threads of process $tpid ($name):" >&2
            if command -v gdb >/dev/null 2>&1; then
                trace="$(timeout 60 gdb -p "$tpid" -batch -nx -ex "set pagination off" -ex "thread apply all bt 40" 2>&1)"
                if grep -qE '^Thread' <<<"$trace"; then
                    grep -E '^(Thread|#)' <<<"$trace" >&2
                else
                    # No thread listed: say why (no ptrace permission, say).
                    tail -n 20 <<<"$trace" >&2
                fi
            elif command -v lldb >/dev/null 2>&1; then
                timeout 60 lldb -p "$tpid" --batch -o "thread backtrace all -c 40" 2>&1 | tail -n 400 >&2 || true
            else
                echo "  (neither gdb nor lldb is installed)" >&2
            fi
        done
        [ "$found" -gt 0 ] || echo "test-watchdog: no test process found in the session" >&2
        stop_session
        wait "$pid" 2>/dev/null
        exit 125
    fi
    sleep 2
done
wait "$pid"
