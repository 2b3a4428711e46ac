#!/usr/bin/env bash
# Checks the TMP server against its own OpenAPI document (openapi.yaml) with Schemathesis:
# property-based requests, valid and invalid, generated from the document for every route;
# every response must be one the document lists (status, content type, headers, body schema),
# no request may cause a 5xx, invalid requests must be refused, authentication must be
# enforced, and wrong methods must answer 405 with an Allow header.
#
#   scripts/api-conformance.sh [--examples N] [--seed N]   (defaults: 60 examples per operation, seed 20261122)
#
# Installs Schemathesis (pinned) into .build/api-conformance-venv from PyPI, builds pushprov
# (debug), starts `pushprov serve` on a free loopback port with a throwaway data directory,
# seeds the records the document's examples name (card card-001 of user-42 with art
# art-debit-blue, token DAPLMC…0001 on it), and runs Schemathesis with
# scripts/api-conformance/schemathesis.toml. A fixed seed makes a run repeatable; pass another
# seed, or more examples, to look further. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
EXAMPLES=60
SEED=20261122
while [ $# -gt 0 ]; do
    case "$1" in
        --examples) EXAMPLES="$2"; shift ;;
        --seed) SEED="$2"; shift ;;
        *) echo "api-conformance: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
case "$EXAMPLES$SEED" in *[!0-9]*|'') echo "api-conformance: --examples and --seed take whole numbers" >&2; exit 2 ;; esac
SCHEMATHESIS_VERSION=4.32.5

# The server is configured by the command line and its own data directory only: a
# PUSHPROV_DATABASE or API key in the caller's environment must not reach it.
for variable in $(compgen -e | grep '^PUSHPROV_' || true); do unset "$variable"; done

command -v python3 >/dev/null 2>&1 || { echo "api-conformance: python3 is required (apt install python3 python3-venv)" >&2; exit 1; }
VENV=.build/api-conformance-venv
# Schemathesis and its dependencies at the versions pinned in requirements.txt (all of them:
# a dependency released tomorrow must not change what CI runs); installed again when that
# file changes (a copy in the environment records what it holds).
REQUIREMENTS=scripts/api-conformance/requirements.txt
grep -qx "schemathesis==$SCHEMATHESIS_VERSION" "$REQUIREMENTS" || { echo "api-conformance: $REQUIREMENTS does not pin schemathesis==$SCHEMATHESIS_VERSION" >&2; exit 1; }
if [ ! -x "$VENV/bin/schemathesis" ] || ! cmp -s "$REQUIREMENTS" "$VENV/requirements.txt" \
    || [ "$("$VENV/bin/schemathesis" --version 2>/dev/null)" != "schemathesis, version $SCHEMATHESIS_VERSION" ]; then
    echo "api-conformance: installing schemathesis $SCHEMATHESIS_VERSION and its pinned dependencies into $VENV"
    rm -rf "$VENV"
    python3 -m venv "$VENV" || { echo "api-conformance: python3 cannot make a virtual environment (apt install python3-venv)" >&2; exit 1; }
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQUIREMENTS"
    cp "$REQUIREMENTS" "$VENV/requirements.txt"
fi

echo "api-conformance: building pushprov (debug)"
swift build --product pushprov
BIN="$(swift build --show-bin-path)/pushprov"

DATA="$(mktemp -d /tmp/pushprov-conformance.XXXXXX)"
LOG="$DATA/serve.log"
source scripts/lib/server.sh
cleanup() {
    local status=$?
    if [ -n "${SERVER_PID:-}" ]; then stop_server "$SERVER_PID"; fi
    show_server_log "$status" "$LOG" 50 api-conformance
    rm -rf "$DATA"
}
trap cleanup EXIT
# Requests of the set-up: a failure prints its answer, and a server that stops answering
# fails the script instead of hanging it.
seed_curl() { curl -sS --fail-with-body --max-time 30 "$@"; }

# LOG_LEVEL from the caller's environment would hide the error lines checked below.
LOG_LEVEL=info "$BIN" serve --port 0 --data-dir "$DATA" >"$LOG" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 300); do
    grep -q "listening on" "$LOG" && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
done
PORT="$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$LOG")"
[ -n "$PORT" ] || { echo "api-conformance: server did not start" >&2; cat "$LOG" >&2; exit 1; }
BASE="http://127.0.0.1:$PORT"
grep "listening on" "$LOG"
secret() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$DATA/secrets.json" "$1"; }
# Assigned, then checked, then exported: `export X="$(…)"` would go on with an empty value
# if the command failed, and an empty credential only tests the 401 path.
CONFORMANCE_ISSUER_KEY="$(secret issuerApiKey)"
CONFORMANCE_TSP_KEY="$(secret tspApiKey)"
CONFORMANCE_JWT="$("$BIN" dev-token --user user-42 --data-dir "$DATA" --ttl 3600)"
for name in CONFORMANCE_ISSUER_KEY CONFORMANCE_TSP_KEY CONFORMANCE_JWT; do
    [ -n "${!name}" ] || { echo "api-conformance: $name is empty" >&2; exit 1; }
done
export CONFORMANCE_ISSUER_KEY CONFORMANCE_TSP_KEY CONFORMANCE_JWT

echo "api-conformance: seeding card-001 (user-42), art-debit-blue and token DAPLMC0000000000000000000000000001"
python3 scripts/api-conformance/card-art.py "$DATA/art.png"
seed_curl -X PUT "$BASE/lifecycle/card-art/art-debit-blue" -H "authorization: Bearer $CONFORMANCE_ISSUER_KEY" -H 'content-type: image/png' --data-binary "@$DATA/art.png" >/dev/null
PUR="$(seed_curl -X PUT "$BASE/lifecycle/cards/card-001" -H "authorization: Bearer $CONFORMANCE_ISSUER_KEY" -H 'content-type: application/json' \
    -d '{"userId":"user-42","primaryAccountNumber":"4111111111111111","expiration":"12/29","cardholderName":"JANE APPLESEED","network":"VISA","productTitle":"Everyday Debit","artId":"art-debit-blue"}' \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["panUniqueReference"])')"
seed_curl -X POST "$BASE/tsp/token-events" -H "authorization: Bearer $CONFORMANCE_TSP_KEY" -H 'content-type: application/json' \
    -d "{\"eventId\":\"seed-1\",\"tokenUniqueReference\":\"DAPLMC0000000000000000000000000001\",\"panUniqueReference\":\"$PUR\",\"event\":\"CREATED\",\"walletType\":\"APPLE_PAY\",\"deviceType\":\"PHONE\",\"tokenLast4\":\"4321\"}" >/dev/null

# The seeded card's PAN reference is a keyed hash, new with every data directory: token events
# name it through a dictionary added to a copy of the settings.
cp scripts/api-conformance/schemathesis.toml "$DATA/schemathesis.toml"
printf '\n[dictionaries.seeded-card]\nvalues = ["%s"]\n\n[parameters]\n"body.panUniqueReference" = { dictionary = "seeded-card", probability = 0.8 }\n' "$PUR" >>"$DATA/schemathesis.toml"

echo "api-conformance: schemathesis, $EXAMPLES examples per operation, seed $SEED"
# One worker: with two threads, CPython 3.11's AST validation (Hypothesis parses lambdas to
# describe them) can fail with "AST constructor recursion depth mismatch", its recursion
# count being shared between threads — a tool error, not the server's, that failed a CI run.
# Hypothesis keeps its example database in the working directory unless told otherwise.
export HYPOTHESIS_STORAGE_DIRECTORY="$DATA/hypothesis"
set +e
"$VENV/bin/schemathesis" --config-file "$DATA/schemathesis.toml" run Sources/TokenPlatform/Resources/openapi.yaml \
    --url "$BASE" --max-examples "$EXAMPLES" --seed "$SEED" --generation-database none \
    --workers 1 --no-color --request-timeout 10
STATUS=$?
set -e
# The server logs an unexpected failure at level error or critical (a refusal is not one).
# Without a connector, every command for the token service goes unconfirmed, and a token left
# at odds with its card is logged as an error (by the request, and by each realignment round):
# that is the missing connector, not a fault.
FAILURES="$(grep -E '^[^ ]+ (error|critical) ' "$LOG" | grep -v -e 'error="no token service connector is configured"' -e 'the token service did not confirm the commands sent again' || true)"
if [ -n "$FAILURES" ]; then
    echo "api-conformance: the server logged a failure during the run:" >&2
    echo "$FAILURES" | head -20 >&2
    STATUS=1
fi
exit "$STATUS"
