#!/usr/bin/env bash
# Load benchmark of the TMP server through real HTTP on loopback.
#
#   scripts/bench-server.sh [duration-seconds] [--postgres | --database postgres://…]   (default 20 s, SQLite)
#
# Installs wrk from apt if missing, builds pushprov in release mode, starts `pushprov serve`
# on a free loopback port with a throwaway data directory, seeds 100,000 tokens, and runs
# wrk against tokens/searches (10 references) and signed-cards (Apple's real production
# chain; 16 connections, then 64). It measures the crypto-only signed-cards rate in the same run (`pushprov crypto
# throughput`, half the duration just before and half just after signed-cards, averaged) and
# prints requests/s, p50 and p99, the server's CPU time per request, and the machine's load.
# With saturation on (below), it also measures two floors at that many connections: GET /health
# and signed-cards for a card the caller does not have (a call without its cryptography).
# Everything stays on 127.0.0.1 and stops by itself.
#
# Storage: SQLite in the data directory by default. --postgres starts a throwaway PostgreSQL
# (scripts/postgres-dev.sh, with fsync on) and removes it afterwards; --database (or
# BENCH_DATABASE) uses an existing, empty PostgreSQL database instead (psql must be installed).
# BENCH_POOL_SIZE sets --database-pool-size (default 10).
# BENCH_CONNECTIONS=N   wrk connections (default 16)
# BENCH_SATURATION_CONNECTIONS=N
#                       signed-cards is also run with N connections (default 64; 0 skips it):
#                       at 16 each commit of attempts serves fewer calls, so a call costs the
#                       server more CPU; its capacity shows only with more requests in flight
# BENCH_ROUNDS=N        repeats the signed-cards runs N times (default 1), each between two
#                       crypto-only runs, and prints the median ratio: this machine drifts
#                       by up to a fifth within minutes, so one round is one sample
# BENCH_PERF=DIR        also record a `perf` profile of the server during each wrk run into DIR
#                       (searches.perf.data, signed-cards.perf.data; read with `perf report -i`)
# BENCH_BINARY=PATH     runs that pushprov binary instead of building one (compare two builds
#                       in alternating runs: copy each release build's pushprov aside first)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=20
DATABASE="${BENCH_DATABASE:-}"
THROWAWAY_POSTGRES=false
while [ $# -gt 0 ]; do
    case "$1" in
        --postgres) THROWAWAY_POSTGRES=true ;;
        --database) DATABASE="$2"; shift ;;
        [0-9]*) case "$1" in *[!0-9]*) echo "bench: the duration is a whole number of seconds (got $1)" >&2; exit 2 ;; esac; DURATION="$1" ;;
        *) echo "bench: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
CONNECTIONS="${BENCH_CONNECTIONS:-16}"
SATURATION="${BENCH_SATURATION_CONNECTIONS:-64}"
ROUNDS="${BENCH_ROUNDS:-1}"
case "$ROUNDS" in ''|*[!0-9]*|0) echo "bench: BENCH_ROUNDS must be a whole number of at least 1" >&2; exit 2 ;; esac
CERTS=Tests/ProvisioningCryptoTests/Resources/certs
# The server is configured by this script only: a PUSHPROV_DATABASE or API key in the caller's
# environment must not reach it.
for variable in $(compgen -e | grep '^PUSHPROV_' || true); do unset "$variable"; done

if ! command -v wrk >/dev/null 2>&1; then
    echo "bench: installing wrk from apt"
    if [ "$(id -u)" -eq 0 ]; then apt-get update -qq || echo "bench: apt-get update failed; trying the install anyway" >&2; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; else sudo apt-get update -qq || echo "bench: apt-get update failed; trying the install anyway" >&2; sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; fi
    command -v wrk >/dev/null 2>&1 || { echo "bench: wrk could not be installed" >&2; exit 1; }
fi
if [ -n "${BENCH_PERF:-}" ] && ! command -v perf >/dev/null 2>&1; then echo "bench: BENCH_PERF needs perf (apt install linux-perf)" >&2; exit 1; fi
python3 -c 'import sqlite3' || { echo "bench: python3 with sqlite3 is required" >&2; exit 1; }

if [ -n "${BENCH_BINARY:-}" ]; then
    [ -x "$BENCH_BINARY" ] || { echo "bench: BENCH_BINARY $BENCH_BINARY is not an executable file" >&2; exit 2; }
    BIN="$BENCH_BINARY"
    echo "bench: running $BIN (not built by this run)"
else
    echo "bench: building pushprov (release)"
    swift build -c release --product pushprov
    BIN="$(swift build -c release --show-bin-path)/pushprov"
fi

DATA="$(mktemp -d /tmp/pushprov-bench.XXXXXX)"
LOG="$DATA/serve.log"
PG_DIR=""
source scripts/lib/server.sh
cleanup() {
    local status=$?
    if [ -n "${SERVER_PID:-}" ]; then stop_server "$SERVER_PID"; fi
    show_server_log "$status" "$LOG" 30 bench
    if [ -n "$PG_DIR" ]; then PUSHPROV_PG_DIR="$PG_DIR" scripts/postgres-dev.sh clean || true; fi
    rm -rf "$DATA"
}
trap cleanup EXIT

if $THROWAWAY_POSTGRES; then
    PG_DIR="$(mktemp -d /tmp/pushprov-bench-postgres.XXXXXX)"
    PUSHPROV_PG_DIR="$PG_DIR" PUSHPROV_PG_PORT=54339 scripts/postgres-dev.sh start --durable >/dev/null
    DATABASE="$(PUSHPROV_PG_DIR="$PG_DIR" scripts/postgres-dev.sh url)"
fi
if [ -n "$DATABASE" ]; then
    command -v psql >/dev/null 2>&1 || { echo "bench: psql is required to seed PostgreSQL" >&2; exit 1; }
    # The URL (and any password in it) goes by the environment, not the command line, where
    # any user of this machine could read it (ps): PUSHPROV_DATABASE for pushprov; for psql,
    # PGPASSWORD and the URL without its password.
    export PUSHPROV_DATABASE="$DATABASE"
    # (A password in the URL's query, ?password=…, is moved to PGPASSWORD too.)
    PASSWORD_IN_URL="$(python3 -c '
import os, urllib.parse as u
parts = u.urlsplit(os.environ["PUSHPROV_DATABASE"])
query = dict(u.parse_qsl(parts.query))
password = parts.password if parts.password is not None else query.get("password")
print("" if password is None else "y" + u.unquote(password) if parts.password is not None else "y" + password)')"
    if [ -n "$PASSWORD_IN_URL" ]; then PGPASSWORD="${PASSWORD_IN_URL#y}"; export PGPASSWORD; fi
    PSQL_URL="$(python3 -c '
import os, urllib.parse as u
parts = u.urlsplit(os.environ["PUSHPROV_DATABASE"])
if parts.password is not None:
    credentials, host = parts.netloc.rsplit("@", 1)
    parts = parts._replace(netloc=credentials.split(":", 1)[0] + "@" + host)
query = [(key, value) for key, value in u.parse_qsl(parts.query, keep_blank_values=True) if key != "password"]
print(u.urlunsplit(parts._replace(query=u.urlencode(query))))')"
    "$BIN" migrate
    STORE=(--database-pool-size "${BENCH_POOL_SIZE:-10}")
else
    STORE=()
fi

"$BIN" serve --port 0 --data-dir "$DATA" "${STORE[@]}" >"$LOG" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do grep -q "listening on" "$LOG" && break; kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
PORT="$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$LOG")"
[ -n "$PORT" ] || { echo "bench: server did not start" >&2; exit 1; }
BASE="http://127.0.0.1:$PORT"
ISSUER_KEY="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["issuerApiKey"])' "$DATA/secrets.json")"
BENCH_JWT="$("$BIN" dev-token --user bench --data-dir "$DATA" --ttl 3600)"
export BENCH_JWT

grep "listening on" "$LOG"
echo "bench: seeding 10,000 cards and 100,000 tokens"
if [ -n "$DATABASE" ]; then
psql -q -v ON_ERROR_STOP=1 "$PSQL_URL" <<'SQL'
INSERT INTO card (external_card_id, user_id, encrypted_pan, pan_lookup_hash, pan_last4, pan_unique_reference, expiration, cardholder_name, network, product_title, art_id, status, created_at, updated_at) SELECT 'seed-' || i, 'user-' || (i % 5000), 'v1.seed.AAAA', 'seedhash-' || i, '0000', 'PURseed' || i, '12/30', 'Seed', 'VISA', 'Seed', NULL, 'ACTIVE', now(), now()
    FROM generate_series(0, 9999) AS i;
INSERT INTO token (token_unique_reference, external_card_id, pan_unique_reference, user_id, device_type, status, authorization_path, suspended_by, token_last4, created_at, updated_at) SELECT 'SEED' || lpad(i::text, 8, '0'), 'seed-' || (i / 10), 'PURseed' || (i / 10), 'user-' || ((i / 10) % 5000),
    CASE WHEN i % 2 = 1 THEN 'PHONE' ELSE 'WATCH' END, 'ACTIVE', 'GREEN', NULL, '1234', now(), now()
    FROM generate_series(0, 99989) AS i;
SQL
else
python3 - "$DATA/pushprov.sqlite" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=30)
now = "2026-01-01 00:00:00.000"
cards = [(f"seed-{i}", f"user-{i % 5000}", "v1.seed.AAAA", f"seedhash-{i}", "0000", f"PURseed{i}", "12/30", "Seed", "VISA", "Seed", None, "ACTIVE", now, now) for i in range(10_000)]
db.executemany("INSERT INTO card (external_card_id, user_id, encrypted_pan, pan_lookup_hash, pan_last4, pan_unique_reference, expiration, cardholder_name, network, product_title, art_id, status, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", cards)
tokens = [(f"SEED{i:08d}", f"seed-{i // 10}", f"PURseed{i // 10}", f"user-{(i // 10) % 5000}", "PHONE" if i % 2 else "WATCH", "ACTIVE", "GREEN", None, "1234", now, now) for i in range(99_990)]
db.executemany("INSERT INTO token (token_unique_reference, external_card_id, pan_unique_reference, user_id, device_type, status, authorization_path, suspended_by, token_last4, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)", tokens)
db.commit()
PY
fi

# The caller's own card and 10 tokens; searches ask for those 10 references.
PAN_BODY='{"userId":"bench","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"Bench User","network":"VISA","productTitle":"Bench"}'
curl -sf -X PUT "$BASE/lifecycle/cards/bench-card" -H "authorization: Bearer $ISSUER_KEY" -H 'content-type: application/json' -d "$PAN_BODY" >/dev/null
PUR="$(curl -sf "$BASE/lifecycle/cards/bench-card" -H "authorization: Bearer $ISSUER_KEY" | python3 -c 'import json,sys; print(json.load(sys.stdin)["panUniqueReference"])')"
if [ -n "$DATABASE" ]; then
psql -q -v ON_ERROR_STOP=1 -v pur="$PUR" "$PSQL_URL" <<'SQL'
INSERT INTO token (token_unique_reference, external_card_id, pan_unique_reference, user_id, device_type, status, authorization_path, suspended_by, token_last4, created_at, updated_at) SELECT 'BENCH' || lpad(i::text, 4, '0'), 'bench-card', :'pur', 'bench', 'PHONE', 'ACTIVE', 'GREEN', NULL, '1234', now(), now()
    FROM generate_series(0, 9) AS i;
ANALYZE card;
ANALYZE token;
SQL
psql -Atq "$PSQL_URL" -c "SELECT 'tokens in database: ' || count(*) FROM token"
else
python3 - "$DATA/pushprov.sqlite" "$PUR" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=30)
now = "2026-01-01 00:00:00.000"
db.executemany("INSERT INTO token (token_unique_reference, external_card_id, pan_unique_reference, user_id, device_type, status, authorization_path, suspended_by, token_last4, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)", [(f"BENCH{i:04d}", "bench-card", sys.argv[2], "bench", "PHONE", "ACTIVE", "GREEN", None, "1234", now, now) for i in range(10)])
db.commit()
print("tokens in database:", db.execute("SELECT count(*) FROM token").fetchone()[0])
PY
fi
export BENCH_SEARCH_BODY="$(python3 -c 'import json; print(json.dumps({"walletType":"APPLE_PAY","tokenUniqueReferences":[f"BENCH{i:04d}" for i in range(10)]}))')"
export BENCH_SIGNED_CARDS_BODY="$(python3 - "$CERTS" <<'PY'
import base64, json, ssl, sys
certs = [base64.b64encode(ssl.PEM_cert_to_DER_cert(open(f"{sys.argv[1]}/{name}").read())).decode() for name in ("apple-encipherment-leaf-prod-2020.pem", "apple-wwdr-ca-g2.pem")]
# "/" written as "\/", as the SDK's JSONEncoder sends base64.
print(json.dumps({"externalCardId": "bench-card", "walletType": "APPLE_PAY", "deviceType": "PHONE", "certificates": certs,
                  "nonce": base64.b64encode(b"bench-nonce-0123456789").decode(), "nonceSignature": base64.b64encode(b"bench-signature").decode()}).replace("/", "\\/"))
PY
)"
# The same body for a card the caller does not have (the floor runs below).
export BENCH_UNKNOWN_CARD_BODY="${BENCH_SIGNED_CARDS_BODY/\"bench-card\"/\"bench-no-such-card\"}"
# Sanity: both requests succeed before they are measured.
curl -sf "$BASE/issuer/push-provisioning/tokens/searches" -H "authorization: Bearer $BENCH_JWT" -H 'content-type: application/json' -d "$BENCH_SEARCH_BODY" | python3 -c 'import json,sys; n=len(json.load(sys.stdin)); assert n == 10, n; print("search sanity: 10 results")'
curl -sf "$BASE/issuer/push-provisioning/signed-cards" -H "authorization: Bearer $BENCH_JWT" -H 'content-type: application/json' -d "$BENCH_SIGNED_CARDS_BODY" | python3 -c 'import json,sys; r=json.load(sys.stdin); assert set(r) == {"activationData","encryptedData","ephemeralPublicKey"}; print("signed-cards sanity: sealed")'

answer="$(curl -s -w ' %{http_code}' "$BASE/issuer/push-provisioning/signed-cards" -H "authorization: Bearer $BENCH_JWT" -H 'content-type: application/json' -d "$BENCH_UNKNOWN_CARD_BODY")"
case "$answer" in *'"card_not_found"'*' 404') echo "unknown-card sanity: 404 card_not_found" ;; *) echo "bench: signed-cards for an unknown card answered $answer, not 404 card_not_found" >&2; exit 1 ;; esac
curl -sf "$BASE/health" >/dev/null || { echo "bench: GET /health did not answer 200" >&2; exit 1; }

profile() { # name: records the server while wrk runs, when BENCH_PERF is set
    [ -n "${BENCH_PERF:-}" ] || return 0
    mkdir -p "$BENCH_PERF"
    perf record -F 499 -g -p "$SERVER_PID" -o "$BENCH_PERF/$1.perf.data" -- sleep "$DURATION" >/dev/null 2>&1 &
    PERF_PID=$!
}
profiled() { [ -z "${PERF_PID:-}" ] || wait "$PERF_PID" || true; PERF_PID=; }
# CPU time (user + system, in clock ticks) the server has used so far.
server_ticks() { awk '{print $14 + $15}' "/proc/$SERVER_PID/stat"; }
# Children's CPU time so far (user + system, seconds): wrk's share of the machine.
# (`times` runs in this shell, not a subshell: a subshell has no children of its own.)
children_cpu() { times >"$DATA/times"; awk 'NR == 2 { gsub(/[ms]/, " "); print $1 * 60 + $2 + $3 * 60 + $4 }' "$DATA/times"; }
# load NAME LUA [CONNECTIONS]: runs wrk and prints requests/s, the server's CPU time per request
# and wrk's own CPU. NAME is a Push Provisioning API route, or a path from the root when it
# starts with "/"; LUA "-" sends plain GETs.
load() {
    local before after requests url script=()
    case "$1" in /*) url="$BASE$1" ;; *) url="$BASE/issuer/push-provisioning/$1" ;; esac
    [ "$2" = "-" ] || script=(-s "scripts/bench/$2.lua")
    before="$(server_ticks)"
    children_cpu >"$DATA/wrk-before"
    wrk -t2 -c"${3:-$CONNECTIONS}" -d"${DURATION}s" --latency "${script[@]}" "$url" >"$DATA/wrk.out"
    children_cpu >"$DATA/wrk-after"
    cat "$DATA/wrk.out"
    after="$(server_ticks)"
    requests="$(awk '/requests in/ {print $1}' "$DATA/wrk.out")"
    LAST_RATE="$(awk '/Requests\/sec/ {print $2}' "$DATA/wrk.out")"
    LAST_CPU_MS="$(awk -v t="$((after - before))" -v hz="$(getconf CLK_TCK)" -v n="$requests" 'BEGIN { printf "%.3f", t * 1000 / hz / n }')"
    awk -v t="$((after - before))" -v hz="$(getconf CLK_TCK)" -v n="$requests" -v w="$(cat "$DATA/wrk-after")" -v w0="$(cat "$DATA/wrk-before")" -v d="$DURATION" \
        'BEGIN { printf "server CPU: %.3f ms per request (%.1f s of CPU for %d requests); wrk used %.2f cores\n", t * 1000 / hz / n, t / hz, n, (w - w0) / d }'
}
echo; echo "== machine before the run: $(uptime)"
echo; echo "== tokens/searches (10 references, $CONNECTIONS connections, ${DURATION}s) =="
profile searches
load tokens/searches search
profiled
echo "== machine: $(uptime)"
# What a call costs the server without the cryptography, for scale beside the crypto-only
# cost per operation: a bare request, and signed-cards stopping at the card read.
if [ "$SATURATION" -gt 0 ]; then
    echo; echo "== floor: GET /health (HTTP and a database ping; $SATURATION connections, ${DURATION}s) =="
    load /health - "$SATURATION"
    FLOOR_HEALTH_CPU="$LAST_CPU_MS"
    echo; echo "== floor: signed-cards for an unknown card (no cryptography, no write; $SATURATION connections, ${DURATION}s) =="
    load signed-cards signed-cards-unknown-card "$SATURATION"
    FLOOR_UNKNOWN_CPU="$LAST_CPU_MS"
    echo "== machine: $(uptime)"
fi
# The crypto-only baseline is measured right before and right after each signed-cards round
# (half the duration each, the server idle or stopped), and each round is compared with the
# mean of the two around it, so the machine's drift during the run weighs on both sides of the
# comparison alike. BENCH_ROUNDS=N repeats the round N times (each crypto-only run then lies
# between two rounds) and also prints the median of the rounds' ratios.
crypto_only() { # label
    "$BIN" crypto throughput --seconds "$(awk -v d="$DURATION" 'BEGIN { print d / 2 }')" "$CERTS/apple-encipherment-leaf-prod-2020.pem" "$CERTS/apple-wwdr-ca-g2.pem" | tee "$DATA/crypto-$1.out"
}
crypto_rate() { sed -n 's/^crypto-only signed-cards: \([0-9]*\) ops\/s.*/\1/p' "$DATA/crypto-$1.out"; }
crypto_cpu() { sed -n 's/.*CPU: \([0-9.]*\) ms per op.*/\1/p' "$DATA/crypto-$1.out"; }
# Every signed-cards answer waits for its attempt's commit to reach the disk, so its tail
# latency follows the disk's: how long a sync takes here, measured alone (server idle).
echo; echo "== disk: 4 KiB written and synced (fdatasync) in a loop for 5 s, in the data directory (server idle) =="
python3 - "$DATA" <<'PY'
import os, sys, time
path = os.path.join(sys.argv[1], "sync-probe")
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
block, took, end, i = b"\0" * 4096, [], time.monotonic() + 5, 0
while time.monotonic() < end:
    os.pwrite(fd, block, (i % 256) * 4096)
    i += 1
    start = time.perf_counter()
    os.fdatasync(fd)
    took.append(time.perf_counter() - start)
os.close(fd)
os.unlink(path)
took.sort()
at = lambda q: 1000 * took[min(len(took) - 1, int(q * len(took)))]
print("disk sync: %d syncs, p50 %.2f ms, p99 %.2f ms, max %.1f ms; %d over 20 ms" % (len(took), at(0.5), at(0.99), 1000 * took[-1], sum(t > 0.02 for t in took)))
PY
echo; echo "== crypto-only baseline, before signed-cards (server idle) =="
crypto_only 0
SIGNED_RATES=(); SIGNED_CPUS=(); SATURATED_RATES=(); SATURATED_CPUS=()
for round in $(seq 1 "$ROUNDS"); do
    [ "$ROUNDS" -eq 1 ] || { echo; echo "== round $round of $ROUNDS"; }
    echo; echo "== signed-cards ($CONNECTIONS connections, ${DURATION}s) =="
    profile signed-cards
    load signed-cards signed-cards
    SIGNED_RATES+=("$LAST_RATE"); SIGNED_CPUS+=("$LAST_CPU_MS")
    profiled
    if [ "$SATURATION" -gt 0 ]; then
        echo "== machine: $(uptime)"
        echo; echo "== signed-cards ($SATURATION connections, ${DURATION}s) =="
        profile signed-cards-saturated
        load signed-cards signed-cards "$SATURATION"
        SATURATED_RATES+=("$LAST_RATE"); SATURATED_CPUS+=("$LAST_CPU_MS")
        profiled
    fi
    echo "== machine: $(uptime)"
    if [ "$round" -eq "$ROUNDS" ]; then
        stop_server "$SERVER_PID"; SERVER_PID=
        echo; echo "== crypto-only baseline, after signed-cards (server stopped) =="
    else
        echo; echo "== crypto-only baseline, between rounds (server idle) =="
    fi
    crypto_only "$round"
done
echo
compare() { # connections rate cpu-ms crypto-rate crypto-cpu-ms: prints the comparison, and the ratio in % on the last line
    awk -v n="$1" -v r="$2" -v s="$3" -v c="$4" -v k="$5" 'BEGIN {
        printf "== signed-cards (%d connections) vs crypto-only: %.0f req/s / %.0f ops/s = %.0f %% of the rate (target: 50 %%)\n", n, r, c, 100 * r / c
        printf "   CPU per call: crypto %.3f ms of the server'"'"'s %.3f ms = %.0f %%\n", k, s, 100 * k / s }'
}
ratio() { awk -v r="$1" -v c="$2" 'BEGIN { printf "%.1f", 100 * r / c }'; }
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
SIGNED_RATIOS=(); SATURATED_RATIOS=()
for round in $(seq 1 "$ROUNDS"); do
    i=$((round - 1))
    CRYPTO_RATE="$(printf '%s\n%s\n' "$(crypto_rate "$i")" "$(crypto_rate "$round")" | awk '{ sum += $1 } END { printf "%.0f", sum / NR }')"
    CRYPTO_CPU_MS="$(printf '%s\n%s\n' "$(crypto_cpu "$i")" "$(crypto_cpu "$round")" | awk '{ sum += $1 } END { printf "%.3f", sum / NR }')"
    [ "$ROUNDS" -eq 1 ] || echo "== round $round"
    echo "== crypto-only baseline (mean of before and after): $CRYPTO_RATE ops/s, $CRYPTO_CPU_MS ms CPU per op"
    compare "$CONNECTIONS" "${SIGNED_RATES[$i]}" "${SIGNED_CPUS[$i]}" "$CRYPTO_RATE" "$CRYPTO_CPU_MS"
    SIGNED_RATIOS+=("$(ratio "${SIGNED_RATES[$i]}" "$CRYPTO_RATE")")
    if [ "$SATURATION" -gt 0 ]; then
        compare "$SATURATION" "${SATURATED_RATES[$i]}" "${SATURATED_CPUS[$i]}" "$CRYPTO_RATE" "$CRYPTO_CPU_MS"
        SATURATED_RATIOS+=("$(ratio "${SATURATED_RATES[$i]}" "$CRYPTO_RATE")")
    fi
done
if [ "$SATURATION" -gt 0 ]; then
    echo "== server CPU per call without the cryptography ($SATURATION connections): GET /health $FLOOR_HEALTH_CPU ms, signed-cards for an unknown card $FLOOR_UNKNOWN_CPU ms"
fi
if [ "$ROUNDS" -gt 1 ]; then
    echo
    echo "== signed-cards vs crypto-only over $ROUNDS rounds ($CONNECTIONS connections): ${SIGNED_RATIOS[*]} %; median $(median "${SIGNED_RATIOS[@]}") % (target: 50 %)"
    if [ "$SATURATION" -gt 0 ]; then
        echo "== signed-cards vs crypto-only over $ROUNDS rounds ($SATURATION connections): ${SATURATED_RATIOS[*]} %; median $(median "${SATURATED_RATIOS[@]}") % (target: 50 %)"
    fi
fi
