// apps/main.cpp -- the razor command line: `razor <command> [flags]`.
//
// Every razor::Error (bad flag, bad file, bad shape, NaN loss) ends here: printed as "razor: error: ..." with exit
// status 2, never a crash; so do a filesystem failure no check foresaw (std::filesystem::filesystem_error, with its
// paths) and running out of memory (std::bad_alloc), with a hint naming flags. "unexpected error" (exit 3) is left
// for other exceptions, i.e. razor's own bugs (docs/reliability.md "Errors").
#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <functional>
#include <map>

#include "apps/commands.h"
#include "core/check.h"

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
    } catch (const razor::Error& e) {
        std::fprintf(stderr, "\nrazor: error: %s\n", e.what());
        return 2;
    } catch (const std::filesystem::filesystem_error& e) {   // a path the checks before it could not foresee
        std::fprintf(stderr, "\nrazor: error: %s: %s%s%s (%s); hint: check the paths given to --out, --data, --log "
                     "and --resume: folders that exist and that you may read and write\n", argv[1],
                     e.path1().c_str(), e.path2().empty() ? "" : " -> ", e.path2().c_str(), e.code().message().c_str());
        return 2;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "\nrazor: error: %s: out of memory; hint: lower --batch, --eval-batch, --image-size or "
                     "--workers, or pick a smaller --model\n", argv[1]);
        return 2;
    } catch (const std::exception& e) {   // an internal bug: user input is reported above as razor::Error
        std::fprintf(stderr, "\nrazor: unexpected error: %s\n", e.what());
        return 3;
    }
}
