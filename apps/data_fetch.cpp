// apps/data_fetch.cpp -- `razor data fetch cifar10 | cifar100 | fashion-mnist [--dir D] [--mirror URL]`: downloads
// the official files, verifies the published MD5, unpacks into D/NAME (default datasets/NAME, which razor train's
// --data defaults to). The work is data/fetch.h's; this file is the flags and the messages. docs: docs/cli.md
// "razor data fetch".
#include <cstdio>

#include "apps/commands.h"
#include "apps/flag_table.h"
#include "apps/suggest.h"
#include "core/check.h"
#include "data/fetch.h"

namespace razor::apps {
namespace {

struct FetchFlags {
    std::string dir, mirror;
    bool quiet = false;
};

// The flags after the dataset's name.
const FlagTable<FetchFlags>& fetch_flags() {
    static const FlagTable<FetchFlags> table =
        FlagTable<FetchFlags>()
            .text("dir", data::kDatasetRoot, "folder that receives DIR/NAME (razor train's --data default is "
                  "datasets/NAME)", &FetchFlags::dir)
            .text("mirror", "", "base URL serving the same files (default: the authors' site)", &FetchFlags::mirror)
            .boolean("quiet", "no progress line while downloading", &FetchFlags::quiet);
    return table;
}

constexpr const char* kSummary =
    "download, verify (the published MD5) and unpack a dataset: razor data fetch cifar10 | cifar100 | fashion-mnist";

std::vector<std::string> dataset_names() {
    std::vector<std::string> names;
    for (const data::FetchSpec& s : data::fetch_specs()) names.push_back(s.dataset);
    return names;
}

std::string usage() {
    const std::string u = fetch_flags().args("data fetch", kSummary).usage();   // "usage: razor data fetch [flags]\n..."
    return "usage: razor data fetch cifar10 | cifar100 | fashion-mnist [flags]" + u.substr(u.find('\n'));
}

int fetch(const std::string& dataset, const FetchFlags& f) {
    const std::vector<std::string> names = dataset_names();
    bool known = false;
    for (const auto& n : names) known = known || n == dataset;
    if (!known) {
        const std::string near = nearest_name(dataset, names);
        throw Error(fmt("razor data fetch: unknown dataset '", dataset, "'", near.empty() ? "" : "; did you mean '" + near + "'?",
                        "\nhint: one of cifar10 | cifar100 | fashion-mnist (an image folder needs no fetch)"));
    }
    data::FetchOptions o;
    o.root = f.dir, o.mirror = f.mirror, o.progress = !f.quiet;
    o.log = [](const std::string& line) { std::printf("%s\n", line.c_str()), std::fflush(stdout); };
    const std::string dir = data::fetch_dataset(data::fetch_spec(dataset), o);
    std::printf("ready  --dataset %s --data %s\n", dataset.c_str(), dir.c_str());
    return 0;
}

}  // namespace

int run_data(const std::vector<std::string>& argv) {
    const bool help = !argv.empty() && (argv[0] == "-h" || argv[0] == "--help");
    if (argv.empty() || help) {
        std::fputs(usage().c_str(), help ? stdout : stderr);
        if (help) return 0;
        throw Error("razor data: expected a subcommand; hint: razor data fetch cifar10");
    }
    if (argv[0] != "fetch") {
        const std::string near = nearest_name(argv[0], {"fetch"});
        throw Error(fmt("razor data: unknown subcommand '", argv[0], "'", near.empty() ? "" : "; did you mean 'fetch'?",
                        "\nhint: razor data fetch cifar10 | cifar100 | fashion-mnist"));
    }
    std::vector<std::string> rest(argv.begin() + 1, argv.end());
    std::string dataset;
    if (!rest.empty() && rest[0].rfind("-", 0) != 0) dataset = rest[0], rest.erase(rest.begin());
    Args a = fetch_flags().args("data fetch", kSummary);
    a.parse(rest);
    if (a.help_requested()) {
        std::fputs(usage().c_str(), stdout);
        return 0;
    }
    if (dataset.empty())
        throw Error("razor data fetch: which dataset? hint: razor data fetch cifar10 | cifar100 | fashion-mnist");
    return fetch(dataset, fetch_flags().read(a));
}

}  // namespace razor::apps
