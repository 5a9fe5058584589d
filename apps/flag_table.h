// apps/flag_table.h -- a command's flags, each declared once: its name, default, help, whether it may change on
// --resume, and the member of the command's typed options struct that it fills. Shared flag families (--razor-*,
// the data flags, the optimiser, the schedule, the run folder) are tables of their own structs, included into a
// command's table with family().
//
// reference: argparse's add_argument(dest=...) and a dataclass of options. docs: docs/cli.md.
//
// read() converts every flag with Args' checked readers (an integer flag that is not an integer names the flag), so
// no command looks a flag up by its name where it uses it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "apps/args.h"
#include "apps/resume.h"
#include "core/check.h"

namespace razor::apps {

template <class O>
class FlagTable {
public:
    using Reader = std::function<void(const Args&, O&)>;

    FlagTable& text(const char* name, const char* value, const char* help, std::string O::*m, bool may_change = false) {
        return add({name, value, help, false, may_change}, [=](const Args& a, O& o) { o.*m = a.str(name); });
    }
    FlagTable& integer(const char* name, const char* value, const char* help, int64_t O::*m, bool may_change = false) {
        return add({name, value, help, false, may_change}, [=](const Args& a, O& o) { o.*m = a.integer(name); });
    }
    FlagTable& real(const char* name, const char* value, const char* help, double O::*m, bool may_change = false) {
        return add({name, value, help, false, may_change}, [=](const Args& a, O& o) { o.*m = a.real(name); });
    }
    // A number whose default "" means "not given" (the command picks a default from other flags).
    FlagTable& real(const char* name, const char* value, const char* help, std::optional<double> O::*m,
                    bool may_change = false) {
        return add({name, value, help, false, may_change}, [=](const Args& a, O& o) {
            o.*m = a.str(name).empty() ? std::nullopt : std::optional<double>(a.real(name));
        });
    }
    FlagTable& boolean(const char* name, const char* help, bool O::*m, bool may_change = false) {
        return add({name, "", help, true, may_change}, [=](const Args& a, O& o) { o.*m = a.on(name); });
    }
    // Every flag of `family`, filling the member `m` of O.
    template <class F>
    FlagTable& family(const FlagTable<F>& f, F O::*m) {
        for (size_t i = 0; i < f.specs().size(); ++i) {
            typename FlagTable<F>::Reader read = f.readers()[i];
            add(f.specs()[i], [=](const Args& a, O& o) { read(a, o.*m); });
        }
        return *this;
    }
    // A command's own default or help for a flag a family declared.
    FlagTable& set_default(const std::string& name, const char* value) {
        find(name).value = value;
        return *this;
    }
    FlagTable& set_help(const std::string& name, const char* help) {
        find(name).help = help;
        return *this;
    }

    const std::vector<FlagSpec>& specs() const { return specs_; }
    const std::vector<Reader>& readers() const { return readers_; }
    Args args(const std::string& command, const std::string& summary) const {
        return make_flag_args(command, summary, specs_);
    }
    // The options of `argv`, or none when it asked for --help (the usage is printed then).
    std::optional<O> parse(const std::string& command, const std::string& summary,
                           const std::vector<std::string>& argv) const {
        Args a = args(command, summary);
        if (!a.parse_or_usage(argv)) return std::nullopt;
        return read(a);
    }
    O read(const Args& a) const {
        O o{};
        for (const Reader& r : readers_) r(a, o);
        return o;
    }

private:
    FlagTable& add(FlagSpec spec, Reader read) {
        specs_.push_back(spec);
        readers_.push_back(std::move(read));
        return *this;
    }
    FlagSpec& find(const std::string& name) {
        for (FlagSpec& s : specs_)
            if (name == s.name) return s;
        throw Error(fmt("FlagTable: no flag --", name, " to change; hint: declare it first"));
    }
    std::vector<FlagSpec> specs_;
    std::vector<Reader> readers_;
};

// A command's entry point: parses `argv` with `table` and runs `body` on the options; with --help prints the usage
// and returns 0.
template <class O, class F>
int run_with_flags(const FlagTable<O>& table, const std::string& command, const std::string& summary,
                   const std::vector<std::string>& argv, F&& body) {
    const std::optional<O> options = table.parse(command, summary, argv);
    return options ? body(*options) : 0;
}

}  // namespace razor::apps
