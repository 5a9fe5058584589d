#!/usr/bin/python3
"""The PyTorch side of `razor train`: the same recipe, for the accuracy (and speed) comparison in docs/recipes.md.

Same model definitions (scripts/fixtures/ops_models.py, the reference razor's models/ match key for key), same data
(CIFAR-10 binary files read directly), same augmentation (zero-pad 4 + random 32x32 crop, horizontal flip with p 0.5),
same normalisation (CIFAR-10 training-set mean/std), same optimiser and schedule semantics (torch.optim, stepped once
per iteration; onecycle with cycle_momentum=False and pct_start = warmup / epochs; other schedules' warm-up is
LinearLR from lr/10), same epoch line and JSONL fields as razor train. The random streams differ (torch's generator
vs razor's xoshiro), so runs agree in distribution, not bit for bit.

Needs Debian's python3-torch (run with /usr/bin/python3); no torchvision.

  /usr/bin/python3 bench/train_cifar_torch.py --data ../shared/datasets/cifar10 --epochs 30 --nesterov --threads 2 \
      --log runs/torch-resnet20/log.jsonl
  /usr/bin/python3 bench/train_cifar_torch.py --data ../shared/datasets/cifar10 --epochs 1 --steps-per-epoch 20   # smoke
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "fixtures"))
from ops_models import MODELS  # noqa: E402  (the reference definitions)

CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)


def read_cifar10(folder, train):
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] if train else ["test_batch.bin"]
    missing = [n for n in names if not os.path.isfile(os.path.join(folder, n))]
    if missing:
        sys.exit(f"train_cifar_torch: missing {', '.join(missing)} in {folder}; hint: pass the folder holding "
                 "the CIFAR-10 binary files")
    raw = np.concatenate([np.fromfile(os.path.join(folder, n), dtype=np.uint8) for n in names]).reshape(-1, 3073)
    return torch.from_numpy(raw[:, 1:].reshape(-1, 3, 32, 32).copy()), torch.from_numpy(raw[:, 0].astype(np.int64))


def augment(images, gen):
    """images: (B, 3, 32, 32) u8 -> zero-pad 4, random crop back to 32x32 (top then left), flip with p 0.5."""
    B = images.shape[0]
    padded = F.pad(images, (4, 4, 4, 4))
    tops = torch.randint(0, 9, (B,), generator=gen)
    lefts = torch.randint(0, 9, (B,), generator=gen)
    flips = torch.rand(B, generator=gen) < 0.5
    out = torch.empty_like(images)
    for i in range(B):
        crop = padded[i, :, tops[i]:tops[i] + 32, lefts[i]:lefts[i] + 32]
        out[i] = crop.flip(-1) if flips[i] else crop
    return out


def normalize(images_u8, mean, std):
    x = images_u8.float() / 255
    return (x - torch.tensor(mean).view(1, -1, 1, 1)) / torch.tensor(std).view(1, -1, 1, 1)


def make_optimizer(a, params):
    if a.opt == "sgd":
        return torch.optim.SGD(params, lr=a.lr, momentum=a.momentum, weight_decay=a.wd, nesterov=a.nesterov)
    cls = torch.optim.Adam if a.opt == "adam" else torch.optim.AdamW
    return cls(params, lr=a.lr, betas=(a.momentum, 0.999), weight_decay=a.wd)


def make_scheduler(a, opt, spe):
    """Every schedule is stepped once per iteration, as razor train does."""
    S = torch.optim.lr_scheduler
    total = a.epochs * spe
    warmup = round(a.warmup_epochs * spe)
    if a.sched == "onecycle":
        return S.OneCycleLR(opt, max_lr=a.lr, total_steps=total, pct_start=a.warmup_epochs / a.epochs,
                            cycle_momentum=False)
    after = None
    if a.sched == "cosine":
        after = S.CosineAnnealingLR(opt, T_max=max(total - warmup, 1))
    elif a.sched == "step":
        after = S.StepLR(opt, step_size=a.step_size * spe, gamma=a.gamma)
    elif a.sched == "multistep":
        after = S.MultiStepLR(opt, milestones=[m * spe - warmup for m in a.milestones], gamma=a.gamma)
    if warmup > 0:
        warm = S.LinearLR(opt, start_factor=0.1, end_factor=1.0, total_iters=warmup)
        return S.SequentialLR(opt, [warm, after], milestones=[warmup]) if after else warm
    return after


class TapeMeter:
    """Bytes the autograd graph saves (PyTorch keeps them dense), via saved_tensors_hooks; parameters not counted."""

    def __init__(self, params):
        self.params = {p.data_ptr() for p in params}
        self.seen, self.bytes = set(), 0

    def pack(self, t):
        key = (t.storage().data_ptr(), t.storage().nbytes())
        if key[0] not in self.params and key not in self.seen:
            self.seen.add(key)
            self.bytes += key[1]
        return t

    def hooks(self):
        self.seen, self.bytes = set(), 0
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)


def rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def fmt_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


@torch.no_grad()
def evaluate(model, images, labels, batch):
    model.eval()
    loss_sum, correct = 0.0, 0
    for b in range(0, len(labels), batch):
        x = normalize(images[b:b + batch], CIFAR10_MEAN, CIFAR10_STD)
        y = labels[b:b + batch]
        logits = model(x)
        loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
        correct += (logits.argmax(1) == y).sum().item()
    model.train()
    return loss_sum / len(labels), correct / len(labels)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="resnet20", choices=sorted(MODELS))
    p.add_argument("--data", required=True)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--opt", default="sgd", choices=["sgd", "adam", "adamw"])
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--nesterov", action="store_true")
    p.add_argument("--wd", type=float, default=5e-4)
    p.add_argument("--sched", default="onecycle", choices=["onecycle", "cosine", "step", "multistep", "none"])
    p.add_argument("--warmup-epochs", type=float, default=None)
    p.add_argument("--milestones", default="100,150")
    p.add_argument("--step-size", type=int, default=30)
    p.add_argument("--gamma", type=float, default=0.1)
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--clip", type=float, default=0.0)
    p.add_argument("--augment", default="crop+flip", choices=["crop+flip", "none"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log", default="runs/torch/log.jsonl")
    p.add_argument("--eval-every", type=int, default=1)
    p.add_argument("--eval-batch", type=int, default=500)
    p.add_argument("--steps-per-epoch", type=int, default=0)
    a = p.parse_args()
    if a.warmup_epochs is None:
        a.warmup_epochs = 0.3 * a.epochs if a.sched == "onecycle" else 0.0
    a.milestones = [int(m) for m in a.milestones.split(",") if m]

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    train_x, train_y = read_cifar10(a.data, True)
    test_x, test_y = read_cifar10(a.data, False)
    model = MODELS[a.model]()
    opt = make_optimizer(a, model.parameters())
    batches = math.ceil(len(train_y) / a.batch)   # drop_last=False, as razor train
    spe = min(a.steps_per_epoch, batches) if a.steps_per_epoch > 0 else batches
    sched = make_scheduler(a, opt, spe)
    meter = TapeMeter(model.parameters())
    print(f"torch {torch.__version__} | {torch.get_num_threads()} threads")
    print(f"data   cifar10: {len(train_y)} train, {len(test_y)} test images")
    print(f"model  {a.model}: {sum(p.numel() for p in model.parameters())} parameters")
    print(f"train  {a.opt} lr {a.lr:g} momentum {a.momentum:g}{' nesterov' if a.nesterov else ''} wd {a.wd:g} | "
          f"{a.sched} (warm-up {a.warmup_epochs:g} epochs) | {a.epochs} epochs x {spe} steps of {a.batch} | "
          f"augment {a.augment} | label smoothing {a.label_smoothing:g} | clip {a.clip:g} | seed {a.seed}", flush=True)

    os.makedirs(os.path.dirname(a.log) or ".", exist_ok=True)
    log = open(a.log, "w")
    step = 0
    for epoch in range(1, a.epochs + 1):
        gen = torch.Generator().manual_seed(a.seed * 1000003 + epoch - 1)   # order and augmentation from (seed, epoch)
        order = torch.randperm(len(train_y), generator=gen)
        start = time.perf_counter()
        loss_sum, correct, seen, tape, lr = 0.0, 0, 0, 0, opt.param_groups[0]["lr"]
        for s in range(spe):
            idx = order[s * a.batch:(s + 1) * a.batch]
            xb = train_x[idx]
            if a.augment == "crop+flip":
                xb = augment(xb, gen)
            x, y = normalize(xb, CIFAR10_MEAN, CIFAR10_STD), train_y[idx]
            lr = opt.param_groups[0]["lr"]
            opt.zero_grad(set_to_none=True)
            with meter.hooks():
                logits = model(x)
                loss = F.cross_entropy(logits, y, label_smoothing=a.label_smoothing)
            tape = max(tape, meter.bytes)
            if not math.isfinite(loss.item()):
                sys.exit(f"train_cifar_torch: the loss became {loss.item()} at epoch {epoch} step {s + 1}; "
                         "hint: lower --lr or use --clip")
            loss.backward()
            if a.clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
            opt.step()
            if sched:
                sched.step()
            step += 1
            loss_sum += loss.item() * len(y)
            correct += (logits.argmax(1) == y).sum().item()
            seen += len(y)
        seconds = time.perf_counter() - start
        evaluated = epoch == a.epochs or (a.eval_every > 0 and epoch % a.eval_every == 0)
        t0 = time.perf_counter()
        test_loss, test_acc = evaluate(model, test_x, test_y, a.eval_batch) if evaluated else (None, None)
        rec = {"epoch": epoch, "epochs": a.epochs, "step": step, "loss": loss_sum / seen, "train_acc": correct / seen,
               "test_acc": test_acc, "test_loss": test_loss, "lr": lr, "seconds": seconds,
               "eval_seconds": time.perf_counter() - t0, "img_per_s": seen / seconds, "tape_bytes": tape,
               "tape_dense_bytes": tape, "tape_ratio": 1.0 if tape else 0.0, "rss_bytes": rss_bytes(),
               "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
        test = f"{100 * test_acc:.1f}%" if evaluated else "-"
        print(f"epoch {epoch}/{a.epochs}  loss {rec['loss']:.4f}  train {100 * rec['train_acc']:.1f}%  test {test}  "
              f"lr {lr:.3g}  {seconds:.0f} s  {rec['img_per_s']:.0f} img/s  tape {fmt_bytes(tape)} "
              f"(dense {fmt_bytes(tape)}, 1.0x)  rss {fmt_bytes(rec['rss_bytes'])}", flush=True)
        log.write(json.dumps(rec) + "\n")
        log.flush()
    print(f"\nresult  test accuracy {100 * test_acc:.2f}%  |  {rec['img_per_s']:.0f} img/s on {a.threads} threads")


if __name__ == "__main__":
    main()
