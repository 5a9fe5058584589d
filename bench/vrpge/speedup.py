#!/usr/bin/python3
"""bench/vrpge/speedup.py -- VR-PGE iteration vs dense iteration, measured in one run with `razor bench`.

For each model: the dense training step (razor bench) and the VR-PGE phase-A iteration at each keep ratio
(razor bench --keep K: both sampled passes, estimator, joint clip, Adam on s, SGD on w, projection; compact
channel execution), in the reference two-backward form and the cheaper one-backward form, and with
--resample-every N (the seed's strategy: the structure update and a fresh subnetwork every N steps, one compact pass
on the steps between) for each N > 1 of --resample-every, timed over whole intervals and reported per step; with
--masks conv,stream each VR-PGE row of a ResNet runs with the reference's per-conv masks and with --stream-masks (one
mask per residual stream, not the reference).
Prints a markdown table of median step times and speedups (dense step_ms / VR-PGE step_ms). docs: docs/vr-pge.md §9.

usage: python3 bench/vrpge/speedup.py [--razor build/razor] [--models resnet32x2,vgg19_bn] [--keeps 0.5,0.3]
                                      [--batch 128] [--threads 2] [--steps 3] [--warmup 1] [--align 0]
                                      [--resample-every 1,10,50]   (--steps/--warmup then count whole intervals)
                                      [--masks conv,stream]
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
    p.add_argument("--resample-every", default="1", help="comma-separated N; N > 1 rows use the reference variant")
    p.add_argument("--masks", default="conv", help="comma-separated: conv (the reference, one mask per conv) and/or "
                   "stream (--stream-masks: one per residual stream; ResNets only)")
    a = p.parse_args()
    stepbench.need_razor(a.razor)
    print(f"batch {a.batch}, {a.threads} threads, median of {a.steps} steps after {a.warmup} warm-up"
          + (f", --align {a.align} (changes the algorithm)" if a.align else ""))
    print()
    print("| model | keep | masks | resample every | variant | step ms | dense step ms | speedup | "
          "sampled MACs / dense (per pass) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model in a.models.split(","):
        dense = bench(a.razor, model, [], a)
        print(f"| {model} | 1 (dense) | | | dense step | {dense['step_ms']:.0f} | {dense['step_ms']:.0f} | 1.00x | 1 |",
              flush=True)
        masks = [m for m in a.masks.split(",") if m == "conv" or model.startswith("resnet")]
        for keep in a.keeps.split(","):
            for mask in masks:
                for n in (int(v) for v in a.resample_every.split(",")):
                    for variant in (([], ["--one-backward"]) if n == 1 else ([],)):
                        extra = ["--keep", keep] + variant + (["--align", str(a.align)] if a.align else [])
                        extra += ["--resample-every", str(n)] if n > 1 else []
                        extra += ["--stream-masks"] if mask == "stream" else []
                        j = bench(a.razor, model, extra, a)
                        step = j["step_ms"]   # with N > 1: the median interval's time / N (razor bench)
                        print(f"| {model} | {keep} | {'per stream' if mask == 'stream' else 'per conv'} | {n} | "
                              f"{j['variant']} | {step:.0f} | {dense['step_ms']:.0f} | {dense['step_ms'] / step:.2f}x | "
                              f"{j['flops_ratio']:.3f} |", flush=True)

if __name__ == "__main__":
    main()
