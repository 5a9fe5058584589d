#!/usr/bin/python3
"""A/B of two razor binaries on one `razor bench` configuration, alternating in one run (the machine is shared and
noisy: the ratio of alternating medians is the evidence, not the absolute times).

    OMP_WAIT_POLICY=passive /usr/bin/python3 bench/ab_bench.py OLD_BINARY NEW_BINARY --rounds 3 -- \
        --model resnet20 --batch 128 --threads 2 --steps 8

Each round runs `OLD bench ARGS --json` then `NEW bench ARGS --json` (the order flips every round), under
`perf stat -e page-faults` when perf is present. Prints per-round step_ms and the medians, new/old ratios of step
time, page faults, peak tensor bytes, saved (tape) bytes and peak RSS.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys


def run(binary, args, perf):
    cmd = [binary, "bench", *args, "--json"]
    if perf:
        cmd = ["perf", "stat", "-x", ",", "-e", "page-faults", *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    j = json.loads([line for line in p.stdout.splitlines() if line.startswith("{")][-1])
    if perf:
        m = re.search(r"^(\d+),,page-faults", p.stderr, re.M)
        j["page_faults"] = int(m.group(1)) if m else None
    return j


def main():
    argv = sys.argv[1:]
    bench_args = argv[argv.index("--") + 1:] if "--" in argv else []
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=3)
    opts = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    perf = shutil.which("perf") is not None
    res = {"old": [], "new": []}
    for r in range(opts.rounds):
        order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
        for which in order:
            j = run(getattr(opts, which), bench_args, perf)
            res[which].append(j)
            print(f"round {r} {which}: step {j['step_ms']:.1f} ms, page faults {j.get('page_faults')}, "
                  f"timed OS allocations {j.get('timed_os_allocations', '-')}", flush=True)
    print(f"\nbench {' '.join(bench_args)}; {opts.rounds} rounds; load average now {os.getloadavg()[0]:.1f}")
    for key in ["step_ms", "page_faults", "peak_tensor_bytes", "saved_bytes", "peak_rss_bytes"]:
        vals = {w: [j[key] for j in res[w] if j.get(key) is not None] for w in res}
        if not vals["old"] or not vals["new"]:
            continue
        mo, mn = statistics.median(vals["old"]), statistics.median(vals["new"])
        print(f"  {key:18s} old {mo:14.1f}  new {mn:14.1f}  new/old {mn / mo if mo else float('nan'):.3f}")


if __name__ == "__main__":
    main()
