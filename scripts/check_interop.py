#!/usr/bin/python3
"""Checks that razor checkpoints and PyTorch state dicts interoperate, using the PyTorch reference definitions of
razor's models (scripts/fixtures/ops_models.py). Needs torch and numpy (Debian: /usr/bin/python3 with python3-torch).

    scripts/check_interop.py PATH [--logits FILE] [--model NAME] [--tol 1e-4]
        PATH is a razor-written model.safetensors (a state dict, nothing else), or a run folder (its
        last/model.safetensors, else its model.safetensors: razor demo's). Loads it, strict, into the PyTorch
        reference model NAME (default: the file's "model" metadata entry, else resnet20), puts it in eval mode and
        compares its logits with razor's: FILE (default: PATH with ".safetensors" replaced by ".logits.safetensors")
        holds "input" (N, C, H, W) and razor's eval-mode "logits" (N, classes), as
        `razor eval --checkpoint RUN --save-logits FILE` writes them. The reference runs in float64 from the float32
        weights. A razor sparse-train export (metadata "widths") is loaded into the reference model built with those
        widths (narrow_model); razor demo's demo-cnn / demo-mlp are defined here (demo_model). razor's ImageNet
        models (resnet18/34/50, mobilenet_v2, vit_b_16, vit_s_16: razor finetune of a torchvision or timm file)
        are compared against torchvision's own definitions (torchvision_model).

Only what Debian ships is used: python3-torch and python3-numpy; safetensors files are read and written by
scripts/fixtures/safetensors_io.py (json + struct + torch), not by the `safetensors` package.

    scripts/check_interop.py --write-torch DIR [--model NAME]
        The other direction: writes DIR/torch_NAME.safetensors, the reference model's state_dict with PyTorch's own
        init and BN running statistics from three train-mode forwards, and DIR/torch_NAME.logits.safetensors with
        a random input and its eval-mode logits (float64 reference, stored as float32). razor's test loads both.

Agreement: |razor - torch| <= tol * (|torch| + max |torch|) for every logit (the scale-relative criterion of
tests/models/test_parity.cpp). Exit status: 0 agree, 1 logits differ, 2 the checkpoint does not load (missing or
unexpected keys, wrong shapes: PyTorch's strict load_state_dict message is printed) or bad usage.
"""
import argparse
import json
import os
import struct
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "fixtures"))
import ops_models as M  # noqa: E402
import safetensors_io  # noqa: E402


def metadata(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)).get("__metadata__", {})


def logits_path(path):
    stem = path[:-len(".safetensors")] if path.endswith(".safetensors") else path
    return stem + ".logits.safetensors"


def eval_logits(model, x):
    """Eval-mode logits in float64 from the float32 weights; the model is returned to float32 unchanged."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    model.eval().double()
    with torch.no_grad():
        logits = model(x.double())
    model.float().load_state_dict(state)
    return logits


def interop_model(make, seed, batch_shape):
    """A reference model with PyTorch's init (seeded) and BN running statistics from three train-mode forwards on
    random batches (num_batches_tracked = 3), so the buffers a checkpoint carries all matter in eval mode."""
    torch.manual_seed(seed)
    model = make()
    g = torch.Generator().manual_seed(seed + 1)
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(batch_shape, generator=g) * 2 + 0.5)
    return model.eval()


RESNET_DEPTH = {"resnet20": (3, "A", (16, 32, 64)), "resnet32": (5, "A", (16, 32, 64)),
                "resnet56": (9, "A", (16, 32, 64)), "resnet32x2": (5, "B", (32, 64, 128))}


def narrow_model(name, widths, classes):
    """The reference model with razor's ModelOptions::widths (out-channels of every masked conv, in order)."""
    if name in ("vgg16_bn", "vgg19_bn"):
        it = iter(widths)
        return M.VGG([v if v == "M" else next(it) for v in (M.VGG16 if name == "vgg16_bn" else M.VGG19)],
                     classes=classes)
    n, option, _ = RESNET_DEPTH[name]
    stage, mids, i = [], [], 1
    for s in range(3):
        for b in range(n):
            mids.append(widths[i])
            if b == 0:
                stage.append(widths[i + 1])
            i += 2 + (1 if option == "B" and b == 0 and s > 0 else 0)
    return M.ResNet(n, tuple(stage), option, classes=classes, mids=mids)


def demo_model(name, meta):
    """razor demo's models (apps/demo_model.h): Sequential keys 0.weight, 1.running_mean, ..."""
    classes, channels, size = (int(meta.get(k, d)) for k, d in
                               (("num_classes", "10"), ("in_channels", "1"), ("image_size", "28")))
    nn = torch.nn
    if name == "demo-cnn":
        return nn.Sequential(nn.Conv2d(channels, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64),
                             nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * (size // 4) ** 2, classes))
    hidden = int(meta.get("hidden", "256"))
    return nn.Sequential(nn.Flatten(), nn.Linear(channels * size * size, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def with_classes(model, classes):
    """The reference model with its classifier (the last Linear) resized to `classes` outputs: a fine-tune on a class
    subset, or CIFAR-100, has a head of another size than the reference's 10."""
    last = None
    for qualified, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            last = qualified, module
    if last is None or last[1].out_features == classes:
        return model
    qualified, head = last
    parent = model.get_submodule(qualified.rpartition(".")[0]) if "." in qualified else model
    setattr(parent, qualified.rpartition(".")[2], torch.nn.Linear(head.in_features, classes, bias=head.bias is not None))
    return model


TORCHVISION = ("resnet18", "resnet34", "resnet50", "mobilenet_v2", "vit_b_16", "vit_s_16")


def torchvision_model(name, classes, meta, state):
    """torchvision's definition of a razor ImageNet model with `classes` outputs. The ViTs are built from
    VisionTransformer at the checkpoint's image size, with as many blocks as its keys hold (vit_s_16: ViT-S/16
    widths, which torchvision does not name)."""
    import torchvision
    if not name.startswith("vit"):
        return getattr(torchvision.models, name)(num_classes=classes)
    layers = 1 + max(int(k.split(".")[2].rsplit("_", 1)[1]) for k in state if k.startswith("encoder.layers."))
    hidden = state["class_token"].shape[-1]
    return torchvision.models.VisionTransformer(image_size=int(meta.get("image_size", "224")), patch_size=16,
                                                num_layers=layers, num_heads=12 if hidden == 768 else 6,
                                                hidden_dim=hidden, mlp_dim=4 * hidden, num_classes=classes)


def model_file(path):
    """A run folder's weights: last/model.safetensors, else model.safetensors (razor demo writes it at the top)."""
    if not os.path.isdir(path):
        return path
    for candidate in ("last/model.safetensors", "model.safetensors"):
        if os.path.exists(os.path.join(path, candidate)):
            return os.path.join(path, candidate)
    return os.path.join(path, "last/model.safetensors")


def worst_error(got, ref):
    """max over elements of |got - ref| / (|ref| + max |ref|)."""
    got, ref = got.double().flatten(), ref.double().flatten()
    scale = ref.abs().max()
    return float(((got - ref).abs() / (ref.abs() + scale + 1e-30)).max())


def check(path, model_name, tol, logits_file=None):
    path = model_file(path)
    if not os.path.exists(path):
        print(f"check_interop: {path} does not exist; hint: pass a razor model.safetensors or a run folder",
              file=sys.stderr)
        return 2
    meta = metadata(path)
    name = model_name or meta.get("model", "resnet20")
    if name not in M.MODELS and name not in ("demo-cnn", "demo-mlp") and name not in TORCHVISION:
        print(f"check_interop: unknown model '{name}'; expected one of {', '.join(M.MODELS)}, demo-cnn, demo-mlp, "
              f"{', '.join(TORCHVISION)}", file=sys.stderr)
        return 2
    widths = meta.get("widths", "")
    classes = int(meta.get("num_classes", "10"))
    state = safetensors_io.load(path)
    label = name
    if name in ("demo-cnn", "demo-mlp"):
        model = demo_model(name, meta)
    elif name in TORCHVISION:
        model, label = torchvision_model(name, classes, meta, state), f"{name} (torchvision)"
    elif widths:
        model = narrow_model(name, [int(w) for w in widths.split(",")], classes)
    else:
        model = with_classes(M.MODELS[name](), classes)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        print(f"check_interop: {path} does not load into the PyTorch {name}: {e}", file=sys.stderr)
        return 2
    io_path = logits_file or logits_path(path)
    if not os.path.exists(io_path):
        print(f"check_interop: expected razor's logits in {io_path}; hint: razor eval --checkpoint RUN "
              f"--save-logits {io_path}", file=sys.stderr)
        return 2
    io = safetensors_io.load(io_path)
    ref = eval_logits(model, io["input"])
    if tuple(ref.shape) != tuple(io["logits"].shape):
        print(f"check_interop: logits shape: razor {tuple(io['logits'].shape)}, torch {tuple(ref.shape)}", file=sys.stderr)
        return 1
    err = worst_error(io["logits"], ref)
    verdict = "agree" if err <= tol else "DIFFER"
    print(f"check_interop: {label} from {path}: {len(model.state_dict())} tensors loaded strict; logits {verdict}, "
          f"worst relative error {err:.2e} (tolerance {tol:g})")
    return 0 if err <= tol else 1


def write_torch(directory, model_name):
    name = model_name or "resnet20"
    shape = (4, 1, 28, 28) if name == "lenet5_1x28x28" else (4, 3, 32, 32)
    model = interop_model(M.MODELS[name], 20, (16,) + shape[1:])
    x = torch.randn(shape, generator=torch.Generator().manual_seed(21))
    os.makedirs(directory, exist_ok=True)
    target = os.path.join(directory, f"torch_{name}.safetensors")
    safetensors_io.save(target, model.state_dict(), {"model": name, "torch": torch.__version__})
    safetensors_io.save(logits_path(target), {"input": x, "logits": eval_logits(model, x)})
    print(f"check_interop: wrote {target} ({sum(t.numel() for t in model.state_dict().values())} values) and its logits")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", nargs="?", help="razor-written model.safetensors")
    parser.add_argument("--model", help="reference model name (default: the file's metadata, else resnet20)")
    parser.add_argument("--logits", help="razor's input and logits (razor eval --save-logits FILE)")
    parser.add_argument("--tol", type=float, default=1e-4)
    parser.add_argument("--write-torch", metavar="DIR", help="write a PyTorch checkpoint + logits for razor instead")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.write_torch:
        return write_torch(args.write_torch, args.model)
    if not args.path:
        parser.print_usage(sys.stderr)
        return 2
    return check(args.path, args.model, args.tol, args.logits)


if __name__ == "__main__":
    sys.exit(main())
