// apps/main.cpp -- the razor command line: `razor <command> [flags]`, `razor help [command]`, `razor --version`.
//
// Every razor::Error (bad flag, bad file, bad shape, NaN loss) ends here: printed as "razor: error: ..." with exit
// status 2, never a crash; so do a filesystem failure no check foresaw (std::filesystem::filesystem_error, with its
// paths) and running out of memory (std::bad_alloc), with a hint naming flags. "unexpected error" (exit 3) is left
// for other exceptions, i.e. razor's own bugs (docs/reliability.md "Errors"). An unknown command gets one line, a
// "did you mean" (apps/suggest.h) and a hint, not the whole usage.
// A run stopped by Ctrl-C or SIGTERM (train/interrupt.h) exits with 128 + the signal after its checkpoint,
// printing how to continue. stdout is line-buffered even into a pipe or file, so the banner and every epoch line are
// out before a kill.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <functional>
#include <map>

#include "apps/commands.h"
#include "apps/suggest.h"
#include "apps/version.h"
#include "core/check.h"
#include "core/isa.h"
#include "train/interrupt.h"

namespace {
const char* const kUsage =
    "usage: razor <command> [flags]      (razor help <command>, or razor <command> --help, for its flags)\n"
    "\n"
    "commands:\n"
    "  demo     train a small CNN on Fashion-MNIST (Debian's dataset-fashion-mnist): accuracy, speed, memory, plot\n"
    "  data     razor data fetch cifar10 | cifar100 | fashion-mnist: download, verify and unpack a dataset\n"
    "  info     a model's layers: output shapes, parameters, FLOPs, saved-activation bytes (razor info --list)\n"
    "  train    train a model on CIFAR-10/100, Fashion-MNIST or an image folder: checkpoints, resume, log, curves\n"
    "  finetune fine-tune a pretrained model on new classes (new head, --razor R for a Back Razor tape, --freeze-bn)\n"
    "  eval     a checkpoint's test accuracy, loss and per-class accuracy (razor eval --checkpoint RUN)\n"
    "  predict  the top-5 classes of photos, by name, with probabilities (razor predict --checkpoint RUN IMG...)\n"
    "  bench    time the full training step (forward, backward, SGD) on synthetic data; --json for one line;\n"
    "           --razor R times it with the Back Razor tape, --keep K the VR-PGE iteration\n"
    "  sparse-train  VR-PGE channel-sparse training, subnetwork fine-tune and export of a smaller dense model\n"
    "  help     this list; razor help COMMAND prints the command's flags\n"
    "\n"
    "razor --version prints the version, git commit, ISA and compiler.\n";

using Command = std::function<int(const std::vector<std::string>&)>;

int unknown_command(const std::string& name, const std::map<std::string, Command>& commands) {
    std::vector<std::string> names;
    for (const auto& entry : commands) names.push_back(entry.first);
    names.push_back("help");
    const std::string near = razor::apps::nearest_name(name, names);
    std::fprintf(stderr, "razor: error: unknown command '%s'%s\nhint: razor help lists the commands\n", name.c_str(),
                 near.empty() ? "" : ("; did you mean '" + near + "'?").c_str());
    return 2;
}
}  // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const std::map<std::string, Command> commands = {
        {"demo", razor::apps::run_demo},
        {"data", razor::apps::run_data},
        {"info", razor::apps::run_info},
        {"train", razor::apps::run_train},
        {"finetune", razor::apps::run_finetune},
        {"eval", razor::apps::run_eval},
        {"predict", razor::apps::run_predict},
        {"bench", razor::apps::run_bench},
        {"sparse-train", razor::apps::run_sparse_train},
    };
    const std::string first = argc < 2 ? "" : argv[1];
    if (argc < 2 || first == "-h" || first == "--help" || (first == "help" && argc == 2)) {
        std::fputs(kUsage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    try {   // RAZOR_ISA is read once, here, so a wrong value is reported before any command (or --version) runs
        razor::active_isa();
    } catch (const razor::Error& e) {
        std::fprintf(stderr, "razor: error: %s\n", e.what());
        return 2;
    }
    if (first == "--version" || first == "-V") {
        std::fputs(razor::apps::version_text().c_str(), stdout);
        return 0;
    }
    std::vector<std::string> args(argv + 2, argv + argc);
    std::string name = first;
    if (first == "help") {   // razor help COMMAND [SUB]: the command's --help
        name = argv[2];
        args.assign(argv + 3, argv + argc);
        args.push_back("--help");
    }
    auto it = commands.find(name);
    if (it == commands.end()) return unknown_command(name, commands);
    try {
        return it->second(args);
    } catch (const razor::train::Interrupted& e) {
        std::fprintf(stderr, "\n%s\n", e.what());   // "razor train: interrupted by SIGINT ...; continue with: ..."
        return e.exit_code();
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
