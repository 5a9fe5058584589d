// train/epoch_record.h -- the epoch record of razor train, finetune and demo: its stdout line and JSONL entry carry
// the same fields (the JSONL entry also feeds the curves, train/run_log.h). docs: docs/cli.md "Log".
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "train/fit.h"

namespace razor::train {

// {"epoch", "epochs", "step", "loss", "train_acc", "test_acc" (null when not evaluated), "test_loss", "lr",
//  "seconds", "eval_seconds", "img_per_s", "tape_bytes", "tape_dense_bytes", "tape_ratio", "rss_bytes",
//  "peak_rss_bytes", "peak_tensor_bytes"}, "test_images" (how many were scored) when evaluated and "skipped_steps"
// when steps were skipped, "eval_split": "val" when the evaluated split is the validation split (test_acc,
// test_loss and test_images are then its figures: the key names stay for the readers of older logs). lr: the lr the epoch's last step used; seconds: training only (eval_seconds apart), and
// img_per_s = training images / seconds. (fit() adds "curve".)
nlohmann::json epoch_json(const EpochSummary& r);
// "epoch 3/30  loss 0.6123  train 78.1%  test 80.2%  lr ... ("val 80.2%" when it evaluates the validation split)
// lr 0.0812  41 s + eval 5 s  1210 img/s  tape ... (dense ...,
// 1.0x)  rss ..."
std::string epoch_line(const EpochSummary& r);
// "41 s" or, when the epoch was evaluated, "41 s + eval 5 s"
std::string seconds_text(const EpochSummary& r);

std::string fixed(double v, int digits);   // printf "%.*f"
std::string general(double v);             // printf "%.3g"

}  // namespace razor::train
