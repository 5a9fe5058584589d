// apps/args.h -- razor's command-line flags: --name value, --name=value and boolean --flag.
//
// Each subcommand declares its flags (name, default, help); parse() rejects unknown flags and malformed values with a
// message naming the flag, what was expected and what was given: one short line and a hint (an unknown flag also gets
// "did you mean --NAME?", apps/suggest.h), never the whole usage, so the error is what the user sees last.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace razor::apps {

class Args {
public:
    Args(std::string command, std::string summary) : command_(std::move(command)), summary_(std::move(summary)) {}

    // Declare flags before parse(). `value` is the default; a boolean flag takes no value.
    Args& flag(const std::string& name, const std::string& value, const std::string& help);
    Args& boolean(const std::string& name, const std::string& help);

    // Throws razor::Error (one line and a hint) on unknown flags, missing values or stray arguments.
    void parse(const std::vector<std::string>& argv);
    // parse(), then with -h / --help prints the usage to stdout and returns false (the command has nothing to do).
    bool parse_or_usage(const std::vector<std::string>& argv);

    std::string str(const std::string& name) const;
    int64_t integer(const std::string& name) const;     // checked: the whole value must be an integer
    double real(const std::string& name) const;         // checked: a finite number
    bool on(const std::string& name) const;
    bool given(const std::string& name) const;
    bool help_requested() const { return help_; }
    std::string usage() const;
    std::string help_hint() const;   // "razor train --help lists its flags"

private:
    struct Flag {
        std::string value, help;
        bool is_boolean = false, given = false;
    };
    const Flag& get(const std::string& name) const;
    std::string command_, summary_;
    std::vector<std::string> order_;
    std::map<std::string, Flag> flags_;
    bool help_ = false;
};

}  // namespace razor::apps
