#!/usr/bin/python3
"""bench/vrpge/speedup.py -- VR-PGE iteration vs dense iteration, measured in one run with `razor bench`.

For each model: the dense training step (razor bench) and the VR-PGE phase-A iteration at each keep ratio
(razor bench --keep K: both sampled passes, estimator, joint clip, Adam on s, SGD on w, projection; compact
channel execution), in the reference two-backward form and the cheaper one-backward form. Prints a markdown table
of median step times and speedups (dense step_ms / VR-PGE step_ms). docs: docs/vr-pge.md §11.

usage: python3 bench/vrpge/speedup.py [--razor build/razor] [--models resnet32x2,vgg19_bn] [--keeps 0.5,0.3]
                                      [--batch 128] [--threads 2] [--steps 3] [--warmup 1] [--align 0]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import stepbench  # noqa: E402  (bench/stepbench.py: the razor bench runner the step benchmarks share)


def bench(razor, model, extra, a):
    return stepbench.razor_step(razor, model, a.batch, a.threads, a.steps, a.warmup, extra)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--razor", default=stepbench.RAZOR)
    p.add_argument("--models", default="resnet32x2,vgg19_bn")
    p.add_argument("--keeps", default="0.5,0.3")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--align", type=int, default=0)
    a = p.parse_args()
    stepbench.need_razor(a.razor)
    print(f"batch {a.batch}, {a.threads} threads, median of {a.steps} steps after {a.warmup} warm-up"
          + (f", --align {a.align} (changes the algorithm)" if a.align else ""))
    print()
    print("| model | keep | variant | step ms | dense step ms | speedup | sampled MACs / dense (per pass) |")
    print("|---|---|---|---|---|---|---|")
    for model in a.models.split(","):
        dense = bench(a.razor, model, [], a)
        print(f"| {model} | 1 (dense) | dense step | {dense['step_ms']:.0f} | {dense['step_ms']:.0f} | 1.00x | 1 |",
              flush=True)
        for keep in a.keeps.split(","):
            for variant in ([], ["--one-backward"]):
                extra = ["--keep", keep] + variant + (["--align", str(a.align)] if a.align else [])
                j = bench(a.razor, model, extra, a)
                print(f"| {model} | {keep} | {j['variant']} | {j['step_ms']:.0f} | {dense['step_ms']:.0f} | "
                      f"{dense['step_ms'] / j['step_ms']:.2f}x | {j['flops_ratio']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
