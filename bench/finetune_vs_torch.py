#!/usr/bin/python3
"""bench/finetune_vs_torch.py -- fine-tuning at 224 px: razor (dense and Back Razor) against PyTorch, one run.

For each model it writes a torchvision state dict (random init, seeded: the hub is not reachable, and the weights'
values change neither speed nor memory) with torch.save, then runs, each in a fresh process and alternating within
every repetition:

  PyTorch dense                  bench/stepbench.py --torch-worker --from FILE: torchvision's model, the file loaded,
                                 a new head for --classes, train mode, the step razor bench times (zero_grad, forward,
                                 cross-entropy, backward, SGD momentum 0.9 Nesterov, weight decay 5e-4)
  razor dense                    razor bench --from FILE (the same file through razor's .pth reader)
  razor Back Razor rows          razor bench --from FILE --razor 0.9 ... (--rows: the flags of each row)

on N(0, 1) images of (batch, 3, S, S) and uniform labels, the same threads for both sides. ms/step is the median of
--reps repetitions of each process's median over --steps timed steps (after --warmup untimed ones).

Columns:
  ms/step, img/s     the step's median time, batch / that time
  x PyTorch          PyTorch dense ms / this row's ms (> 1: faster than PyTorch)
  x razor dense      this row's ms / razor dense ms (Back Razor's step-time cost; <= 1.10 is issue 18's bar)
  saved              bytes saved for backward at the step's peak. PyTorch: every tensor its autograd saves, through
                     saved_tensors_hooks, parameters excluded and each storage counted once; razor: the tape's stored
                     bytes (deduplicated the same way)
  dense tape         razor's own dense tape of the same step (what `saved` would be with a dense tape)
  peak RSS           the process's peak resident set (VmHWM / ru_maxrss): weights, gradients, optimizer state,
                     activations, workspaces, the allocator's cache, the runtime itself; what the laptop feels
  RSS / PyTorch      this row's peak RSS over PyTorch dense's (issue 18's bars: resnet50 int8 frozen BN <= 1/5,
                     trainable BN <= 1/3; mobilenet_v2 and vit_b_16 <= 1/4)
  tensor peak        razor's tracking allocator's peak of live tensor bytes (part of the RSS)

Outputs: a markdown table (stdout, and between <!-- finetune-vs-torch begin/end --> in --write), every process's
JSON line in OUT/rows.jsonl, OUT/rows.csv, and OUT/memory.png (peak RSS and saved bytes per row, one panel per model).

  bash scripts/setup.sh --bench                  # PyTorch, torchvision, matplotlib
  /usr/bin/python3 bench/finetune_vs_torch.py    # resnet18, resnet50, mobilenet_v2 (batch 32), vit_b_16 (batch 16)
  /usr/bin/python3 bench/finetune_vs_torch.py --models resnet18 --steps 1 --warmup 1 --write ""    # a quick look
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stepbench  # noqa: E402  (razor bench runner, PyTorch step worker, machine line)

MODELS = "resnet18,resnet50,mobilenet_v2,vit_b_16"
# The razor rows after razor dense: (label, flags). --rows replaces them (';'-separated flag lists).
# "--razor 0.9" alone is the CLI's default tape (fp16 kept values, BN inputs per-channel int8).
# "--step-in-backward": each parameter updated inside backward, its gradient freed at once (docs/optim.md).
# "--razor-attn razored": attention's Q, K, V and P pruned as the reference does (smaller, less accurate than the
# CLI's dense int8); run only for the ViTs, since a CNN has no attention and the row would repeat another.
ROWS = ["--razor 0.9 --razor-values fp32", "--razor 0.9", "--razor 0.9 --razor-values int8", "--razor 0.9 --freeze-bn",
        "--razor 0.9 --razor-values int8 --freeze-bn", "--razor 0.9 --razor-values int8 --step-in-backward",
        "--razor 0.9 --razor-values int8 --freeze-bn --step-in-backward",
        "--razor 0.9 --razor-values int8 --razor-attn razored --step-in-backward"]
MiB = stepbench.MiB


def write_weights(model, image_size, folder):
    """torchvision's `model` (1000 classes, seed 0) saved with torch.save; returns the path."""
    import torch
    torch.manual_seed(0)
    net = stepbench.torch_model(model, image_size, {}, classes=1000)
    path = os.path.join(folder, f"{model}.pth")
    torch.save(net.state_dict(), path)
    return path


def plan(args, model, weights):
    """[(label, kind, command)] for one model, in the order each repetition runs them."""
    batch = args.vit_batch if model.startswith("vit_") else args.batch
    common = ["--from", weights, "--classes", str(args.classes)]
    razor = lambda extra: stepbench.razor_cmd(args.razor, model, batch, args.threads, args.steps, args.warmup,
                                              common + extra, args.image_size)
    rows = [("PyTorch dense", "torch",
             stepbench.torch_cmd(model, batch, args.threads, args.steps, args.warmup, image_size=args.image_size,
                                 extra=common)),
            ("razor dense", "dense", razor([]))]
    for flags in [r.strip() for r in args.rows.split(";") if r.strip()]:
        if "--razor-attn" in flags.split() and not model.startswith("vit_"):
            continue
        rows.append((f"razor {flags}", "razor", razor(flags.split())))
    return batch, rows


def fmt_mib(b):
    return f"{b / MiB:,.0f} MiB" if b else "-"


def table(results):
    """Markdown rows: one per (model, row), figures from the medians over repetitions."""
    lines = ["| model | batch | row | ms/step | img/s | x PyTorch | x razor dense | saved | dense tape | peak RSS | "
             "RSS / PyTorch | tensor peak |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for model, batch, rows in results:
        torch_row = next(r for r in rows if r["kind"] == "torch")
        dense_row = next(r for r in rows if r["kind"] == "dense")
        for r in rows:
            ms, razor_row = r["step_ms"], r["kind"] != "torch"
            vs_dense = f"{ms / dense_row['step_ms']:.2f}" if razor_row else ""
            lines.append(
                f"| {model} | {batch} | {r['label']} | {ms:,.0f} | {batch / (ms / 1000):.2f} | "
                f"{torch_row['step_ms'] / ms:.2f} | "
                f"{vs_dense} | {fmt_mib(r['saved_bytes'])} | "
                f"{fmt_mib(r.get('saved_dense_bytes', 0)) if razor_row else ''} | "
                f"{fmt_mib(r['peak_rss_bytes'])} | 1/{torch_row['peak_rss_bytes'] / r['peak_rss_bytes']:.2f} | "
                f"{fmt_mib(r.get('peak_tensor_bytes', 0)) if razor_row else ''} |")
    return "\n".join(lines)


def plot(results, path):
    """Peak RSS and saved bytes per row, one panel per model (horizontal bars, MiB)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    height = 0.8 * len(results) + 0.4 * sum(len(rows) for _, _, rows in results)
    fig, axes = plt.subplots(len(results), 1, figsize=(9, height), squeeze=False)
    for ax, (model, batch, rows) in zip(axes[:, 0], results):
        labels = [r["label"] for r in rows][::-1]
        rss = [r["peak_rss_bytes"] / MiB for r in rows][::-1]
        saved = [r["saved_bytes"] / MiB for r in rows][::-1]
        y = range(len(rows))
        ax.barh([v + 0.2 for v in y], rss, height=0.4, color="#4c72b0", label="peak RSS")
        ax.barh([v - 0.2 for v in y], saved, height=0.4, color="#dd8452", label="saved for backward")
        for v, (a, b) in enumerate(zip(rss, saved)):
            ax.text(a, v + 0.2, f" {a:,.0f}", va="center", fontsize=7)
            ax.text(b, v - 0.2, f" {b:,.0f}", va="center", fontsize=7)
        ax.set_yticks(list(y))
        ax.set_yticklabels(labels, fontsize=8)
        ax.set_title(f"{model}, batch {batch}", fontsize=9, loc="left")
        ax.set_xlabel("MiB", fontsize=8)
        ax.set_xlim(0, max(rss + saved) * 1.15)
        ax.tick_params(axis="x", labelsize=7)
    axes[0, 0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--razor", default=stepbench.RAZOR, help="the razor binary")
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=32, help="images per step for the CNNs")
    ap.add_argument("--vit-batch", type=int, default=16, help="images per step for the ViTs")
    ap.add_argument("--classes", type=int, default=10, help="the fine-tune's classes (the new head)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2, help="timed steps per process")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps per process first")
    ap.add_argument("--reps", type=int, default=1, help="repetitions (each runs every row once, alternating)")
    ap.add_argument("--rows", default=";".join(ROWS), help="razor rows after razor dense: flag lists, ';'-separated")
    ap.add_argument("--out", default=os.path.join(stepbench.ROOT, "runs", "finetune_vs_torch"),
                    help="folder for rows.jsonl, rows.csv and memory.png")
    ap.add_argument("--write", default=os.path.join(stepbench.ROOT, "docs", "benchmarks.md"),
                    help="markdown file whose finetune-vs-torch block is replaced ('' = none)")
    args = ap.parse_args()
    stepbench.need_razor(args.razor)
    import torch
    os.makedirs(args.out, exist_ok=True)

    load_start = stepbench.load_average()
    banner = stepbench.razor_banner(args.razor, args.threads)
    results = []
    with tempfile.TemporaryDirectory(prefix="razor_finetune_bench_") as tmp, \
            open(os.path.join(args.out, "rows.jsonl"), "w") as log:
        for model in args.models.split(","):
            weights = write_weights(model, args.image_size, tmp)
            batch, rows = plan(args, model, weights)
            runs = {label: [] for label, _, _ in rows}
            for rep in range(args.reps):
                for label, kind, cmd in rows:
                    t0 = time.time()
                    r = stepbench.run_json(cmd, "finetune_vs_torch.py")
                    r.update(label=label, kind=kind, rep=rep, model=model, image_size=args.image_size)
                    log.write(json.dumps(r) + "\n")
                    log.flush()
                    runs[label].append(r)
                    print(f"  {model} {label}: {r['step_ms']:,.0f} ms/step, peak RSS {fmt_mib(r['peak_rss_bytes'])}, "
                          f"saved {fmt_mib(r['saved_bytes'])} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
            merged = []
            for label, kind, _ in rows:   # medians over repetitions
                rs = runs[label]
                m = dict(rs[0])
                for key in ("step_ms", "peak_rss_bytes", "saved_bytes", "saved_dense_bytes", "peak_tensor_bytes"):
                    if key in m:
                        m[key] = stepbench.median([r[key] for r in rs])
                merged.append(m)
            results.append((model, batch, merged))
            os.remove(weights)
    load_end = stepbench.load_average()

    with open(os.path.join(args.out, "rows.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "batch", "row", "step_ms", "img_per_s", "saved_bytes", "saved_dense_bytes",
                    "peak_rss_bytes", "peak_tensor_bytes"])
        for model, batch, rows in results:
            for r in rows:
                w.writerow([model, batch, r["label"], f"{r['step_ms']:.1f}", f"{batch / (r['step_ms'] / 1000):.3f}",
                            r["saved_bytes"], r.get("saved_dense_bytes", ""), r["peak_rss_bytes"],
                            r.get("peak_tensor_bytes", "")])
    plot(results, os.path.join(args.out, "memory.png"))

    command = "/usr/bin/python3 bench/finetune_vs_torch.py " + " ".join(sys.argv[1:])
    text = "\n".join([
        stepbench.machine_line(args.threads, load_start, load_end, torch.__version__, banner), "",
        f"Fine-tuning step at {args.image_size} px from a torchvision `.pth` (new {args.classes}-class head), "
        f"{args.reps} repetition(s) of {args.steps} timed step(s) after {args.warmup} warm-up; "
        f"`{command.strip()}`", "", table(results)])
    print(text)
    if args.write:
        stepbench.write_between_markers(args.write, "finetune-vs-torch", text)
    print(f"wrote {args.out}/rows.jsonl, rows.csv, memory.png" + (f" and {args.write}" if args.write else ""),
          file=sys.stderr)


if __name__ == "__main__":
    main()
