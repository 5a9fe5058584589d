// apps/main.cpp -- the razor command line: `razor <command> [flags]`.
//
// Every razor::Error (bad flag, bad file, bad shape, NaN loss) ends here: printed as "razor: error: ..." with exit
// status 2, never a crash. A run stopped by Ctrl-C or SIGTERM (train/interrupt.h) exits with 128 + the signal after
// its checkpoint, printing how to continue.
//
// stdout is line-buffered even into a pipe or file, so the banner and every epoch line are out before a kill.
#include <cstdio>
#include <exception>
#include <functional>
#include <map>

#include "apps/commands.h"
#include "core/check.h"
#include "train/interrupt.h"

namespace {
const char* const kUsage =
    "usage: razor <command> [flags]      (razor <command> --help for its flags)\n"
    "\n"
    "commands:\n"
    "  demo     train a small CNN on Fashion-MNIST (Debian's dataset-fashion-mnist): accuracy, speed, memory, plot\n"
    "  info     a model's layers: output shapes, parameters, FLOPs, saved-activation bytes (razor info --list)\n"
    "  train    train a model on CIFAR-10/100, Fashion-MNIST or an image folder: checkpoints, resume, log, curves\n"
    "  finetune fine-tune a pretrained model on new classes (new head, --razor R for a Back Razor tape, --freeze-bn)\n"
    "  eval     a checkpoint's test accuracy, loss and per-class accuracy (razor eval --checkpoint RUN)\n"
    "  predict  the top-5 classes of photos, by name, with probabilities (razor predict --checkpoint RUN IMG...)\n"
    "  bench    time the full training step (forward, backward, SGD) on synthetic data; --json for one line;\n"
    "           --razor R times it with the Back Razor tape, --keep K the VR-PGE iteration\n"
    "  sparse-train  VR-PGE channel-sparse training, subnetwork fine-tune and export of a smaller dense model\n";
}

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const std::map<std::string, std::function<int(const std::vector<std::string>&)>> commands = {
        {"demo", razor::apps::run_demo},
        {"info", razor::apps::run_info},
        {"train", razor::apps::run_train},
        {"finetune", razor::apps::run_finetune},
        {"eval", razor::apps::run_eval},
        {"predict", razor::apps::run_predict},
        {"bench", razor::apps::run_bench},
        {"sparse-train", razor::apps::run_sparse_train},
    };
    if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
        std::fputs(kUsage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    auto it = commands.find(argv[1]);
    if (it == commands.end()) {
        std::fprintf(stderr, "razor: unknown command '%s'\n\n%s", argv[1], kUsage);
        return 2;
    }
    try {
        return it->second(std::vector<std::string>(argv + 2, argv + argc));
    } catch (const razor::train::Interrupted& e) {
        std::fprintf(stderr, "\n%s\n", e.what());   // "razor train: interrupted by SIGINT ...; continue with: ..."
        return e.exit_code();
    } catch (const razor::Error& e) {
        std::fprintf(stderr, "\nrazor: error: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "\nrazor: unexpected error: %s\n", e.what());
        return 3;
    }
}
