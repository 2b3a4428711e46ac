#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer) of the parsers that read what callers send.
#
#   scripts/fuzz.sh [--seconds N | --runs N] [--seed N] [target ...]
#
# Targets (Fuzz/*.swift; default: all):
#   flat-json  the request-body fast path (signed-cards, tokens/searches) must decline or agree
#              exactly with JSONDecoder, and its base64 decoder with Foundation's
#   card-art   Apple's card-art rules (PNG and PDF readers) on hostile files: no trap, accepted
#              art described as Apple requires (a 1536×969 PNG ending in an empty IEND; a PDF
#              page landscape at 1536:969 within the tolerance, 3 to 14,400 points a side), a
#              declared type never overriding the content; an input taking over 2 s or 512 MB
#              fails, so work more than linear in the input (a page-tree bomb) is caught
#   text       event times, expirations, card numbers and identifiers parse without trapping and
#              read back what they write; card-number redaction leaves no card number behind
#
# Each target is compiled with the ProvisioningModels sources into one module, with libFuzzer and
# AddressSanitizer (swiftc -sanitize=fuzzer,address), into .build/fuzz/. It starts from the
# inputs Fuzz/seeds.py writes and keeps what it finds in .build/fuzz/corpus/<target>, so later
# runs go on from there. --seconds (default 60, at least 1) bounds each target's run by time;
# --runs by count, which with --seed (default 1) makes a run repeatable (the targets run with
# SWIFT_DETERMINISTIC_HASHING=1, so Swift's hashing, and with it the coverage libFuzzer follows,
# is the same in every process). A failing input is written to .build/fuzz/artifacts/, printed
# as base64 when it is at most 64 KiB (a CI log keeps it after the clone is gone), and the
# script exits non-zero; replay it with `.build/fuzz/<target> <file>`.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=60
RUNS=""
SEED=1
TARGETS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) SECONDS_PER_TARGET="$2"; shift ;;
        --runs) RUNS="$2"; shift ;;
        --seed) SEED="$2"; shift ;;
        flat-json|card-art|text) TARGETS+=("$1") ;;
        *) echo "fuzz: unknown argument $1 (targets: flat-json, card-art, text)" >&2; exit 2 ;;
    esac
    shift
done
case "$SECONDS_PER_TARGET$RUNS$SEED" in *[!0-9]*|'') echo "fuzz: --seconds, --runs and --seed take whole numbers" >&2; exit 2 ;; esac
# libFuzzer takes -max_total_time=0 as no limit at all: a run would never end.
case "$SECONDS_PER_TARGET" in *[!0]*) ;; *) echo "fuzz: --seconds must be at least 1 (got $SECONDS_PER_TARGET)" >&2; exit 2 ;; esac
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(flat-json card-art text)

OUT=.build/fuzz
mkdir -p "$OUT/artifacts"
rm -rf "$OUT/seeds"
python3 Fuzz/seeds.py "$OUT/seeds"
mapfile -t MODULE_SOURCES < <(find Sources/ProvisioningModels -name '*.swift' | sort)

status=0
for target in "${TARGETS[@]}"; do
    case "$target" in
        flat-json) harness=Fuzz/FlatJSONTarget.swift; bounds=() ;;
        card-art) harness=Fuzz/CardArtTarget.swift; bounds=(-timeout=2 -rss_limit_mb=512) ;;
        text) harness=Fuzz/TextTarget.swift; bounds=() ;;
    esac
    echo "fuzz: building $target"
    # ld.gold warns about sanitizer symbols it cannot export; the log is shown only on failure.
    if ! swiftc -O -g -sanitize=fuzzer,address -parse-as-library -module-name ProvisioningModels -package-name pushprovisioning \
        "${MODULE_SOURCES[@]}" "$harness" -o "$OUT/$target" >"$OUT/$target.build.log" 2>&1; then
        cat "$OUT/$target.build.log" >&2
        exit 1
    fi
    mkdir -p "$OUT/corpus/$target"
    limit=(-max_total_time="$SECONDS_PER_TARGET")
    [ -z "$RUNS" ] || limit=(-runs="$RUNS")
    dictionary=()
    [ ! -f "Fuzz/$target.dict" ] || dictionary=(-dict="Fuzz/$target.dict")
    if [ -n "$RUNS" ]; then bound="$RUNS runs"; else bound="$SECONDS_PER_TARGET s"; fi
    echo "fuzz: running $target ($bound, seed $SEED)"
    # Leak detection is off: LeakSanitizer cannot follow Swift references stored with tag bits
    # (in `Data` held by the certificate memo, which keeps at most eight entries), and reports
    # them as lost. Memory that really grows still fails the run (-rss_limit_mb, 2 GB, and
    # 512 MB for card-art, whose validator must stay linear in its input: "bounds" above).
    # AddressSanitizer's quarantine of freed memory is kept at 64 MB (256 by default), so the
    # limit measures the target rather than the sanitizer: long runs of card-art had come
    # within a few tens of MB of 512 with nothing wrong.
    # Swift seeds its hashing at random in each process, which changes the order of sets and
    # dictionaries, hence the coverage libFuzzer sees: with it fixed, a seed repeats a run.
    if SWIFT_DETERMINISTIC_HASHING=1 ASAN_OPTIONS="detect_leaks=0:quarantine_size_mb=64${ASAN_OPTIONS:+:$ASAN_OPTIONS}" "$OUT/$target" "${limit[@]}" "${bounds[@]}" -seed="$SEED" -max_len=65536 -print_final_stats=1 -detect_leaks=0 \
        -artifact_prefix="$OUT/artifacts/$target-" "${dictionary[@]}" "$OUT/corpus/$target" "$OUT/seeds/$target" >"$OUT/$target.log" 2>&1; then
        grep -E "^stat::number_of_executed_units|^stat::new_units_added|^stat::peak_rss_mb" "$OUT/$target.log" | sed "s/^/fuzz: $target: /" || true
        echo "fuzz: $target: corpus of $(ls "$OUT/corpus/$target" | wc -l) inputs, no failure"
    else
        echo "fuzz: $target FAILED (log: $OUT/$target.log)" >&2
        if grep -q "Test unit written" "$OUT/$target.log"; then
            echo "fuzz: the failing input is in $OUT/artifacts/; replay: $OUT/$target <file>" >&2
            grep -E "Fatal error|ERROR:|SUMMARY|Test unit written" "$OUT/$target.log" | head -10 >&2 || true
            # The artifacts go with the clone; the log stays. Rebuild one with
            # `base64 -d > input <<< '…'`.
            sed -n 's/.*Test unit written to \([^ ]*\).*/\1/p' "$OUT/$target.log" | while read -r unit; do
                [ -f "$unit" ] || continue
                size=$(wc -c <"$unit")
                if [ "$size" -le 65536 ]; then
                    echo "fuzz: $unit ($size bytes) as base64: $(base64 -w0 "$unit")" >&2
                else
                    echo "fuzz: $unit is $size bytes, over 64 KiB: not printed" >&2
                fi
            done
        else
            echo "fuzz: no input was saved (the target did not run, or failed outside an input); the log ends:" >&2
            tail -20 "$OUT/$target.log" >&2
        fi
        status=1
    fi
done
exit "$status"
