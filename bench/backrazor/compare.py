#!/usr/bin/python3
"""Back Razor's training step against the dense tape and PyTorch dense, in one run: step time, saved bytes, peak RSS.

For each model (default resnet20 and vit_tiny at batch 128) it runs, alternately and each in a fresh process:
  razor bench --json                                   the dense tape
  razor bench --json --razor R --razor-values V        R in {0.8, 0.9, 0.97} x V in {fp32, fp16, int8}
  this script --torch-worker                           PyTorch dense: the same model (scripts/fixtures/ops_models.py,
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
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
RATIOS = (0.8, 0.9, 0.97)
VALUES = ("fp32", "fp16", "int8")
MiB = 1024.0 * 1024.0


def torch_worker(args):
    """One PyTorch dense run in this process; prints one JSON line with the razor bench fields."""
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(ROOT, "scripts", "fixtures"))
    from ops_models import MODELS

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = MODELS[args.worker_model]()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4, nesterov=True)
    x = torch.randn(args.batch, 3, 32, 32)
    y = torch.randint(0, 10, (args.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    # Saved bytes: one step with pack hooks (not timed). Parameters are held by the model anyway (razor counts its
    # references as 0 bytes); a storage saved by several nodes is counted once, as razor's tape does.
    params = {p.data_ptr() for p in model.parameters()}
    seen, saved = set(), [0]

    def pack(t):
        if t.data_ptr() not in params:
            key = (t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr())
            if key not in seen:
                seen.add(key)
                nbytes = t.untyped_storage().nbytes() if hasattr(t, "untyped_storage") else t.storage().nbytes()
                saved[0] += nbytes
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    for _ in range(max(args.warmup - 1, 0)):
        step()
    ms = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        ms.append(1000 * (time.perf_counter() - t0))
    print(json.dumps({"model": args.worker_model, "batch": args.batch, "threads": torch.get_num_threads(),
                      "step_ms": statistics.median(ms), "step_ms_min": min(ms), "step_ms_max": max(ms),
                      "saved_bytes": saved[0], "saved_dense_bytes": saved[0],
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "torch": torch.__version__}))


def run_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"compare.py: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def rows_for(args, model):
    """[(label, command)] in the order they run in each round."""
    base = [args.razor, "bench", "--json", "--model", model, "--batch", str(args.batch), "--threads", str(args.threads),
            "--steps", str(args.steps), "--warmup", str(args.warmup)]
    rows = [("razor dense tape", base)]
    for r in args.ratios.split(","):
        for v in args.values.split(","):
            rows.append((f"razor r={r} {v}", base + ["--razor", str(r), "--razor-values", v]))
    rows.append((f"PyTorch dense", [sys.executable, os.path.abspath(__file__), "--torch-worker", "--worker-model", model,
                                    "--batch", str(args.batch), "--threads", str(args.threads), "--steps",
                                    str(args.steps), "--warmup", str(args.warmup)]))
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


def write_docs(path, model, text):
    begin, end = f"<!-- backrazor-bench:{model} begin -->", f"<!-- backrazor-bench:{model} end -->"
    doc = open(path).read() if os.path.exists(path) else ""
    block = f"{begin}\n{text}\n{end}"
    if begin in doc and end in doc:
        doc = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, doc, flags=re.S)
    else:
        doc = doc.rstrip("\n") + "\n\n" + block + "\n"
    with open(path + ".tmp", "w") as f:
        f.write(doc)
    os.replace(path + ".tmp", path)


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
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker-model", default="resnet20", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker:
        return torch_worker(args)
    if not os.path.exists(args.razor):
        sys.exit(f"compare.py: {args.razor} not found; build it first (cmake --build build --target razor)")
    for model in args.models.split(","):
        rows = rows_for(args, model)
        results = {label: [] for label, _ in rows}
        load0 = os.getloadavg()[0]
        t0 = time.time()
        for rnd in range(args.rounds):
            for label, cmd in rows:
                results[label].append(run_json(cmd))
                r = results[label][-1]
                print(f"  [{model} round {rnd + 1}/{args.rounds}] {label}: {r['step_ms']:.0f} ms, saved "
                      f"{r['saved_bytes'] / MiB:.1f} MiB, peak RSS {r['peak_rss_bytes'] / MiB:.0f} MiB",
                      file=sys.stderr, flush=True)
        load1 = os.getloadavg()[0]
        torch_version = results["PyTorch dense"][0]["torch"]
        header = (f"**{model}, batch {args.batch}, {args.threads} threads**, SGD (momentum 0.9, Nesterov, wd 5e-4), "
                  f"{args.steps} timed steps after {args.warmup} warm-up per process, {args.rounds} alternating "
                  f"rounds ({time.time() - t0:.0f} s). Machine: {platform.processor() or platform.machine()}, "
                  f"{os.cpu_count()} hardware threads, load average {load0:.2f} at start and {load1:.2f} at the end; "
                  f"PyTorch {torch_version}. Command: `/usr/bin/python3 bench/backrazor/compare.py --models {model} "
                  f"--batch {args.batch} --threads {args.threads} --steps {args.steps} --rounds {args.rounds}"
                  f"{'' if args.ratios == ','.join(map(str, RATIOS)) else ' --ratios ' + args.ratios}"
                  f"{'' if args.values == ','.join(VALUES) else ' --values ' + args.values}`.")
        text = table(model, args, results, header)
        print(text + "\n")
        if not args.no_write:
            write_docs(args.out, model, text)


if __name__ == "__main__":
    main()
