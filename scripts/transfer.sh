#!/usr/bin/env bash
# scripts/transfer.sh -- Back Razor's transfer experiment on CIFAR-10 (docs/back-razor.md "Transfer on real data"):
# pretrain on the six animal classes, then fine-tune on the four vehicle classes with a dense tape, r = 0.9 and
# r = 0.97 (same seed, same epochs, same flags otherwise), and print the fine-tuned test accuracies side by side.
#
#   bash scripts/transfer.sh                          # resnet20, the short schedule below
#   MODEL=vit_tiny bash scripts/transfer.sh           # vit_tiny (AdamW recipe)
#   PRE_EPOCHS=2 FT_EPOCHS=1 STEPS=20 bash scripts/transfer.sh   # a smoke run (minutes)
#   MODEL=resnet18 IMAGE_SIZE=64 bash scripts/transfer.sh         # torchvision's resnet18 on images resized to 64 px
#
# Environment: MODEL (resnet20 | vit_tiny | any zoo model, SGD recipe), DATA (CIFAR-10 binary folder), OUT (runs
# folder), IMAGE_SIZE (the pretraining resolution, 0 = 32; the fine-tunes take their --from's), PRE_EPOCHS, FT_EPOCHS, THREADS, SEED, STEPS (steps per epoch, 0 = all), FT_STEPS (the same for the
# fine-tunes; default STEPS), RATIOS (the fine-tunes' r values, default "0 0.9 0.97"), FREEZE_BN (1: --freeze-bn,
# CNNs; the reference CNN's mode), RAZOR_BN (dense | f16 | int8 | razored: train-mode BN inputs, see docs/back-razor.md),
# RAZOR_ATTN (int8 | razored | fp32: attention's Q, K, V, P; int8 by default), RAZOR_HEAD (dense | razored: the
# classifier's input; dense by default), RAZOR_AFTER_BN (razored | derived: a conv input that is relu(BN(x)) of an
# int8-kept BN input; the CLI's default when unset), VALUES (fp32 | fp16 | int8), RAZOR (the razor binary). Re-running skips a finished stage; a stopped stage resumes.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=${MODEL:-resnet20}
DATA=${DATA:-../shared/datasets/cifar10}
OUT=${OUT:-runs/transfer-$MODEL}
IMAGE_SIZE=${IMAGE_SIZE:-0}
PRE_EPOCHS=${PRE_EPOCHS:-30}
FT_EPOCHS=${FT_EPOCHS:-15}
THREADS=${THREADS:-2}
SEED=${SEED:-0}
STEPS=${STEPS:-0}
FT_STEPS=${FT_STEPS:-$STEPS}
RATIOS=${RATIOS:-0 0.9 0.97}
FREEZE_BN=${FREEZE_BN:-0}
RAZOR_BN=${RAZOR_BN:-int8}
RAZOR_ATTN=${RAZOR_ATTN:-int8}
RAZOR_HEAD=${RAZOR_HEAD:-dense}
RAZOR_AFTER_BN=${RAZOR_AFTER_BN:-}
VALUES=${VALUES:-fp32}
RAZOR=${RAZOR:-./build/razor}
ANIMALS=bird,cat,deer,dog,frog,horse
VEHICLES=airplane,automobile,ship,truck

if [ "$MODEL" = vit_tiny ]; then
    PRE_OPT=(--opt adamw --lr 1e-3 --wd 0.05 --sched cosine --warmup-epochs 1)
    FT_OPT=(--opt adamw --lr 3e-4 --wd 0.05 --sched cosine)
else
    PRE_OPT=(--opt sgd --lr 0.1 --nesterov --wd 5e-4 --sched onecycle)
    FT_OPT=(--opt sgd --lr 0.01 --nesterov --wd 5e-4 --sched cosine)
fi
COMMON=(--data "$DATA" --threads "$THREADS" --seed "$SEED" --batch 128)
FT_FLAGS=()
[ -n "$RAZOR_AFTER_BN" ] && FT_FLAGS+=(--razor-after-bn "$RAZOR_AFTER_BN")
[ "$FREEZE_BN" = 1 ] && FT_FLAGS+=(--freeze-bn)

# run STAGE_FOLDER COMMAND FLAGS...: skip when finished, resume when stopped, else start.
run() {
    local out=$1 cmd=$2; shift 2
    if [ -f "$out/done" ]; then echo "== $out: done"; return; fi
    if [ -d "$out/last" ]; then
        echo "== $out: resuming"; "$RAZOR" "$cmd" --resume "$out" --data "$DATA" --threads "$THREADS"
    else
        echo "== $out: $RAZOR $cmd $*"; "$RAZOR" "$cmd" "$@" --out "$out"
    fi
    touch "$out/done"
}

run "$OUT/pretrain" train --model "$MODEL" --classes "$ANIMALS" --epochs "$PRE_EPOCHS" "${PRE_OPT[@]}" "${COMMON[@]}" \
    --steps-per-epoch "$STEPS" --image-size "$IMAGE_SIZE"
for r in $RATIOS; do
    run "$OUT/finetune-r$r" finetune --from "$OUT/pretrain" --classes "$VEHICLES" --epochs "$FT_EPOCHS" \
        --razor "$r" --razor-values "$VALUES" --razor-bn "$RAZOR_BN" --razor-attn "$RAZOR_ATTN" --razor-head "$RAZOR_HEAD" "${FT_OPT[@]}" "${FT_FLAGS[@]}" "${COMMON[@]}" --steps-per-epoch "$FT_STEPS"
done

echo
echo "| $MODEL fine-tune on $VEHICLES | test accuracy (last epoch) | tape peak (stored / dense-equivalent) |"
echo "|---|---|---|"
for r in $RATIOS; do
    /usr/bin/python3 - "$OUT/finetune-r$r/log.jsonl" "$r" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
last = lines[-1]
tape = max(lines, key=lambda j: j["tape_bytes"])
name = "dense tape" if sys.argv[2] == "0" else f"r = {sys.argv[2]}"
print(f"| {name} | {100 * last['test_acc']:.2f} % | {tape['tape_bytes'] / 2**20:.1f} / "
      f"{tape['tape_dense_bytes'] / 2**20:.1f} MiB ({tape['tape_ratio']:.1f}x) |")
PY
done
