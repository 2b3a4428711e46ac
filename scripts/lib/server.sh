# Shared by the scripts that start `pushprov serve` in the background (sourced, not run).

# stop_server PID: asks the server to stop (SIGTERM), waits at most 20 s for its graceful
# shutdown, then kills it: a server stuck in its shutdown must not hang the script.
stop_server() {
    local pid="$1"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# show_server_log STATUS LOG LINES NAME: when the script is failing (STATUS non-zero), prints
# the end of the server's log, which is about to be removed with its data directory.
show_server_log() {
    if [ "$1" -ne 0 ] && [ -f "$2" ]; then
        echo "$4: the server's log (last $3 lines):" >&2
        tail -"$3" "$2" >&2
    fi
}
