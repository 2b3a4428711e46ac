#!/usr/bin/env bash
# Runs the ProvisioningCrypto benchmarks (release build, through the benchmark plugin) and
# prints p50/p99 wall clock per benchmark and the ratios to the raw P-256 baselines.
# Extra arguments go to the plugin, e.g. ./run.sh --filter 'chain.*'
set -euo pipefail
cd "$(dirname "$0")"

results=.build/benchmark-results
rm -rf "$results"
mkdir -p "$results"

swift package --allow-writing-to-package-directory benchmark run \
    --target CryptoBenchmarks --format jmh --path "$results" --no-progress "$@"

shopt -s nullglob
files=("$results"/*.jmh.json)
if [ ${#files[@]} -eq 0 ]; then
    echo "run.sh: the benchmark plugin wrote no JMH file to $results" >&2
    exit 1
fi

python3 - "${files[@]}" <<'PY'
"""Prints p50/p99 per benchmark (microseconds) and the ratios we track, from JMH JSON."""
import json
import sys

WALL = "Time (wall clock)"
rows = {}
for path in sys.argv[1:]:
    with open(path) as f:
        for element in json.load(f):
            # "package.benchmark.<target>.<benchmark name>"; names contain dots themselves.
            name = element["benchmark"].split(".", 3)[3]
            wall = element["secondaryMetrics"][WALL]["scorePercentiles"]
            throughput = element["primaryMetric"]["scorePercentiles"]
            rows[name] = {
                "p50": wall["50.0"],
                "p99": wall["99.0"],
                "ops": throughput["50.0"],
                "n": element["measurementIterations"],
            }

order = [
    "raw.keygen+ecdh", "raw.keygen-noncompact+ecdh", "raw.ephemeral+ecdh", "raw.ecdsa.sign", "raw.ecdsa.verify", "seal",
    "chain.validate.uncached", "chain.validate.cached", "activation.sign", "activation.verify",
]
names = [n for n in order if n in rows] + sorted(n for n in rows if n not in order)
print()
print(f"{'benchmark':<26}{'p50 (us)':>12}{'p99 (us)':>12}{'p50 ops/s':>12}{'samples':>10}")
for n in names:
    r = rows[n]
    print(f"{n:<26}{r['p50']:>12.3f}{r['p99']:>12.3f}{r['ops']:>12.0f}{r['n']:>10}")

# (numerator, denominator, target or None): ratios of p50 (and of p99).
ratios = [
    ("seal", "raw.ephemeral+ecdh", "<= 1.3"),
    ("raw.ephemeral+ecdh", "raw.keygen+ecdh", None),
    ("raw.ephemeral+ecdh", "raw.keygen-noncompact+ecdh", None),
    ("chain.validate.uncached", "raw.ecdsa.verify", None),
    ("chain.validate.cached", "raw.ecdsa.verify", "<< 1"),
    ("activation.sign", "raw.ecdsa.sign", None),
    ("activation.verify", "raw.ecdsa.verify", None),
]
print()
print(f"{'ratio':<46}{'p50':>9}{'p99':>9}  target")
for num, den, target in ratios:
    label = f"{num} / {den}"
    if num in rows and den in rows and rows[den]["p50"] > 0 and rows[den]["p99"] > 0:
        p50 = rows[num]["p50"] / rows[den]["p50"]
        p99 = rows[num]["p99"] / rows[den]["p99"]
        print(f"{label:<46}{p50:>9.3f}{p99:>9.3f}  {target or ''}")
    else:
        print(f"{label:<46}{'n/a':>9}{'n/a':>9}  {target or ''}")
PY
