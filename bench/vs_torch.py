#!/usr/bin/python3
"""bench/vs_torch.py -- razor's training step against PyTorch's, side by side in one run (issue 6's harness).

For each model it runs, in fresh processes and alternating within every repetition:
  razor bench --json                                   razor's dense step (apps/bench.cpp)
  bench/stepbench.py --torch-worker                    the same step in PyTorch: the model twin from
                                                       scripts/fixtures/ops_models.py, same shapes, same batch, same
                                                       threads, same optimizer (SGD lr 0.01, momentum 0.9, Nesterov,
                                                       weight decay 5e-4), N(0, 1) images, uniform labels
  razor bench --json --razor 0.9 --razor-values int8   the Back Razor tape step (models in --razor-models)
  razor bench --json --keep 0.5                        the VR-PGE phase-A iteration, both passes (--keep-models)
and, at the start of every repetition, a (S, S) x (S, S) float32 sgemm through razor's gemm (razor_op_bench --sgemm)
and through torch.mm (the BLAS PyTorch loaded). A row's ms/step is the median over --reps repetitions of each
process's median over --steps timed steps (after --warmup untimed ones).

Columns:
  img/s            batch / step time
  GFLOP/s          training FLOPs per step / step time, with training FLOPs = 3 x razor's forward FLOPs per image
                   (`razor info --model M`: 2 x MACs of convs and linears, plus the element-wise work razor counts)
                   x batch. The VR-PGE row counts the FLOPs it runs: 2 passes x (sampled MACs / dense) x dense.
  % of peak        GFLOP/s over the sgemm peak of this run: the faster of razor's and PyTorch's sgemm (both printed)
  razor/PyTorch    PyTorch ms / razor ms (> 1: razor is faster), on the razor dense row
  x razor dense    step time over razor's dense step time (Back Razor: <= 1.05 is issue 6's target) or, for VR-PGE,
                   the speed-up dense / VR-PGE (>= 3 at keep 0.5 is the target)

It prints a markdown table and writes it into --write (docs/benchmarks.md) between <!-- vs-torch begin --> and
<!-- vs-torch end -->, with the machine line (CPU, threads, load average at the start and the end, PyTorch version,
razor's build banner) and the command.

  cmake --build build --target razor razor_op_bench
  /usr/bin/python3 bench/vs_torch.py                                   # all 7 models, batch 128, 2 threads
  /usr/bin/python3 bench/vs_torch.py --quick                           # smoke: mlp, resnet20, 2 reps, 3 steps
  /usr/bin/python3 bench/vs_torch.py --models resnet50 --image-size 224 --batch 32 --razor-models "" --keep-models ""
                                                    # torchvision's ImageNet families at 224 px (own block in --write)
  /usr/bin/python3 bench/vs_torch.py --isa avx2 --razor build-haswell/razor --op-bench build-haswell/bench/razor_op_bench
                                                    # both sides limited to AVX2 on an AVX-512 CPU (own block)

--isa avx2 limits both sides to AVX2+FMA on a CPU that has more, through their environment: razor gets RAZOR_ISA=avx2
(its GEMM and Winograd families); PyTorch gets ATEN_CPU_CAPABILITY=avx2 (its own kernels), ONEDNN_MAX_CPU_ISA=AVX2
(the convs) and OPENBLAS_CORETYPE=Haswell (torch.mm and linear go through OpenBLAS, which otherwise picks its AVX-512
kernels). razor's element-wise loops and Eigen are compiled for the build's baseline, so pair it with a build whose
baseline is AVX2 (-DRAZOR_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=haswell): that build is what an AVX2 laptop's
-march=native build compiles, and RAZOR_ISA=avx2 on a -march=native AVX-512 build would still run AVX-512 loops.
"""
import argparse
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stepbench  # noqa: E402  (bench/stepbench.py: razor bench runner, PyTorch step worker, machine line)

MODELS = "mlp,resnet20,resnet32,resnet56,resnet32x2,vgg19_bn,vit_tiny"


def forward_flops_per_image(razor, model, image_size):
    """razor info's 'forward FLOPs N per image' (batch 1)."""
    out = subprocess.run([razor, "info", "--model", model, "--image-size", str(image_size)], capture_output=True,
                         text=True)
    m = re.search(r"forward FLOPs\s+([\d,]+) per image", out.stdout)
    if out.returncode != 0 or not m:
        sys.exit(f"vs_torch.py: razor info --model {model} gave no 'forward FLOPs ... per image' line:\n"
                 f"{out.stdout[-1000:]}{out.stderr[-1000:]}")
    return int(m.group(1).replace(",", ""))


def plan(args):
    """[(model, label, kind, command)] in the order each repetition runs them."""
    rows = []
    for model in args.models.split(","):
        razor = lambda extra=(): stepbench.razor_cmd(args.razor, model, args.batch, args.threads, args.steps,
                                                      args.warmup, extra, args.image_size)
        rows.append((model, "razor", "dense", razor()))
        rows.append((model, "PyTorch", "torch", stepbench.torch_cmd(model, args.batch, args.threads, args.steps,
                                                                  args.warmup, image_size=args.image_size)))
        if model in args.razor_models.split(","):
            rows.append((model, f"razor, Back Razor tape r={args.razor_ratio} {args.razor_values}", "tape",
                         razor(["--razor", str(args.razor_ratio), "--razor-values", args.razor_values])))
        if model in args.keep_models.split(","):
            rows.append((model, f"razor, VR-PGE iteration keep {args.keep}", "vrpge", razor(["--keep", str(args.keep)])))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--razor", default=stepbench.RAZOR, help="the razor binary")
    ap.add_argument("--op-bench", default=os.path.join(stepbench.ROOT, "build", "bench", "razor_op_bench"),
                    help="razor_op_bench (for razor's sgemm)")
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--image-size", type=int, default=32,
                    help="input height = width (224 for the ImageNet families: resnet50, mobilenet_v2, vit_b_16)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3, help="repetitions; each runs every row once, alternating")
    ap.add_argument("--steps", type=int, default=5, help="timed steps per process")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps per process")
    ap.add_argument("--sgemm", type=int, default=2048, help="size S of the (S, S) x (S, S) sgemm peak")
    ap.add_argument("--razor-models", default="resnet20,vit_tiny", help="models that get a Back Razor tape row")
    ap.add_argument("--razor-ratio", type=float, default=0.9)
    ap.add_argument("--razor-values", default="int8")
    ap.add_argument("--keep-models", default="resnet32x2", help="models that get a VR-PGE row")
    ap.add_argument("--keep", type=float, default=0.5)
    ap.add_argument("--isa", choices=["", "avx2"], default="",
                    help="limit both sides to this kernel family (see above; pair avx2 with a -march=haswell build)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: --models mlp,resnet20 --reps 2 --steps 3 --sgemm 1024 (marked as a smoke run)")
    ap.add_argument("--write", default=os.path.join(stepbench.ROOT, "docs", "benchmarks.md"),
                    help="markdown file to write the table into ('' = print only)")
    args = ap.parse_args()
    if args.quick:
        args.models, args.reps, args.steps, args.sgemm = "mlp,resnet20", 2, 3, 1024
    stepbench.need_razor(args.razor)
    isa_env = {"avx2": {"RAZOR_ISA": "avx2", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                        "OPENBLAS_CORETYPE": "Haswell"}}.get(args.isa, {})
    os.environ.update(isa_env)   # every process below inherits it; each side reads only its own variables
    if not os.path.exists(args.op_bench):
        sys.exit(f"{args.op_bench} not found; build it first (cmake --build build --target razor_op_bench)")

    flops = {m: 3 * forward_flops_per_image(args.razor, m, args.image_size) for m in args.models.split(",")}   # training, per image
    banner = stepbench.razor_banner(args.razor, args.threads)
    rows = plan(args)
    results = {(model, label): [] for model, label, _, _ in rows}
    sgemm = {"razor": [], "PyTorch": []}
    sgemm_cmds = {"razor": [args.op_bench, "--sgemm", str(args.sgemm), "--threads", str(args.threads), "--reps", "3"],
                  "PyTorch": stepbench.torch_sgemm_cmd(args.sgemm, args.threads, 3)}
    load_start, t0 = stepbench.load_average(), time.time()
    for rep in range(args.reps):
        for side, cmd in sgemm_cmds.items():
            sgemm[side].append(stepbench.run_json(cmd, "vs_torch.py"))
            print(f"  [rep {rep + 1}/{args.reps}] sgemm {args.sgemm}^3 {side}: {sgemm[side][-1]['gflops']:.1f} GFLOP/s",
                  file=sys.stderr, flush=True)
        for model, label, _, cmd in rows:
            results[(model, label)].append(stepbench.run_json(cmd, "vs_torch.py"))
            print(f"  [rep {rep + 1}/{args.reps}] {model} {label}: {results[(model, label)][-1]['step_ms']:.1f} ms",
                  file=sys.stderr, flush=True)
    load_end, seconds = stepbench.load_average(), time.time() - t0
    torch_version = next(r[0]["torch"] for (m, l), r in results.items() if l == "PyTorch")

    peaks = {side: stepbench.median(r["gflops"] for r in runs) for side, runs in sgemm.items()}
    peak_side = max(peaks, key=peaks.get)
    peak = peaks[peak_side]
    ms = {key: stepbench.median(r["step_ms"] for r in runs) for key, runs in results.items()}
    lines = ["| model | run | ms/step | img/s | GFLOP/s | % of sgemm peak | razor / PyTorch | × razor dense | "
             "rep spread |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for model, label, kind, _ in rows:
        m = ms[(model, label)]
        dense_ms, torch_ms = ms[(model, "razor")], ms[(model, "PyTorch")]
        work = flops[model] * args.batch
        if kind == "vrpge":   # two sampled passes, each (sampled MACs / dense) of the dense step's work
            work *= 2 * stepbench.median(r["flops_ratio"] for r in results[(model, label)])
        gflops = work / (m / 1000) / 1e9
        spread = [r["step_ms"] for r in results[(model, label)]]
        versus = {"dense": f"**{torch_ms / m:.2f}x**", "torch": "1 (reference)"}.get(kind, "")
        times_dense = {"dense": "1", "tape": f"{m / dense_ms:.3f} (time)", "vrpge": f"{dense_ms / m:.2f}x faster",
                       "torch": ""}[kind]
        lines.append(f"| {model} | {label} | {m:,.1f} | {args.batch / (m / 1000):,.0f} | {gflops:,.1f} | "
                     f"{100 * gflops / peak:.1f} % | {versus} | {times_dense} | "
                     f"{min(spread):,.0f}–{max(spread):,.0f} |")

    command = "/usr/bin/python3 bench/vs_torch.py " + " ".join(a for a in sys.argv[1:])
    engine = re.search(r"GEMM ([^|]+)", banner)
    gemm_engine = engine.group(1).strip() if engine else "?"   # what razor's banner names
    smoke = ("**Smoke run** (`--quick`: 2 models, 2 repetitions of 3 steps, a 1024³ sgemm) on a loaded machine: it "
             "checks that the harness works, it is not the measurement.\n\n") if args.quick else ""
    text = "\n".join([
        smoke + f"Batch {args.batch}, {args.image_size} px, {args.threads} threads per side, {stepbench.SGD_TEXT}; {args.reps} "
        f"repetitions of {args.steps} timed steps after {args.warmup} warm-up per process, razor and PyTorch "
        f"alternating; medians. Training FLOPs = 3 x `razor info`'s forward FLOPs per image. sgemm peak "
        f"({args.sgemm}³, float32, median of 3 products per repetition): razor's gemm ({gemm_engine}) "
        f"{peaks['razor']:.1f} GFLOP/s, PyTorch's torch.mm {peaks['PyTorch']:.1f} GFLOP/s; the % column uses the "
        f"faster, {peak_side}'s ({peak:.1f} GFLOP/s). Total {seconds:.0f} s.", "",
        stepbench.machine_line(args.threads, load_start, load_end, torch_version, banner)
        + (" Limited to AVX2 through the environment: " + ", ".join(f"{k}={v}" for k, v in isa_env.items()) + "."
           if isa_env else ""), "",
        f"Command: `{command.strip()}`", ""] + lines)
    print("\n" + text)
    if args.write:
        # one block per image size and kernel family: an AVX2 machine's run does not replace the AVX-512 table
        key = ("vs-torch" + ("" if args.image_size == 32 else f"-{args.image_size}px")
               + ("-avx2" if "ISA avx2" in banner else "") + ("-limited" if args.isa else ""))
        stepbench.write_between_markers(args.write, key, text)
        print(f"\nwrote {args.write}", file=sys.stderr)


if __name__ == "__main__":
    main()
