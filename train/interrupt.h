// train/interrupt.h -- Ctrl-C (SIGINT) and SIGTERM as a request to stop at the next step boundary with a checkpoint,
// instead of a kill that loses the epoch.
//
// reference: what a PyTorch script does with `except KeyboardInterrupt: save(...)`, made safe: the handler only
// records the signal, and fit() (train/fit.h) acts on it between two steps, where the model, the optimizer and the
// loader are consistent. docs: docs/cli.md "Interrupting a run".
//
//   train::Interrupts interrupts;               // installs the handlers for this scope
//   ... fit(..., {.interrupts = &interrupts}) ... // after the step in flight: checkpoint OUT/last, throw Interrupted
//
// A second signal while the first is being handled kills the process at once (the default action), so a stuck save
// can still be stopped; the checkpoint switch is atomic (train/checkpoint.h), so this loses nothing either.
#pragma once

#include <stdexcept>
#include <string>

namespace razor::train {

// Installs SIGINT and SIGTERM handlers for its lifetime (the previous ones come back on destruction). One at a time
// per process: a second live Interrupts throws razor::Error.
class Interrupts {
public:
    Interrupts();
    ~Interrupts();
    Interrupts(const Interrupts&) = delete;
    Interrupts& operator=(const Interrupts&) = delete;

    int signal() const;              // the signal received (SIGINT, SIGTERM), 0 while none
    bool requested() const { return signal() != 0; }
    static std::string name(int signal);   // "SIGINT", "SIGTERM"
};

// Thrown by fit() once it has acted on a signal (checkpoint written, or nothing to write). razor's main prints
// what() and exits with 128 + signal, the shell's convention for a process stopped by that signal.
class Interrupted : public std::runtime_error {
public:
    Interrupted(int signal, const std::string& message) : std::runtime_error(message), signal_(signal) {}
    int signal() const { return signal_; }
    int exit_code() const { return 128 + signal_; }

private:
    int signal_;
};

}  // namespace razor::train
