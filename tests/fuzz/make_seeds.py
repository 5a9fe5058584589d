#!/usr/bin/env python3
"""tests/fuzz/make_seeds.py -- writes the committed seed corpus of every fuzz target (tests/fuzz/corpus/<target>/).

Seeds are small valid inputs (and a few near-misses) so that libFuzzer starts inside each format instead of
guessing magic numbers. Plain python3 (no torch, no PIL); the JPEG seeds are encoded by stb_image_write from
Debian's libstb-dev through a throwaway C program (needs cc). Run from the repository root:
    python3 tests/fuzz/make_seeds.py
The regress-* files next to the seeds are inputs the fuzzers found (crashes, since fixed), kept as they were found;
this script leaves them alone, and `bash scripts/fuzz.sh --smoke` replays them with the seeds.
"""
import gzip
import json
import os
import struct
import subprocess
import tempfile
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    os.makedirs(os.path.join(ROOT, target), exist_ok=True)
    with open(os.path.join(ROOT, target, name), "wb") as f:
        f.write(data)


def safetensors(entries, metadata=None):
    header, blob = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, data) in entries.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    js = json.dumps(header, separators=(",", ":")).encode()
    js += b" " * (-len(js) % 8)
    return struct.pack("<Q", len(js)) + js + blob


def idx(dims, data):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data)


def png(width, height, color_type, rows):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    raw = b"".join(b"\x00" + bytes(r) for r in rows)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def jpegs():
    src = r'''
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
int main(int argc, char** argv) {
    unsigned char px[8 * 6 * 3];
    for (int i = 0; i < 8 * 6 * 3; ++i) px[i] = (unsigned char)(i * 37);
    stbi_write_jpg(argv[1], 8, 6, 3, px, 90);
    stbi_write_jpg(argv[2], 5, 3, 1, px, 50);
    return 0;
}
'''
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "w.c"), "w") as f:
            f.write(src)
        subprocess.check_call(["cc", "-O1", "-o", os.path.join(d, "w"), os.path.join(d, "w.c"), "-lm"])
        a, b = os.path.join(d, "rgb.jpg"), os.path.join(d, "grey.jpg")
        subprocess.check_call([os.path.join(d, "w"), a, b])
        return open(a, "rb").read(), open(b, "rb").read()


def main():
    f32 = struct.pack("<4f", 1.0, -2.5, 3.0, 0.0)
    put("safetensors", "two_tensors", safetensors({"w": ("F32", [2, 2], f32), "i": ("I64", [1], struct.pack("<q", 7))},
                                                  {"format": "pt"}))
    put("safetensors", "u8_scalar_empty", safetensors({"s": ("U8", [], b"\x05"), "e": ("F32", [0, 3], b"")}))
    put("safetensors", "f16_bf16", safetensors({"h": ("F16", [2], b"\x00\x3c\x00\x3c"), "b": ("BF16", [1], b"\x80\x3f")}))
    put("safetensors", "bad_dtype", safetensors({"h": ("C64", [1], b"\x00" * 8)}))

    put("idx", "labels", idx([5], [0, 1, 2, 9, 4]))
    put("idx", "images", idx([2, 3, 4], range(24)))
    put("idx", "rank4", idx([1, 2, 1, 2], [7, 8, 9, 10]))
    put("idx", "truncated", idx([3, 3], range(5)))

    put("idx_gz", "labels.gz", gzip.compress(idx([5], [0, 1, 2, 9, 4]), mtime=0))
    put("idx_gz", "images.gz", gzip.compress(idx([2, 3, 4], range(24)), mtime=0))
    two = idx([4], [1, 2, 3, 4])
    put("idx_gz", "two_members.gz", gzip.compress(two[:6], mtime=0) + gzip.compress(two[6:], mtime=0))

    pixels = bytes((i * 7) % 256 for i in range(3072))
    put("cifar", "cifar10_two", b"\x00" + b"\x03" + pixels + b"\x09" + pixels[::-1])
    put("cifar", "cifar100_one", b"\x01" + b"\x13\x63" + pixels)
    put("cifar", "cifar10_bad_label", b"\x00" + b"\x0a" + pixels)

    # The first byte is the options byte (bit 0: RGB, bit 1: resize, bits 4-7: size - 1).
    put("image", "png_grey", b"\x00" + png(3, 2, 0, [[0, 128, 255], [10, 20, 30]]))
    put("image", "png_rgb_resize", b"\x33" + png(2, 2, 2, [[255, 0, 0, 0, 255, 0], [0, 0, 255, 9, 9, 9]]))
    put("image", "png_rgba", b"\x01" + png(1, 2, 6, [[1, 2, 3, 4], [5, 6, 7, 8]]))
    put("image", "png_grey_alpha", b"\x01" + png(2, 1, 4, [[1, 2, 3, 4]]))
    rgb, grey = jpegs()
    put("image", "jpg_rgb", b"\x01" + rgb)
    put("image", "jpg_grey_resize", b"\x72" + grey)

    for name, argv in {"flags": ["--epochs", "3", "--lr=0.01", "--verbose"],
                       "equals_bool": ["--resume=false", "--data=/tmp/x", "--out", "a.safetensors"],
                       "help": ["-h", "--epochs=12abc"],
                       "missing_value": ["--lr"],
                       "unknown": ["--nope", "x"]}.items():
        put("args", name, b"\x00".join(a.encode() for a in argv))

    # train_state: byte 0 = optimizer (bits 0-1) | schedule << 2 (bits 2-4) | warm-up << 5, then the file, with the
    # entries razor train writes for a Linear(2, 3) ("fc.weight", "fc.bias"); fuzz_train_state.cpp.
    for name, (selector, state) in train_states().items():
        put("train_state", name, bytes([selector]) + state)


def f64(x):
    return ("I64", [], struct.pack("<d", x))


def i64(*values, shape=None):
    return ("I64", [] if shape is None and len(values) == 1 else (shape or [len(values)]),
            b"".join(struct.pack("<q", v) for v in values))


def f32(shape, values):
    return ("F32", shape, b"".join(struct.pack("<f", v) for v in values))


def train_states():
    base = {"epoch": i64(3), "step": i64(30), "best_epoch": i64(2), "best_test_acc": f64(0.625),
            "rng.default": i64(1, 2, 3, 4), "rng.init": i64(5, 6, 7, 8), "loader.seed": i64(0), "loader.epoch": i64(3)}
    config = {"config": json.dumps({"model": "mlp", "epochs": "10", "lr": "0.1", "sched": "cosine"}), "pair": "1-2-3"}
    w, b = ([0.5, -0.25, 1, 2, -3, 0.125], [0.1, 0.2, 0.3])
    sgd = {"optimizer.fc.weight.momentum_buffer": f32([3, 2], w), "optimizer.fc.bias.momentum_buffer": f32([3], b),
           "optimizer.param_groups.0.lr": f64(0.05), "optimizer.param_groups.0.momentum": f64(0.9),
           "optimizer.param_groups.0.dampening": f64(0), "optimizer.param_groups.0.weight_decay": f64(5e-4),
           "optimizer.param_groups.0.nesterov": f64(1)}
    adam = {"optimizer.fc.weight.step": i64(30), "optimizer.fc.weight.exp_avg": f32([3, 2], w),
            "optimizer.fc.weight.exp_avg_sq": f32([3, 2], [abs(x) for x in w]), "optimizer.fc.bias.step": i64(30),
            "optimizer.fc.bias.exp_avg": f32([3], b), "optimizer.fc.bias.exp_avg_sq": f32([3], b),
            "optimizer.param_groups.0.lr": f64(1e-3), "optimizer.param_groups.0.beta1": f64(0.9),
            "optimizer.param_groups.0.beta2": f64(0.999), "optimizer.param_groups.0.eps": f64(1e-8),
            "optimizer.param_groups.0.weight_decay": f64(0), "optimizer.param_groups.0.amsgrad": f64(0)}
    sched = {"scheduler.last_epoch": i64(30), "scheduler.base_lrs.0": f64(0.1)}
    warm = {"scheduler.last_epoch": i64(30), "scheduler.base_lrs.0": f64(0.1), "scheduler.after.last_epoch": i64(20),
            "scheduler.after.base_lrs.0": f64(0.1)}
    return {
        "sgd_onecycle": (0 | 0 << 2, safetensors({**base, **sgd, **sched}, config)),
        "sgd_cosine_warmup": (0 | 1 << 2 | 1 << 5, safetensors({**base, **sgd, **warm}, config)),
        "adam_step": (2 | 2 << 2, safetensors({**base, **adam, **sched}, config)),
        "adamw_multistep": (3 | 3 << 2, safetensors({**base, **adam, **sched}, config)),
        "sgd_plain_none": (1 | 4 << 2, safetensors({**base, **{k: v for k, v in sgd.items() if "buffer" not in k}},
                                                   {"config": "{\"lr\": 0.1}"})),
        "missing_rng": (0, safetensors({k: v for k, v in {**base, **sgd, **sched}.items() if k != "rng.init"})),
    }


if __name__ == "__main__":
    main()
