#!/usr/bin/env bash
# The Wallet extension's `status` from a fresh process, for snapshots of 1, 10 and 100 cards:
# builds ExtensionStatusProbe in release mode, then runs it RUNS times per size (default 300),
# alternating with the baseline (reading the same two files' bytes in a fresh process), and
# prints p50/p99 of the time each process measured itself (elapsed, and CPU time, which
# other processes on the machine do not inflate), the process's whole wall time, and the
# ratio to the baseline. Target: status p99 <= 5 ms at 100 cards.
set -euo pipefail
cd "$(dirname "$0")"
runs="${1:-300}"

swift build -c release --product ExtensionStatusProbe >&2
probe="$(swift build -c release --show-bin-path)/ExtensionStatusProbe"

python3 - "$probe" "$runs" <<'PY'
import math
import subprocess
import sys
import tempfile
import time

probe, runs = sys.argv[1], int(sys.argv[2])

def percentile(values, p):
    """Nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]

def run(*arguments):
    start = time.perf_counter_ns()
    out = subprocess.run([probe, *arguments], check=True, capture_output=True, text=True).stdout.split()
    return int(out[1]), int(out[2]), time.perf_counter_ns() - start, out[3:]

print(f"load average before: {open('/proc/loadavg').read().split()[0]}")
print(f"{'cards':>6} {'what':<8}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'cpu p50':>9}{'cpu p99':>9}{'proc p50':>10}{'proc p99':>10}  answer")
for cards in (1, 10, 100):
    with tempfile.TemporaryDirectory(prefix="pushprov-status-") as folder:
        subprocess.run([probe, "prepare", folder, str(cards)], check=True, capture_output=True)
        measured = {"status": [], "read": []}
        cpu = {"status": [], "read": []}
        process = {"status": [], "read": []}
        answer = ""
        for _ in range(runs):
            for what in ("status", "read"):
                own, used, wall, rest = run(what, folder, str(cards))
                measured[what].append(own)
                cpu[what].append(used)
                process[what].append(wall)
                if what == "status":
                    answer = " ".join(rest)
        for what in ("status", "read"):
            m, c, w = measured[what], cpu[what], process[what]
            print(f"{cards:>6} {what:<8}{percentile(m, 50) / 1e6:>9.3f}{percentile(m, 99) / 1e6:>9.3f}{max(m) / 1e6:>9.3f}"
                  f"{percentile(c, 50) / 1e6:>9.3f}{percentile(c, 99) / 1e6:>9.3f}"
                  f"{percentile(w, 50) / 1e6:>10.2f}{percentile(w, 99) / 1e6:>10.2f}  {answer if what == 'status' else ''}")
        ratio50 = percentile(measured["status"], 50) / max(1, percentile(measured["read"], 50))
        ratio99 = percentile(measured["status"], 99) / max(1, percentile(measured["read"], 99))
        print(f"{cards:>6} {'ratio':<8}{ratio50:>9.1f}{ratio99:>9.1f}   status / read (same process kind, same files)")
print(f"load average after: {open('/proc/loadavg').read().split()[0]}")
PY
