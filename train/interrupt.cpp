// train/interrupt.cpp -- see interrupt.h.
//
// The received signal lives in a file-scope variable: a signal handler takes no context argument, so this is the one
// place razor keeps process-wide mutable state. Only Interrupts (one live instance, checked) writes it outside the
// handler.
#include "train/interrupt.h"

#include <csignal>

#include "core/check.h"

namespace razor::train {
namespace {

volatile std::sig_atomic_t received = 0;   // the signal, 0 while none
volatile std::sig_atomic_t installed = 0;  // an Interrupts is alive
struct sigaction previous_int, previous_term;

extern "C" void on_signal(int sig) {
    if (received != 0) {   // the second one: the default action (terminate) right away
        std::signal(sig, SIG_DFL);
        std::raise(sig);
        return;
    }
    received = sig;
}

}  // namespace

Interrupts::Interrupts() {
    if (installed) throw Error("train::Interrupts: one is installed already; hint: create one per run, in the command");
    received = 0;
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;   // reads and writes in flight go on; fit() looks at the flag between steps
    sigaction(SIGINT, &action, &previous_int);
    sigaction(SIGTERM, &action, &previous_term);
    installed = 1;
}

Interrupts::~Interrupts() {
    sigaction(SIGINT, &previous_int, nullptr);
    sigaction(SIGTERM, &previous_term, nullptr);
    installed = 0;
    received = 0;
}

int Interrupts::signal() const { return received; }

std::string Interrupts::name(int signal) {
    switch (signal) {
        case SIGINT: return "SIGINT";
        case SIGTERM: return "SIGTERM";
        default: return fmt("signal ", signal);
    }
}

}  // namespace razor::train
