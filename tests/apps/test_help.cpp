// tests/apps/test_help.cpp -- the CLI's first hour: razor --version, razor help [command], "did you mean" for
// unknown commands and flags with the short error first, help texts true for the command they are in, and the thread
// count (--threads, else OMP_NUM_THREADS, else all cores; more threads than cores warned about).
#include <doctest/doctest.h>

#include <sstream>
#include <thread>

#include "apps/apps_support.h"
#include "apps/suggest.h"
#include "apps/threads.h"
#include "apps/train_options.h"
#include "core/check.h"

using namespace razor;
using doctest::Contains;

namespace {

size_t line_count(const std::string& text) {
    size_t n = 0;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) n += !line.empty();
    return n;
}

// The help line of --NAME in a usage text.
std::string help_line(const std::string& usage, const std::string& name) {
    const size_t at = usage.find("  --" + name + " ");
    if (at == std::string::npos) return {};
    return usage.substr(at, usage.find('\n', at) - at);
}

}  // namespace

TEST_CASE("suggest: edit distance counts a swap of neighbours as one edit; near names only") {
    CHECK(apps::edit_distance("train", "train") == 0);
    CHECK(apps::edit_distance("trian", "train") == 1);
    CHECK(apps::edit_distance("epoch", "epochs") == 1);
    CHECK(apps::edit_distance("", "abc") == 3);
    CHECK(apps::edit_distance("kitten", "sitting") == 3);
    const std::vector<std::string> names = {"epochs", "eval-every", "lr", "label-smoothing", "threads"};
    CHECK(apps::nearest_name("epoch", names) == "epochs");
    CHECK(apps::nearest_name("thread", names) == "threads");
    CHECK(apps::nearest_name("label-smooth", names) == "label-smoothing");   // a unique prefix
    CHECK(apps::nearest_name("bogus", names) == "");
    CHECK(apps::nearest_name("ab", names) == "");   // 2 edits from "lr", but too short to guess
}

TEST_CASE("threads: --threads wins, then OMP_NUM_THREADS, then all cores; oversubscription is warned about") {
    auto c = apps::choose_threads("razor train", 0, nullptr, 4);
    CHECK(c.threads == 4);
    CHECK(c.warning.empty());
    c = apps::choose_threads("razor train", 0, "3", 4);
    CHECK(c.threads == 3);
    CHECK(c.source == "OMP_NUM_THREADS");
    c = apps::choose_threads("razor train", 0, "2,1", 4);   // nested levels: the first is the team size
    CHECK(c.threads == 2);
    c = apps::choose_threads("razor train", 1, "3", 4);
    CHECK(c.threads == 1);
    CHECK(c.source == "--threads");
    c = apps::choose_threads("razor train", 8, nullptr, 2);
    CHECK(c.threads == 8);
    CHECK(c.warning == "razor train: warning: --threads asks for 8 threads but this machine has 2 cores; more threads "
                       "than cores slow every step down; hint: --threads 2");
    c = apps::choose_threads("razor eval", 0, "lots", 1);
    CHECK(c.threads == 1);
    CHECK(c.warning.find("OMP_NUM_THREADS='lots' is not a positive integer; using all 1 core;") != std::string::npos);
}

TEST_CASE("help: --razor-bn's help names --freeze-bn only in finetune; the folder help says JPEG or PNG") {
    const std::string train = apps::train_args(false).usage(), tune = apps::train_args(true).usage();
    CHECK(!help_line(train, "razor-bn").empty());
    CHECK(help_line(train, "razor-bn").find("freeze-bn") == std::string::npos);
    CHECK(help_line(tune, "razor-bn").find("--freeze-bn") != std::string::npos);
    CHECK(help_line(train, "dataset").find("JPEG or PNG") != std::string::npos);
    CHECK(help_line(train, "threads").find("OMP_NUM_THREADS") != std::string::npos);
}

TEST_CASE("razor --version, razor help [command], and short errors with \"did you mean\"") {
#ifdef RAZOR_CLI
    const test::CliRun version = test::run_cli_status("--version");
    CHECK(version.status == 0);
    CHECK(version.out.rfind("razor 0.1.0 (commit ", 0) == 0);
    CHECK(version.out.find("(commit )") == std::string::npos);   // a commit or "unknown", never empty
    CHECK(version.out.find("ISA ") != std::string::npos);
    CHECK((version.out.find("GCC ") != std::string::npos || version.out.find("clang ") != std::string::npos));

    const test::CliRun help = test::run_cli_status("help");
    CHECK(help.status == 0);
    CHECK(help.out.find("  data     razor data fetch") != std::string::npos);
    const test::CliRun help_train = test::run_cli_status("help train");
    CHECK(help_train.status == 0);
    CHECK(help_train.out.rfind("usage: razor train [flags]", 0) == 0);
    CHECK(test::run_cli_status("help data").out.rfind("usage: razor data fetch cifar10 | cifar100 | fashion-mnist", 0) == 0);

    const test::CliRun command = test::run_cli_status("trian");
    INFO(command.out);
    CHECK(command.status == 2);
    CHECK(command.out == "razor: error: unknown command 'trian'; did you mean 'train'?\nhint: razor help lists the "
                         "commands\n");
    CHECK(test::run_cli_status("help evall").out.find("did you mean 'eval'?") != std::string::npos);

    const test::CliRun flag = test::run_cli_status("train --epoch 3");
    INFO(flag.out);
    CHECK(flag.status == 2);
    CHECK(flag.out.find("razor: error: razor train: unknown flag --epoch; did you mean --epochs?\nhint: razor train "
                        "--help lists its flags") != std::string::npos);
    CHECK(line_count(flag.out) <= 2);   // the error and its hint, not the 60-line usage
    CHECK(test::run_cli_status("eval --chekpoint x").out.find("did you mean --checkpoint?") != std::string::npos);

    // A wrong RAZOR_ISA is an error with a hint before anything runs, --version included (it used to abort).
    for (const std::string args : {"--version", "info --model mlp"}) {
        const test::CliRun isa = test::run_cli_status(args, "RAZOR_ISA=avx9");
        INFO(args << ": " << isa.out);
        CHECK(isa.status == 2);
        CHECK(isa.out.rfind("razor: error: RAZOR_ISA: expected generic, avx2 or avx512, got 'avx9'; hint: unset "
                            "RAZOR_ISA", 0) == 0);
    }
#endif
}

TEST_CASE("threads: OMP_NUM_THREADS reaches the banner; more threads than cores warns; 1 thread is singular") {
#ifdef RAZOR_CLI
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    const std::string bench = "bench --model mlp --channels 1 --image-size 8 --batch 2 --steps 1 --warmup 0";
    const test::CliRun over = test::run_cli_status(bench, "OMP_NUM_THREADS=" + std::to_string(cores + 1));
    INFO(over.out);
    CHECK(over.status == 0);
    CHECK(over.out.find(fmt("OpenMP on, ", cores + 1, " threads")) != std::string::npos);
    CHECK(over.out.find(fmt("razor bench: warning: OMP_NUM_THREADS asks for ", cores + 1, " threads but this machine "
                            "has ", cores)) != std::string::npos);
    const test::CliRun one = test::run_cli_status(bench + " --threads 1", "OMP_NUM_THREADS=" + std::to_string(cores + 1));
    INFO(one.out);
    CHECK(one.out.find("OpenMP on, 1 thread |") != std::string::npos);
    CHECK(one.out.find("on 1 thread\n") != std::string::npos);
    CHECK(one.out.find("warning") == std::string::npos);
#endif
}
