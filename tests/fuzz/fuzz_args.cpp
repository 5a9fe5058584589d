// tests/fuzz/fuzz_args.cpp -- libFuzzer target: apps::Args::parse with a fixed flag set; the input is split at
// NUL bytes into argv. Every accessor is then called: a malformed value must be an Error naming the flag.
#include "apps/args.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace razor;
    std::vector<std::string> argv;
    const std::string in = fuzz::bytes(data, size);
    for (size_t begin = 0; begin <= in.size();) {
        const size_t end = std::min(in.find('\0', begin), in.size());
        argv.push_back(in.substr(begin, end - begin));
        begin = end + 1;
    }
    if (size == 0) argv.clear();
    apps::Args args("train", "fuzzing flag set");
    args.flag("epochs", "10", "epochs").flag("lr", "0.1", "learning rate").flag("data", "", "folder");
    args.flag("out", "run.safetensors", "checkpoint").boolean("verbose", "log more").boolean("resume", "resume");
    if (!fuzz::accepts([&] { args.parse(argv); })) return 0;
    fuzz::accepts([&] { args.integer("epochs"); });
    fuzz::accepts([&] { args.real("lr"); });
    fuzz::require(args.on("verbose") == (args.str("verbose") == "1"), "booleans are 0 or 1");
    fuzz::require(args.str("verbose") == "0" || args.str("verbose") == "1", "booleans are 0 or 1");
    (void)args.str("data"), (void)args.given("out"), (void)args.usage(), (void)args.help_requested();
    return 0;
}
