// tests/apps/apps_support.h -- helpers for the CLI tests: a tiny fake CIFAR-10 on disk, stdout capture, running a
// subcommand with the thread count restored afterwards.
#pragma once

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"

#include "data/test_support.h"   // TempDir

namespace razor::test {

// Writes CIFAR-10's binary layout into `dir`: data_batch_1..5.bin with `train_per_file` records each, test_batch.bin
// with `test` records, batches.meta.txt. Image i of class k = i % 10 is a noisy picture whose mean colour and a
// bright quadrant depend on k, so a small model learns it within a few steps.
void write_fake_cifar10(const std::string& dir, int train_per_file, int test, int seed = 0);

// Writes Fashion-MNIST's four gzip IDX files ({train,t10k}-{images-idx3,labels-idx1}-ubyte.gz) into `dir`: `train`
// and `test` 28x28 images whose brightness pattern depends on the class i % 10.
void write_fake_fashion_mnist(const std::string& dir, int train, int test);

// Runs the razor binary (RAZOR_CLI) with `args` through the shell (stderr joined to stdout; `env` is prepended,
// e.g. "OMP_NUM_THREADS=3"); returns the exit status and the output.
struct CliRun {
    int status = -1;
    std::string out;
};
CliRun run_cli_status(const std::string& args, const std::string& env = "");

// Runs fn while fd 1 goes to a file; returns what was printed (stdout only; stderr passes through).
template <class F>
std::string capture_stdout(F&& fn);

// The JSON objects of a JSONL file (a run's log.jsonl), one per non-empty line.
std::vector<nlohmann::json> read_jsonl(const std::string& path);

// Whether two state dicts hold the same keys with the same shapes, dtypes and bytes (bit for bit).
bool same_tensors(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b);

// Calls `command`(args) (run_train, run_eval, ...) and restores the OpenMP thread count it may change.
int run_command(int (*command)(const std::vector<std::string>&), const std::vector<std::string>& args);

// run_command with stdout captured and returned; a thrown error or a non-zero status fails the test (REQUIRE), with
// the captured output and the error's message (reported after the capture ends: doctest prints to stdout).
std::string run_ok(int (*command)(const std::vector<std::string>&), const std::vector<std::string>& args);

#ifdef RAZOR_CLI
// Starts the razor binary with `args`, its stdout and stderr appended to `log_path`; returns the child's pid.
int spawn_razor(const std::vector<std::string>& args, const std::string& log_path);

// The razor binary the CLI tests run: $RAZOR_CLI when set (the sanitizer stage links these tests against its
// instrumented build and points here at its own binary), else the one built next to the tests.
std::string razor_cli();
#endif

// --- implementation of the template ---
std::string capture_begin();        // returns the capture file's path
std::string capture_end(const std::string& path);
template <class F>
std::string capture_stdout(F&& fn) {
    const std::string path = capture_begin();
    try {
        fn();
    } catch (...) {
        capture_end(path);
        throw;
    }
    return capture_end(path);
}

}  // namespace razor::test
