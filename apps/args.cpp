// apps/args.cpp -- see args.h.
#include "apps/args.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "apps/suggest.h"
#include "core/check.h"

namespace razor::apps {

Args& Args::flag(const std::string& name, const std::string& value, const std::string& help) {
    order_.push_back(name);
    flags_[name] = Flag{value, help, false, false};
    return *this;
}

Args& Args::boolean(const std::string& name, const std::string& help) {
    order_.push_back(name);
    flags_[name] = Flag{"0", help, true, false};
    return *this;
}

void Args::parse(const std::vector<std::string>& argv) {
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string& arg = argv[i];
        if (arg == "-h" || arg == "--help") {
            help_ = true;
            continue;
        }
        if (arg.rfind("--", 0) != 0)
            throw Error(fmt("razor ", command_, ": unexpected argument '", arg, "'; flags start with --; hint: ",
                            help_hint()));
        std::string name = arg.substr(2), value;
        bool has_value = false;
        if (auto eq = name.find('='); eq != std::string::npos) {
            value = name.substr(eq + 1);
            name = name.substr(0, eq);
            has_value = true;
        }
        auto it = flags_.find(name);
        if (it == flags_.end()) {
            const std::string near = nearest_name(name, order_);
            throw Error(fmt("razor ", command_, ": unknown flag --", name, near.empty() ? "" : "; did you mean --" + near + "?",
                            "\nhint: ", help_hint()));
        }
        Flag& f = it->second;
        if (f.is_boolean) {
            if (has_value && value != "0" && value != "1" && value != "true" && value != "false")
                throw Error(fmt("razor ", command_, ": --", name, " takes no value (or =true/=false), got '", value, "'"));
            const bool enabled = !has_value || value == "1" || value == "true";
            f.value.assign(1, enabled ? '1' : '0');
        } else {
            if (!has_value) {
                if (i + 1 >= argv.size())
                    throw Error(fmt("razor ", command_, ": --", name, " needs a value; hint: ", help_hint()));
                value = argv[++i];
            }
            f.value = value;
        }
        f.given = true;
    }
}

bool Args::parse_or_usage(const std::vector<std::string>& argv) {
    parse(argv);
    if (help_) std::printf("%s", usage().c_str());
    return !help_;
}

const Args::Flag& Args::get(const std::string& name) const {
    auto it = flags_.find(name);
    RAZOR_CHECK(it != flags_.end()) << "flag --" << name << " was not declared";
    return it->second;
}

std::string Args::str(const std::string& name) const { return get(name).value; }
bool Args::on(const std::string& name) const { return get(name).value == "1"; }
bool Args::given(const std::string& name) const { return get(name).given; }

int64_t Args::integer(const std::string& name) const {
    const std::string& v = get(name).value;
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno == ERANGE)
        throw Error(fmt("razor ", command_, ": --", name, " expects an integer, got '", v, "'"));
    return x;
}

double Args::real(const std::string& name) const {
    const std::string& v = get(name).value;
    char* end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !std::isfinite(x))
        throw Error(fmt("razor ", command_, ": --", name, " expects a number, got '", v, "'"));
    return x;
}

std::string Args::help_hint() const {
    return fmt("razor ", command_, " --help lists its flags");
}

std::string Args::usage() const {
    std::string out = fmt("usage: razor ", command_, " [flags]\n  ", summary_, "\n\nflags:\n");
    for (const auto& name : order_) {
        const Flag& f = flags_.at(name);
        std::string left = "  --" + name + (f.is_boolean ? "" : " " + (f.value.empty() ? std::string("VALUE") : f.value));
        if (left.size() < 28) left.resize(28, ' ');
        out += left + "  " + f.help + "\n";
    }
    return out;
}

}  // namespace razor::apps
