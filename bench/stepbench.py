#!/usr/bin/python3
"""bench/stepbench.py -- what the training-step benchmarks share: razor's step, PyTorch's step, the machine line.

Used by bench/vs_torch.py (razor vs PyTorch, docs/benchmarks.md), bench/backrazor/compare.py (Back Razor tape vs
dense, docs/back-razor.md) and bench/vrpge/speedup.py (VR-PGE iteration vs dense, docs/vr-pge.md).

  razor_step(...)   runs `razor bench --json` in a fresh process and returns its JSON line (step_ms is the median of
                    --steps timed steps after --warmup untimed ones; see apps/bench.cpp)
  torch_step(...)   runs the same step in PyTorch in a fresh process (this file with --torch-worker) and returns a
                    JSON line with the same fields: the model twin from scripts/fixtures/ops_models.py (razor's key
                    names and shapes), N(0, 1) images of (batch, 3, 32, 32), uniform labels,
                    zero_grad(set_to_none) + cross_entropy + backward + SGD(lr 0.01, momentum 0.9, Nesterov,
                    weight decay 5e-4): exactly what `razor bench` times
  torch_sgemm_cmd   torch.mm of two (S, S) float32 matrices, for the sgemm peak (bench/vs_torch.py)
  machine_line(...) the CPU model, hardware threads, load averages, PyTorch version and razor's build banner

Every step runs in its own process so one side's allocator state, OpenMP thread pool or page cache never helps the
other; the callers alternate the two sides so both see the same background load.
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

ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
RAZOR = os.path.join(ROOT, "build", "razor")
MiB = 1024.0 * 1024.0
# the optimizer razor bench uses (apps/bench.cpp); torch_worker builds the same
SGD = dict(lr=0.01, momentum=0.9, weight_decay=5e-4, nesterov=True)
SGD_TEXT = "SGD (lr 0.01, momentum 0.9, Nesterov, weight decay 5e-4)"


def run_json(cmd, what=None):
    """Runs cmd, returns the JSON object on its last stdout line; exits naming the command on failure."""
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{what or os.path.basename(sys.argv[0])}: {' '.join(cmd)} failed ({out.returncode}):\n"
                 f"{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def need_razor(razor):
    if not os.path.exists(razor):
        sys.exit(f"{razor} not found; build it first (cmake --build build --target razor)")


def razor_cmd(razor, model, batch, threads, steps, warmup, extra=(), image_size=32):
    return [razor, "bench", "--json", "--model", model, "--batch", str(batch), "--threads", str(threads),
            "--steps", str(steps), "--warmup", str(warmup), "--image-size", str(image_size)] + list(extra)


def razor_step(razor, model, batch, threads, steps, warmup, extra=()):
    """razor bench --json for one model (extra: --razor R --razor-values V, --keep K, ...)."""
    return run_json(razor_cmd(razor, model, batch, threads, steps, warmup, extra))


def torch_cmd(model, batch, threads, steps, warmup, seed=0, image_size=32, extra=()):
    """extra: --from FILE, --classes K, --freeze-bn (the fine-tuning step of bench/finetune_vs_torch.py)."""
    return [sys.executable, os.path.abspath(__file__), "--torch-worker", "--model", model, "--batch", str(batch),
            "--threads", str(threads), "--steps", str(steps), "--warmup", str(warmup), "--seed", str(seed),
            "--image-size", str(image_size)] + list(extra)


def torch_step(model, batch, threads, steps, warmup, seed=0):
    """The same step in PyTorch, in a fresh process."""
    return run_json(torch_cmd(model, batch, threads, steps, warmup, seed))


def torch_sgemm_cmd(size, threads, reps):
    return [sys.executable, os.path.abspath(__file__), "--torch-sgemm", str(size), "--threads", str(threads),
            "--steps", str(reps)]


def razor_banner(razor, threads):
    """razor's start-up banner (build type, OpenMP threads, ISA): the first line of a tiny non-JSON bench."""
    out = subprocess.run([razor, "bench", "--model", "mlp", "--batch", "2", "--steps", "1", "--warmup", "0",
                          "--threads", str(threads)], capture_output=True, text=True)
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "?"


def cpu_model():
    """The CPU as lscpu names it, with its family/model numbers and widest vector ISA: virtual machines often show
    only "AMD EPYC", and the numbers (family 25 = Zen 3/4, 26 = Zen 5) and the ISA are what make figures comparable."""
    fields = {}
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    except OSError:
        pass
    name = fields.get("Model name") or platform.processor() or platform.machine()
    flags = set(fields.get("Flags", "").split())
    isa = ("AVX-512" if "avx512f" in flags else "AVX2, no AVX-512" if "avx2" in flags else
           "no AVX2" if flags else None)
    details = [f"family {fields['CPU family']} model {fields['Model']}"] if "CPU family" in fields and "Model" in fields else []
    if isa:
        details.append(isa)
    return f"{name} ({'; '.join(details)})" if details else name


def load_average():
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def machine_line(threads, load_start, load_end, torch_version, banner):
    return (f"Machine: {cpu_model()}, {os.cpu_count()} hardware threads, {threads} threads used by each side; "
            f"load average (1 min) {load_start:.2f} at the start and {load_end:.2f} at the end. "
            f"PyTorch {torch_version}. razor: {banner}")


def median(values):
    return statistics.median(values)


def write_between_markers(path, key, text):
    """Replaces the block between <!-- KEY begin --> and <!-- KEY end --> in path (appends it if absent), atomically."""
    begin, end = f"<!-- {key} begin -->", f"<!-- {key} end -->"
    doc = open(path).read() if os.path.exists(path) else ""
    block = f"{begin}\n{text}\n{end}"
    if begin in doc and end in doc:
        doc = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, doc, flags=re.S)
    else:
        doc = doc.rstrip("\n") + ("\n\n" if doc else "") + block + "\n"
    with open(path + ".tmp", "w") as f:
        f.write(doc)
    os.replace(path + ".tmp", path)


def torch_model(name, image_size, cifar_models, classes=10):
    """The PyTorch twin of razor's `name`: the CIFAR zoo's from scripts/fixtures/ops_models.py, torchvision's ImageNet
    families (10 classes, as razor bench's default) from torchvision.models; vit_s_16 is torchvision's
    VisionTransformer at ViT-S/16's widths (timm's vit_small_patch16_224 layout), as razor builds it."""
    if name in cifar_models:
        return cifar_models[name]()
    import torchvision
    if name == "vit_s_16":
        return torchvision.models.VisionTransformer(image_size=image_size, patch_size=16, num_layers=12, num_heads=6,
                                                    hidden_dim=384, mlp_dim=1536, num_classes=classes)
    if name.startswith("vit_"):
        return torchvision.models.__dict__[name](num_classes=classes, image_size=image_size)
    return torchvision.models.__dict__[name](num_classes=classes)


def replace_head(model, classes):
    """A fresh nn.Linear head of `classes` outputs in place of the classifier (torchvision's fc, classifier[-1],
    heads.head), as a fine-tune does."""
    import torch
    for parent in reversed(list(model.modules())):
        for name, child in reversed(list(parent.named_children())):
            if isinstance(child, torch.nn.Linear):
                setattr(parent, name, torch.nn.Linear(child.in_features, classes))
                return
    raise SystemExit("stepbench.py: the model has no nn.Linear head to replace")


def torch_worker(args):
    """One PyTorch step benchmark in this process; prints one JSON line with razor bench's fields."""
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(ROOT, "scripts", "fixtures"))
    from ops_models import MODELS

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args.from_file:   # a torchvision state dict (bench/finetune_vs_torch.py writes it); head re-initialised below
        state = torch.load(args.from_file, map_location="cpu")
        file_classes = [v for k, v in state.items() if k.endswith("weight") and v.dim() == 2][-1].shape[0]
        model = torch_model(args.model, args.image_size, MODELS, file_classes)
        model.load_state_dict(state)
        del state
    else:
        model = torch_model(args.model, args.image_size, MODELS)
    if args.classes != 10 or args.from_file:
        replace_head(model, args.classes)
    model.train()
    if args.freeze_bn:   # as razor's --freeze-bn: eval-mode BN, affine parameters not trained
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.eval()
                m.weight.requires_grad_(False)
                m.bias.requires_grad_(False)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], **SGD)
    x = torch.randn(args.batch, 3, args.image_size, args.image_size)
    y = torch.randint(0, args.classes, (args.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    # Saved bytes: one step with pack hooks (not timed). Parameters are held by the model anyway (razor counts its
    # references as 0 bytes); a storage saved by several nodes is counted once, as razor's tape does.
    params = {p.data_ptr() for p in model.parameters()}
    seen, saved = set(), [0]

    def storage(t):
        return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()

    def pack(t):
        if t.data_ptr() not in params and storage(t).data_ptr() not in seen:
            seen.add(storage(t).data_ptr())
            saved[0] += storage(t).nbytes()
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
    print(json.dumps({"model": args.model, "batch": args.batch, "threads": torch.get_num_threads(),
                      "params": sum(p.numel() for p in model.parameters()),
                      "step_ms": statistics.median(ms), "step_ms_min": min(ms), "step_ms_max": max(ms),
                      "img_per_s": args.batch / (statistics.median(ms) / 1000),
                      "saved_bytes": saved[0], "saved_dense_bytes": saved[0],
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "torch": torch.__version__}))


def torch_sgemm(args):
    """torch.mm of two (S, S) float32 matrices (the BLAS PyTorch was built against); prints razor_op_bench --sgemm's
    JSON fields: the median of --steps products after one warm-up."""
    import torch
    torch.set_num_threads(args.threads)
    n = args.torch_sgemm
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    c = torch.empty(n, n)
    torch.mm(a, b, out=c)
    ms = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        torch.mm(a, b, out=c)
        ms.append(1000 * (time.perf_counter() - t0))
    m = statistics.median(ms)
    print(json.dumps({"n": n, "threads": torch.get_num_threads(), "ms": m, "gflops": 2.0 * n ** 3 / m / 1e6,
                      "torch": torch.__version__}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--torch-worker", action="store_true", help="time PyTorch's step in this process (JSON line)")
    ap.add_argument("--torch-sgemm", type=int, default=0, metavar="S", help="time torch.mm of (S, S) matrices instead")
    ap.add_argument("--model", default="resnet20")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--from", dest="from_file", default="", help="load this torchvision state dict (.pth) first")
    ap.add_argument("--freeze-bn", action="store_true", help="BatchNorm in eval mode, weight and bias not trained")
    args = ap.parse_args()
    if args.torch_sgemm > 0:
        return torch_sgemm(args)
    if not args.torch_worker:
        ap.error("this module is imported by the bench scripts; run it directly with --torch-worker or --torch-sgemm")
    torch_worker(args)


if __name__ == "__main__":
    main()
