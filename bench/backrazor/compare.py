#!/usr/bin/python3
"""Back Razor's training step against the dense tape and PyTorch dense, in one run: step time, saved bytes, peak RSS.

For each model (default resnet20 and vit_tiny at batch 128) it runs, alternately and each in a fresh process:
  razor bench --json                                   the dense tape
  razor bench --json --razor R --razor-values V        R in {0.8, 0.9, 0.97} x V in {fp32, fp16, int8}
  bench/stepbench.py --torch-worker                    PyTorch dense: the same model (scripts/fixtures/ops_models.py,
                                                       key for key razor's), batch, threads and optimizer (SGD lr 0.01,
                                                       momentum 0.9, Nesterov, weight decay 5e-4), N(0, 1) images
and repeats the whole sequence --rounds times (alternation spreads a background load over every row). A row's step
time is the median of its rounds' medians. Saved bytes: razor's tape accounting (peak within a step; shared storages
counted once); PyTorch's through torch.autograd.graph.saved_tensors_hooks on one untimed step (every saved tensor
that is not a parameter, each storage counted once). Peak RSS: the process's VmHWM / ru_maxrss, one process per row.

It prints a markdown table per model and writes it into docs/back-razor.md between the markers
<!-- backrazor-bench:MODEL begin --> and <!-- backrazor-bench:MODEL end --> (--no-write to skip).

  cmake --build build --target razor
  /usr/bin/python3 bench/backrazor/compare.py --threads 2 --batch 128                 # ~15 min on 2 cores
  /usr/bin/python3 bench/backrazor/compare.py --models resnet20 --batch 32 --steps 2 --rounds 1 --no-write   # smoke
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import stepbench  # noqa: E402  (bench/stepbench.py: razor bench runner, PyTorch step worker, machine line)

ROOT = stepbench.ROOT
RATIOS = (0.8, 0.9, 0.97)
VALUES = ("fp32", "fp16", "int8")
MiB = stepbench.MiB


def rows_for(args, model):
    """[(label, command)] in the order they run in each round."""
    base = stepbench.razor_cmd(args.razor, model, args.batch, args.threads, args.steps, args.warmup)
    rows = [("razor dense tape", base)]
    for r in args.ratios.split(","):
        for v in args.values.split(","):
            rows.append((f"razor r={r} {v}", base + ["--razor", str(r), "--razor-values", v]))
    rows.append(("PyTorch dense", stepbench.torch_cmd(model, args.batch, args.threads, args.steps, args.warmup,
                                                      args.seed)))
    return rows


def table(model, args, results, header):
    dense = results["razor dense tape"]
    dense_ms = statistics.median(r["step_ms"] for r in dense)
    lines = [header, "",
             "| run | step ms (median) | × razor dense | saved (tape) | dense-equivalent / saved | tensor peak | peak RSS |",
             "|---|---|---|---|---|---|---|"]
    for label, runs in results.items():
        ms = statistics.median(r["step_ms"] for r in runs)
        saved = runs[0]["saved_bytes"]
        dense_eq = runs[0]["saved_dense_bytes"]
        ratio = f"{dense_eq / saved:.2f}x" if not label.startswith("PyTorch") else "(dense)"
        rss = max(r["peak_rss_bytes"] for r in runs)
        tensors = f"{max(r['peak_tensor_bytes'] for r in runs) / MiB:,.0f} MiB" if "peak_tensor_bytes" in runs[0] else "—"
        lines.append(f"| {label} | {ms:,.0f} | {ms / dense_ms:.3f} | {saved / MiB:,.1f} MiB | {ratio} | {tensors} | "
                     f"{rss / MiB:,.0f} MiB |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--razor", default=os.path.join(ROOT, "build", "razor"), help="the razor binary")
    ap.add_argument("--models", default="resnet20,vit_tiny")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per process (razor bench --steps)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2, help="times the whole sequence of rows is repeated")
    ap.add_argument("--ratios", default=",".join(str(r) for r in RATIOS), help="razor ratios r to run")
    ap.add_argument("--values", default=",".join(VALUES), help="razor value codecs to run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "back-razor.md"))
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    stepbench.need_razor(args.razor)
    for model in args.models.split(","):
        rows = rows_for(args, model)
        results = {label: [] for label, _ in rows}
        load0 = stepbench.load_average()
        t0 = time.time()
        for rnd in range(args.rounds):
            for label, cmd in rows:
                results[label].append(stepbench.run_json(cmd, "compare.py"))
                r = results[label][-1]
                print(f"  [{model} round {rnd + 1}/{args.rounds}] {label}: {r['step_ms']:.0f} ms, saved "
                      f"{r['saved_bytes'] / MiB:.1f} MiB, peak RSS {r['peak_rss_bytes'] / MiB:.0f} MiB",
                      file=sys.stderr, flush=True)
        load1 = stepbench.load_average()
        torch_version = results["PyTorch dense"][0]["torch"]
        header = (f"**{model}, batch {args.batch}, {args.threads} threads**, SGD (momentum 0.9, Nesterov, wd 5e-4), "
                  f"{args.steps} timed steps after {args.warmup} warm-up per process, {args.rounds} alternating "
                  f"rounds ({time.time() - t0:.0f} s). Machine: {stepbench.cpu_model()}, "
                  f"{os.cpu_count()} hardware threads, load average {load0:.2f} at start and {load1:.2f} at the end; "
                  f"PyTorch {torch_version}. Command: `/usr/bin/python3 bench/backrazor/compare.py --models {model} "
                  f"--batch {args.batch} --threads {args.threads} --steps {args.steps} --rounds {args.rounds}"
                  f"{'' if args.ratios == ','.join(map(str, RATIOS)) else ' --ratios ' + args.ratios}"
                  f"{'' if args.values == ','.join(VALUES) else ' --values ' + args.values}`.")
        text = table(model, args, results, header)
        print(text + "\n")
        if not args.no_write:
            stepbench.write_between_markers(args.out, f"backrazor-bench:{model}", text)


if __name__ == "__main__":
    main()
