#!/usr/bin/python3
"""How far attention's input gradients move when its saved operands are stored in fewer bits, in PyTorch, offline.

Attention O = softmax(S) V with S = Q K^T (Q already scaled by 1/sqrt(d)) has the backward
    dV = P^T dO,   dP = dO V^T,   dS = P * (dP - rowsum(dP * P)),   dQ = dS K,   dK = dS^T Q,
so it needs Q, K, V and P. razor's `--razor-attn int8` keeps all four as dense int8 with one affine code per sample
(sparse/dense_coded.h). The alternative is to keep Q, K and V only and recompute P from them in backward, which
drops P's B * h * N^2 bytes (vit_b_16 at 224 px: 455 KiB per image and block, half of the attention's tape) but
puts the error of Q's and K's codes through the exponential. This script measures the relative error of dQ, dK and
dV against the fp32 backward for:
    int8 P stored        Q, K, V, P as per-sample int8 (what razor does today)
    recompute, i8        P recomputed from the same per-sample int8 Q and K
    recompute, i8 row    P recomputed from int8 Q and K with one affine code per row of d (per token and head)
    recompute, f16       P recomputed from fp16 Q and K (V per-sample int8)
on synthetic heads of three sharpnesses (the mean row entropy of P is printed next to log N, the uniform row's),
and prints the stored bytes per image and block of each form for vit_b_16 at 224 px and razor's vit_tiny at 32 px.
It is a proxy for training accuracy, not a substitute: an accuracy claim needs a fine-tune (scripts/transfer.sh).

  /usr/bin/python3 bench/backrazor/attention_saved_forms.py          # seconds; no razor build needed
"""
import torch


def int8_per_sample(x):
    """Affine int8 over everything but dim 0, one (lo, step) per sample, as sparse/dense_coded.h stores it."""
    flat = x.reshape(x.shape[0], -1)
    lo, hi = flat.min(1, keepdim=True).values, flat.max(1, keepdim=True).values
    step = ((hi - lo) / 255).clamp_min(1e-30)
    return (lo + torch.round((flat - lo) / step) * step).reshape(x.shape)


def int8_per_row(x):
    """Affine int8 with one (lo, step) per row of the last dim."""
    lo, hi = x.min(-1, keepdim=True).values, x.max(-1, keepdim=True).values
    step = ((hi - lo) / 255).clamp_min(1e-30)
    return lo + torch.round((x - lo) / step) * step


def fp16(x):
    return x.half().float()


def attention_grads(q, k, v, g, p=None):
    """dQ, dK, dV of O = softmax(q k^T) v for upstream g; p given = the stored P, else recomputed from q and k."""
    if p is None:
        p = torch.softmax(q @ k.transpose(-1, -2), -1)
    dv = p.transpose(-1, -2) @ g
    dp = g @ v.transpose(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ds @ k, ds.transpose(-1, -2) @ q, dv


def relative_error(got, want):
    return ((got - want).norm() / want.norm()).item()


def synthetic_heads(batch, heads, tokens, d, sharpness):
    """q (already scaled), k, v, upstream g; `sharpness` scales the scores. Uneven channel scales and a few outlier
    channels in k, as trained projections have, so a per-sample code is coarser than a per-row one."""
    q = torch.randn(batch, heads, tokens, d) * sharpness / d ** 0.5 * (1 + 3 * torch.rand(batch, 1, 1, d))
    k = torch.randn(batch, heads, tokens, d) * sharpness / d ** 0.5
    k[..., :4] *= 4
    return q, k, torch.randn(batch, heads, tokens, d), torch.randn(batch, heads, tokens, d)


def main():
    torch.manual_seed(0)
    batch, heads, tokens, d = 8, 12, 197, 64
    forms = {
        "int8 P stored": lambda q, k, v, g, p: attention_grads(int8_per_sample(q), int8_per_sample(k),
                                                               int8_per_sample(v), g, int8_per_sample(p)),
        "recompute, i8": lambda q, k, v, g, p: attention_grads(int8_per_sample(q), int8_per_sample(k),
                                                               int8_per_sample(v), g),
        "recompute, i8 row": lambda q, k, v, g, p: attention_grads(int8_per_row(q), int8_per_row(k),
                                                                   int8_per_sample(v), g),
        "recompute, f16": lambda q, k, v, g, p: attention_grads(fp16(q), fp16(k), int8_per_sample(v), g),
    }
    print(f"relative error of dQ / dK / dV against the fp32 backward; batch {batch}, {heads} heads, "
          f"{tokens} tokens, d = {d}")
    print(f"| saved form | " + " | ".join(f"sharpness {s}" for s in (1, 2, 4)) + " |")
    print("|---|---|---|---|")
    rows = {name: [] for name in forms}
    header = []
    for sharpness in (1.0, 2.0, 4.0):
        q, k, v, g = synthetic_heads(batch, heads, tokens, d, sharpness)
        p = torch.softmax(q @ k.transpose(-1, -2), -1)
        entropy = -(p * p.clamp_min(1e-30).log()).sum(-1).mean().item()
        header.append(f"entropy {entropy:.2f}, max P {p.max(-1).values.mean().item():.2f}")
        exact = attention_grads(q, k, v, g, p)
        for name, form in forms.items():
            got = form(q, k, v, g, p)
            rows[name].append(" / ".join(f"{relative_error(a, b):.3f}" for a, b in zip(got, exact)))
    print(f"| (P's rows; uniform: entropy {torch.log(torch.tensor(float(tokens))).item():.2f}) | "
          + " | ".join(header) + " |")
    for name, cells in rows.items():
        print(f"| {name} | " + " | ".join(cells) + " |")

    print("\nstored bytes per image and block (Q, K, V and P; codes' scales included)")
    print("| model | int8 P stored | recompute, i8 | recompute, i8 row | recompute, f16 |")
    print("|---|---:|---:|---:|---:|")
    for model, h, n, dh in (("vit_b_16, 224 px", 12, 197, 64), ("vit_tiny, 32 px", 3, 65, 64)):
        qkv = h * n * dh
        sizes = (3 * qkv + h * n * n + 4 * 8, 3 * qkv + 3 * 8, 3 * qkv + 2 * h * n * 8 + 8, 2 * 2 * qkv + qkv + 8)
        print(f"| {model} | " + " | ".join(f"{s / 1024:.0f} KiB" for s in sizes) + " |")


if __name__ == "__main__":
    main()
