#!/usr/bin/env bash
# Runs a test command (default: swift test) with a time limit, and when the limit is reached
# says what was hanging before stopping it: the tests that started and never finished, and the
# backtrace of every thread of the test process (gdb, else lldb). Output is line-buffered, so
# the log shows every line the tests printed up to the hang.
#
#   scripts/test-watchdog.sh MINUTES [command …]
#
# Exits with the command's status, or 124 when the limit was reached.
set -uo pipefail

if [ $# -lt 1 ] || ! [[ "$1" =~ ^[0-9]+$ ]] || [ "$1" -eq 0 ]; then
    echo "usage: scripts/test-watchdog.sh MINUTES [command …]  (MINUTES a whole number above 0)" >&2
    exit 2
fi
minutes="$1"
shift
[ $# -gt 0 ] || set -- swift test

log="$(mktemp "${TMPDIR:-/tmp}/test-watchdog.XXXXXX")"
trap 'rm -f "$log"' EXIT

# stdbuf makes stdio line-buffered in the command and its children (LD_PRELOAD is inherited),
# so nothing the tests printed is lost in a buffer when the process is stopped.
buffering=()
command -v stdbuf >/dev/null 2>&1 && buffering=(stdbuf -oL -eL)

# setsid: the command and everything it starts form one process group, stopped together.
setsid "${buffering[@]}" "$@" > >(tee -a "$log") 2> >(tee -a "$log" >&2) &
pid=$!

deadline=$(( $(date +%s) + minutes * 60 ))
while kill -0 "$pid" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "test-watchdog: '$*' did not finish within $minutes minutes" >&2
        echo "test-watchdog: tests started and not finished:" >&2
        # Swift Testing prints "◇ Test name() started." and "✔/✘ Test name() passed/failed…";
        # XCTest prints "Test Case '…' started." and "… passed/failed".
        awk '
            { gsub(/\033\[[0-9;]*m/, "") }
            /◇ Test .* started\./ { s = $0; sub(/^.*◇ Test /, "", s); sub(/ started\.$/, "", s); open[s] = 1; next }
            /[✔✘] Test / { s = $0; sub(/^.*[✔✘] Test /, "", s); sub(/ (passed|failed).*$/, "", s); sub(/ with [0-9]+ test cases?$/, "", s); delete open[s]; next }
            /Test Case .* started\./ { s = $0; sub(/^.*Test Case /, "", s); sub(/ started\.$/, "", s); open[s] = 1; next }
            /Test Case .* (passed|failed)/ { s = $0; sub(/^.*Test Case /, "", s); sub(/ (passed|failed).*$/, "", s); delete open[s]; next }
            END { n = 0; for (s in open) { print "  " s; n++ } if (n == 0) print "  (none seen)" }
        ' "$log" >&2
        for tpid in $(pgrep -g "$pid" 2>/dev/null); do
            name="$(readlink "/proc/$tpid/exe" 2>/dev/null || true)"
            case "$name" in
                *.xctest|*PackageTests*) ;;
                *) continue ;;
            esac
            echo "test-watchdog: threads of process $tpid ($name):" >&2
            if command -v gdb >/dev/null 2>&1; then
                timeout 120 gdb -p "$tpid" -batch -nx -ex "set pagination off" -ex "thread apply all bt 40" 2>&1 \
                    | grep -E '^(Thread|#)' >&2 || true
            elif command -v lldb >/dev/null 2>&1; then
                timeout 120 lldb -p "$tpid" --batch -o "thread backtrace all -c 40" 2>&1 >&2 || true
            else
                echo "  (neither gdb nor lldb is installed)" >&2
            fi
        done
        kill -TERM -- "-$pid" 2>/dev/null || true
        sleep 10
        kill -KILL -- "-$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null
        exit 124
    fi
    sleep 2
done
wait "$pid"
