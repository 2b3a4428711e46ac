#!/usr/bin/env bash
# A throwaway PostgreSQL server for development, tests and CI — loopback only.
#
#   scripts/postgres-dev.sh start [--durable]   install if missing, create and start; prints the URL
#   scripts/postgres-dev.sh url                 the URL of the running server
#   scripts/postgres-dev.sh status              running or not
#   scripts/postgres-dev.sh stop                stop the server (keeps the data directory)
#   scripts/postgres-dev.sh clean               stop the server and delete its data directory
#
# Environment:
#   PUSHPROV_PG_DIR   where the cluster lives (default /tmp/pushprov-postgres)
#   PUSHPROV_PG_PORT  port on 127.0.0.1 (default 54329; the next free one when taken)
#
# Installs PostgreSQL from apt when no server binaries are found (running `apt-get update`
# when the package lists are stale), without creating Debian's default cluster. The cluster
# gets a user "pushprov" (password "pushprov", allowed to create databases, which the CLI
# tests do) owning a database "pushprov"; it listens on 127.0.0.1 only and keeps its socket
# inside its own directory. It runs without fsync (a throwaway for tests) unless started with
# --durable. As root, the server runs as the "postgres" system user, because PostgreSQL
# refuses to run as root. It also offers TLS, with a certificate for "localhost" issued by a
# CA made for the cluster (openssl, installed from apt when missing), so the tests can connect
# with every sslmode: the printed URL says sslmode=disable, and PUSHPROV_TEST_POSTGRES_CA is
# the CA's certificate (for sslrootcert).
#
#   eval "$(scripts/postgres-dev.sh start)"     # exports PUSHPROV_TEST_POSTGRES_URL and _CA
#   swift test
#   scripts/postgres-dev.sh clean
set -euo pipefail

DIR="${PUSHPROV_PG_DIR:-/tmp/pushprov-postgres}"
DATA="$DIR/data"
SOCKET="$DIR/socket"
# The directory goes into pg_ctl's option string, which a shell reads.
case "$DIR" in
    *"'"*|*'"'*|*'\'*|*'$'*|*'`'*|*$'\n'*) echo "postgres-dev: PUSHPROV_PG_DIR must not hold quotes, backslashes, \$, \` or line breaks: $DIR" >&2; exit 2 ;;
esac
USER_NAME=pushprov
PASSWORD=pushprov
DATABASE=pushprov

say() { echo "postgres-dev: $*" >&2; }

find_bindir() {
    local dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then echo "$dir"; return 0; fi
    done
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v initdb)"; return 0
    fi
    return 1
}

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

install_postgres() {
    say "installing PostgreSQL from apt"
    # Debian would create and start a cluster on port 5432; ours is all we want.
    if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
        as_root mkdir -p /etc/postgresql-common
        echo "create_main_cluster = false" | as_root tee /etc/postgresql-common/createcluster.conf >/dev/null
    fi
    export DEBIAN_FRONTEND=noninteractive
    if ! as_root apt-get install -y -qq postgresql >/dev/null; then
        say "apt-get install failed; updating the package lists and retrying"
        as_root apt-get update -qq || { say "apt-get update failed (is a Debian mirror reachable?)"; return 1; }
        as_root apt-get install -y -qq postgresql >/dev/null || { say "apt-get install postgresql failed"; return 1; }
    fi
}

# Runs a command as the user that owns the cluster.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

current_port() { cat "$DIR/port" 2>/dev/null; }

TLS="$DIR/tls"

# The cluster's CA and the server's certificate (for the name localhost only: a client that
# checks host names must connect to "localhost", one that checks the chain alone may use
# 127.0.0.1), made once per directory.
make_tls() {
    [ -f "$TLS/server.crt" ] && [ -f "$TLS/server.key" ] && [ -f "$TLS/ca.crt" ] && return 0
    if ! command -v openssl >/dev/null 2>&1; then
        say "installing openssl from apt"
        DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq openssl >/dev/null \
            || { as_root apt-get update -qq && DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq openssl >/dev/null; } \
            || { say "apt-get install openssl failed"; return 1; }
    fi
    local work
    work="$(mktemp -d)"
    (
        set -e
        cd "$work"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.crt \
            -subj "/CN=pushprov postgres-dev CA" -days 3650 \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr \
            -subj "/CN=localhost" 2>/dev/null
        printf 'subjectAltName=DNS:localhost\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' > server.ext
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 3650 -extfile server.ext 2>/dev/null
        chmod 600 server.key ca.key
    ) || { rm -rf "$work"; say "could not make the TLS certificates"; return 1; }
    mkdir -p "$TLS"
    cp "$work/ca.crt" "$work/server.crt" "$work/server.key" "$TLS/"
    rm -rf "$work"
    chmod 600 "$TLS/server.key"
    chmod 644 "$TLS/ca.crt" "$TLS/server.crt"
    if [ "$(id -u)" -eq 0 ]; then chown -R postgres:postgres "$TLS"; fi
}

url() { echo "postgres://$USER_NAME:$PASSWORD@127.0.0.1:$(current_port)/$DATABASE?sslmode=disable"; }

is_running() {
    local bindir
    bindir="$(find_bindir)" || return 1
    [ -f "$DATA/PG_VERSION" ] && as_owner "$bindir/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

start() {
    local durable=false
    [ "${1:-}" = "--durable" ] && durable=true
    local bindir
    bindir="$(find_bindir)" || { install_postgres || exit 1; bindir="$(find_bindir)"; } || { say "no PostgreSQL server binaries after installing"; exit 1; }
    if is_running; then
        say "already running"
        echo "export PUSHPROV_TEST_POSTGRES_URL='$(url)'"
        [ -f "$TLS/ca.crt" ] && echo "export PUSHPROV_TEST_POSTGRES_CA='$TLS/ca.crt'"
        return 0
    fi
    mkdir -p "$DIR"
    if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$DIR"; fi
    chmod 700 "$DIR"
    if [ ! -f "$DATA/PG_VERSION" ]; then
        as_owner mkdir -p "$SOCKET"
        local pwfile="$DIR/pwfile"
        as_owner sh -c 'umask 077; printf "%s\n" "$1" > "$2"' sh "$PASSWORD" "$pwfile"
        as_owner "$bindir/initdb" -D "$DATA" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
            --pwfile="$pwfile" --encoding=UTF8 --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1 \
            || { cat "$DIR/initdb.log" >&2; exit 1; }
        rm -f "$pwfile"
    fi
    make_tls || exit 1
    local port="${PUSHPROV_PG_PORT:-54329}" attempt options
    # A port found free may be taken before PostgreSQL binds it (another start at the same
    # moment): then the next free one is tried, a few times.
    for attempt in 1 2 3 4 5; do
        while port_in_use "$port"; do port=$((port + 1)); done
        echo "$port" > "$DIR/port"
        options="-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories='$SOCKET' -c max_connections=300"
        options="$options -c ssl=on -c ssl_cert_file='$TLS/server.crt' -c ssl_key_file='$TLS/server.key'"
        if ! $durable; then options="$options -c fsync=off -c synchronous_commit=off -c full_page_writes=off"; fi
        rm -f "$DIR/server.log"
        if as_owner "$bindir/pg_ctl" -D "$DATA" -l "$DIR/server.log" -o "$options" -w -t 60 start >/dev/null; then break; fi
        if [ "$attempt" -lt 5 ] && grep -q "could not bind\|could not create any TCP/IP sockets" "$DIR/server.log"; then
            say "port $port was taken meanwhile; trying the next one"
            port=$((port + 1))
            continue
        fi
        cat "$DIR/server.log" >&2
        exit 1
    done
    # The user and database, once per data directory.
    if [ ! -f "$DIR/provisioned" ]; then
        as_owner "$bindir/psql" -q -h "$SOCKET" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
            -c "CREATE ROLE $USER_NAME LOGIN CREATEDB PASSWORD '$PASSWORD'" \
            -c "CREATE DATABASE $DATABASE OWNER $USER_NAME" >/dev/null
        touch "$DIR/provisioned"
    fi
    say "running on 127.0.0.1:$port (data in $DATA$($durable || echo ', fsync off'))"
    echo "export PUSHPROV_TEST_POSTGRES_URL='$(url)'"
    echo "export PUSHPROV_TEST_POSTGRES_CA='$TLS/ca.crt'"
}

stop() {
    local bindir
    if is_running; then
        bindir="$(find_bindir)"
        as_owner "$bindir/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
        say "stopped"
    fi
}

case "${1:-}" in
    start) shift; start "$@" ;;
    url) is_running || { say "not running; run: $0 start"; exit 1; }; url ;;
    status) if is_running; then say "running on 127.0.0.1:$(current_port)"; else say "not running"; exit 1; fi ;;
    stop) stop ;;
    clean) stop; rm -rf "$DIR"; say "removed $DIR" ;;
    *) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
