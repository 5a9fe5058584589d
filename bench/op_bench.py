#!/usr/bin/python3
"""razor vs PyTorch: forward+backward of conv2d (ResNet-20, batch 128) and linear (ViT-tiny, 128 x 65 tokens).

    /usr/bin/python3 bench/op_bench.py --build build --threads 2

Runs razor's bench binary (<build>/bench/razor_op_bench --serve; it defines the shapes) and PyTorch in the same
run, alternating one razor and one PyTorch repetition so both see the same machine load. For each shape: the
median milliseconds of forward+backward after warm-up, GFLOP/s = 3 x forward FLOPs / time, and the ratio of
razor's throughput to PyTorch's. Prints a markdown table and writes it to docs/bench-ops.md.
PyTorch: torch.set_num_threads(threads); weights and inputs require grad, except the stem conv's input (as razor).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stepbench  # noqa: E402  (bench/stepbench.py: the machine's CPU line)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class Razor:
    def __init__(self, binary, threads):
        self.proc = subprocess.Popen([binary, "--serve", "--threads", str(threads)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)

    def ask(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().strip()
        if line.startswith("error") or not line:
            sys.exit(f"razor_op_bench: '{command}' -> {line or 'no answer'}")
        return line

    def cases(self):
        self.proc.stdin.write("list\n")
        self.proc.stdin.flush()
        out = []
        for line in iter(self.proc.stdout.readline, ""):
            if line.strip() == "end":
                break
            ident, kind, name, numbers = line.rstrip("\n").split("\t")
            out.append((int(ident), kind, name, [int(v) for v in numbers.split()]))
        return out

    def close(self):
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=10)


class Torch:
    """The same op in PyTorch, with the same requires_grad pattern as razor's case."""

    def __init__(self, kind, numbers, linear_as_conv=False):
        gen = torch.Generator().manual_seed(42)
        if kind == "conv2d":
            n, c, h, w, oc, k, stride, pad, x_grad = numbers
            self.x = torch.randn(n, c, h, w, generator=gen).requires_grad_(bool(x_grad))
            self.W = (torch.randn(oc, c, k, k, generator=gen) * 0.1).requires_grad_()
            self.b = None
            self.fn = lambda: F.conv2d(self.x, self.W, None, stride=stride, padding=pad)
        else:
            m, fin, fout = numbers
            self.x = torch.randn(m, fin, generator=gen).requires_grad_()
            self.W = (torch.randn(fout, fin, generator=gen) * 0.05).requires_grad_()
            self.b = torch.randn(fout, generator=gen).requires_grad_()
            if linear_as_conv:
                # The same product as a 1x1 conv over M "images" of 1x1 pixels: oneDNN's kernels instead of the
                # BLAS PyTorch's linear calls (which is the unoptimised reference BLAS on Debian's python3-torch).
                self.fn = lambda: F.conv2d(self.x.view(m, fin, 1, 1), self.W.view(fout, fin, 1, 1), self.b)
            else:
                self.fn = lambda: F.linear(self.x, self.W, self.b)
        with torch.no_grad():
            self.g = torch.randn(self.fn().shape, generator=gen)

    def run_ms(self):
        """(wall ms, process CPU ms) of one forward+backward."""
        for t in (self.x, self.W, self.b):
            if t is not None:
                t.grad = None
        cpu = time.process_time()
        start = time.perf_counter()
        y = self.fn()
        y.backward(self.g)
        return (time.perf_counter() - start) * 1e3, (time.process_time() - cpu) * 1e3


def shape_text(kind, numbers):
    if kind == "conv2d":
        n, c, h, w, oc, k, stride, pad, x_grad = numbers
        text = f"x ({n}, {c}, {h}, {w}), W ({oc}, {c}, {k}, {k}), s{stride} p{pad}"
        return text + ("" if x_grad else ", x no grad")
    m, fin, fout = numbers
    return f"x ({m}, {fin}), W ({fout}, {fin}), b"


def blas_library():
    """The BLAS shared library PyTorch loaded (resolved path), from /proc/self/maps; '?' where unknown."""
    torch.mm(torch.ones(2, 2), torch.ones(2, 2))
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "blas" in line.lower() or "mkl_rt" in line.lower()}
    except OSError:
        return "?"
    paths = sorted(os.path.realpath(p) for p in paths if p.startswith("/"))
    return ", ".join(paths) or "?"


def machine_line(threads, banner, start_load):
    model = stepbench.cpu_model()
    return (f"Machine: {model}, {os.cpu_count()} hardware threads, {threads} threads used by each side; "
            f"load average at start {start_load:.2f}. PyTorch {torch.__version__} (convs: oneDNN; linear: BLAS "
            f"{blas_library()}). razor: {banner}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="razor build directory (holds bench/razor_op_bench)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=7, help="timed repetitions per side (>= 5)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "bench-ops.md"))
    ap.add_argument("--cpu-time", action="store_true",
                    help="compare process CPU time instead of wall time (robust on a busy machine with --threads 1; "
                         "with more threads it counts OpenMP spin-waiting too)")
    ap.add_argument("--no-conv-proxy", action="store_true",
                    help="skip the extra PyTorch linear rows that run the same GEMM as a oneDNN 1x1 conv")
    ap.add_argument("--append", action="store_true", help="append the table to --out instead of overwriting it")
    ap.add_argument("--only", default="", help="run only cases whose kind and name (\"conv2d 16->16 ...\") contain this text")
    args = ap.parse_args()

    binary = os.path.join(args.build, "bench", "razor_op_bench")
    if not os.path.exists(binary):
        sys.exit(f"{binary} not found; build it first (cmake --build {args.build} --target razor_op_bench)")
    torch.set_num_threads(args.threads)
    razor = Razor(binary, args.threads)
    banner = razor.ask("banner")
    rows = []
    t0 = time.time()
    start_load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    for ident, kind, name, numbers in razor.cases():
        if args.only and args.only not in f"{kind} {name}":
            continue
        flops = float(razor.ask(f"case {ident}").split()[1])
        variants = [("", False)]
        if kind == "linear" and not args.no_conv_proxy:
            variants.append((" [PyTorch: same GEMM as a oneDNN 1x1 conv]", True))
        for suffix, as_conv in variants:
            th = Torch(kind, numbers, linear_as_conv=as_conv)
            razor_ms, torch_ms = [], []
            for rep in range(args.warmup + args.reps):
                r = [float(v) for v in razor.ask("run").split()]
                time.sleep(0.005)   # let the other side's OpenMP threads stop spinning
                t = th.run_ms()
                time.sleep(0.005)
                if rep >= args.warmup:
                    razor_ms.append(r[1] if args.cpu_time else r[0])
                    torch_ms.append(t[1] if args.cpu_time else t[0])
            rm, tm = statistics.median(razor_ms), statistics.median(torch_ms)
            rows.append((kind, name + suffix, shape_text(kind, numbers), rm, tm, 3 * flops / rm / 1e6,
                         3 * flops / tm / 1e6, tm / rm))
            print(f"{kind:7s} {name + suffix:28s} razor {rm:8.2f} ms  torch {tm:8.2f} ms  razor/torch {tm / rm:5.2f}x",
                  flush=True)
            del th
    razor.close()

    lines = [] if args.append else ["# razor vs PyTorch: GEMM ops, forward + backward", ""]
    lines += [
        f"## {args.threads} thread{'s' if args.threads > 1 else ''}, "
        f"{'process CPU time' if args.cpu_time else 'wall time'}",
        "",
        f"Written by `{' '.join(['/usr/bin/python3', 'bench/op_bench.py'] + sys.argv[1:])}`. "
        f"Each number is the median of {args.reps} forward+backward repetitions after "
        f"{args.warmup} warm-up ones, razor and PyTorch alternating. GFLOP/s = 3 x forward FLOPs / time (for the "
        "stem conv, whose input needs no gradient, the real work is 2 x forward FLOPs on both sides). "
        "razor/PyTorch > 1 means razor is faster." + (" **Times are process CPU time, not wall time.**"
                                                         if args.cpu_time else ""),
        "",
        "PyTorch's convs run on oneDNN. Its `F.linear` calls the BLAS it was built against; Debian's python3-torch "
        "uses the system `libblas.so.3`, which is the unoptimised single-threaded netlib reference BLAS unless "
        "OpenBLAS/BLIS/MKL is installed as the alternative. The linear rows marked *[PyTorch: same GEMM as a "
        "oneDNN 1x1 conv]* time the same product, bias and gradients through `F.conv2d` on (M, in, 1, 1), which "
        "is the fair reference for razor's GEMM on such an install.",
        "",
        machine_line(args.threads, banner, start_load),
        "",
        "| op | layer | shapes | razor ms | PyTorch ms | razor GFLOP/s | PyTorch GFLOP/s | razor/PyTorch |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for kind, name, shape, rm, tm, rg, tg, ratio in rows:
        flag = " (< 0.7x)" if ratio < 0.7 else ""
        lines.append(f"| {kind} | {name} | {shape} | {rm:.2f} | {tm:.2f} | {rg:.1f} | {tg:.1f} | {ratio:.2f}x{flag} |")
    lines.append("")
    end_load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines.append(f"Total bench time {time.time() - t0:.0f} s; load average at the end {end_load:.2f}. A load "
                 f"average above the {args.threads} threads used means other processes shared the cores: the "
                 "absolute times then move a lot between runs, the alternating ratio much less.")
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "a" if args.append else "w") as f:
            f.write(("\n" if args.append else "") + text)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
