// tests/apps/test_data_fetch.cpp -- razor data fetch against a loopback HTTP server serving generated archives in the
// real layouts (no external network): a verified download unpacked where the loaders read it, a checksum mismatch
// refused with nothing unpacked (exit status 2 from the binary), a damaged archive whose half-unpacked folder is
// removed, an interrupted download resumed with a Range request, a server that ignores ranges.
#include <doctest/doctest.h>

#include <archive.h>
#include <archive_entry.h>

#include <filesystem>

#include "apps/apps_support.h"
#include "apps/loopback_http.h"
#include "core/check.h"
#include "data/cifar.h"
#include "data/fetch.h"
#include "data/idx.h"

using namespace razor;
using doctest::Contains;
namespace fs = std::filesystem;

namespace {

// A .tar.gz of every file under `root`, with paths relative to root's parent (root's name is the top folder).
std::string tar_gz_of(const std::string& root) {
    const std::string path = root + ".tar.gz";
    archive* a = archive_write_new();
    archive_write_add_filter_gzip(a);
    archive_write_set_format_pax_restricted(a);
    REQUIRE(archive_write_open_filename(a, path.c_str()) == ARCHIVE_OK);
    const fs::path base = fs::path(root).parent_path();
    for (const auto& e : fs::recursive_directory_iterator(root)) {
        if (!e.is_regular_file()) continue;
        const std::string bytes = test::read_bytes(e.path().string());
        archive_entry* entry = archive_entry_new();
        archive_entry_set_pathname(entry, fs::relative(e.path(), base).string().c_str());
        archive_entry_set_size(entry, static_cast<la_int64_t>(bytes.size()));
        archive_entry_set_filetype(entry, AE_IFREG);
        archive_entry_set_perm(entry, 0644);
        REQUIRE(archive_write_header(a, entry) == ARCHIVE_OK);
        archive_write_data(a, bytes.data(), bytes.size());
        archive_entry_free(entry);
    }
    archive_write_close(a);
    archive_write_free(a);
    return test::read_bytes(path);
}

std::string md5_of(const test::TempDir& tmp, const std::string& bytes) {
    const std::string path = tmp / "md5.bin";
    test::write_bytes(path, bytes);
    return data::md5_of_file(path);
}

// CIFAR-10's archive as the authors ship it: cifar-10-batches-bin/ with the six batches and batches.meta.txt.
std::string fake_cifar10_archive(const test::TempDir& tmp) {
    test::write_fake_cifar10(tmp / "src/cifar-10-batches-bin", 2, 4);
    return tar_gz_of(tmp / "src/cifar-10-batches-bin");
}

// The official cifar10 spec with the MD5 of `archive` in place of the published one.
data::FetchSpec spec_for(const test::TempDir& tmp, const std::string& archive) {
    data::FetchSpec spec = data::fetch_spec("cifar10");
    spec.files[0].md5 = md5_of(tmp, archive);
    return spec;
}

data::FetchOptions options(const std::string& root, const std::string& mirror) {
    data::FetchOptions o;
    o.root = root, o.mirror = mirror, o.progress = false;
    return o;
}

}  // namespace

TEST_CASE("razor data fetch: MD5 from OpenSSL matches RFC 1321's test vectors") {
    test::TempDir tmp("md5");
    CHECK(md5_of(tmp, "") == "d41d8cd98f00b204e9800998ecf8427e");
    CHECK(md5_of(tmp, "abc") == "900150983cd24fb0d6963f7d28e17f72");
    CHECK(md5_of(tmp, "message digest") == "f96b697d7cb7938d525a2f31aaf161d0");
}

TEST_CASE("razor data fetch: cifar10 and fashion-mnist from a loopback server land where the loaders read them") {
    test::TempDir tmp("fetch_ok");
    const std::string archive = fake_cifar10_archive(tmp);
    test::write_fake_fashion_mnist(tmp / "src/fashion", 20, 10);
    std::map<std::string, std::string> files = {{"/cifar-10-binary.tar.gz", archive}};
    data::FetchSpec fashion = data::fetch_spec("fashion-mnist");
    for (data::FetchFile& f : fashion.files) {
        files["/fashion/" + f.name] = test::read_bytes(tmp / ("src/fashion/" + f.name));
        f.md5 = data::md5_of_file(tmp / ("src/fashion/" + f.name));
    }
    test::LoopbackHttp server(files);
    const std::string root = tmp / "datasets";

    const std::string dir = data::fetch_dataset(spec_for(tmp, archive), options(root, server.url()));
    CHECK(dir == root + "/cifar10");
    CHECK(data::load_cifar10(dir, true).size() == 10);
    CHECK(data::load_cifar10(dir, false).size() == 4);
    CHECK(!fs::exists(root + "/.fetch-cifar10"));   // the download and the unpack folder are gone

    const std::string fdir = data::fetch_dataset(fashion, options(root, server.url() + "/fashion/"));
    CHECK(data::load_fashion_mnist(fdir, true).size() == 20);
    CHECK(data::load_fashion_mnist(fdir, false).size() == 10);

    // A second fetch finds the complete folder and downloads nothing.
    const size_t requests = server.ranges().size();
    std::vector<std::string> lines;
    data::FetchOptions again = options(root, server.url());
    again.log = [&](const std::string& line) { lines.push_back(line); };
    data::fetch_dataset(spec_for(tmp, archive), again);
    CHECK(server.ranges().size() == requests);
    REQUIRE(!lines.empty());
    CHECK(lines[0].find("already in") != std::string::npos);
}

TEST_CASE("razor data fetch: the binary refuses a mismatched checksum with exit 2, naming file, expected, got") {
#ifdef RAZOR_CLI
    test::TempDir tmp("fetch_bad");
    const std::string archive = fake_cifar10_archive(tmp);   // not the official file: its MD5 differs
    test::LoopbackHttp server({{"/cifar-10-binary.tar.gz", archive}});
    const std::string root = tmp / "datasets";
    const test::CliRun r = test::run_cli_status("data fetch cifar10 --quiet --dir " + root + " --mirror " + server.url());
    INFO(r.out);
    CHECK(r.status == 2);
    CHECK(r.out.find("cifar-10-binary.tar.gz: checksum mismatch: expected MD5 c32a1d4ab5d03f1284b67883e8d87530, got " +
                     md5_of(tmp, archive)) != std::string::npos);
    CHECK(r.out.find("hint:") != std::string::npos);
    CHECK(!fs::exists(root + "/cifar10"));
    CHECK(!fs::exists(root + "/.fetch-cifar10/unpacked"));
    CHECK(!fs::exists(root + "/.fetch-cifar10/cifar-10-binary.tar.gz.part"));   // removed: the next run starts clean

    // an unknown dataset gets the nearest name; an unknown subcommand too
    const test::CliRun typo = test::run_cli_status("data fetch cifar-10 --dir " + root);
    CHECK(typo.status == 2);
    CHECK(typo.out.find("unknown dataset 'cifar-10'; did you mean 'cifar10'?") != std::string::npos);
    CHECK(test::run_cli_status("data fech cifar10").out.find("did you mean 'fetch'?") != std::string::npos);
#endif
}

TEST_CASE("razor data fetch: a damaged archive leaves nothing half-extracted") {
    test::TempDir tmp("fetch_damaged");
    std::string archive = fake_cifar10_archive(tmp);
    archive.resize(archive.size() / 2);   // a truncated gzip stream whose MD5 is the expected one
    test::LoopbackHttp server({{"/cifar-10-binary.tar.gz", archive}});
    const std::string root = tmp / "datasets";
    CHECK_THROWS_WITH_AS(data::fetch_dataset(spec_for(tmp, archive), options(root, server.url())),
                         Contains("the archive is damaged"), Error);
    CHECK(!fs::exists(root + "/cifar10"));
    CHECK(!fs::exists(root + "/.fetch-cifar10/unpacked"));
}

TEST_CASE("razor data fetch: an interrupted download resumes with a Range request; a server without ranges restarts") {
    test::TempDir tmp("fetch_resume");
    const std::string archive = fake_cifar10_archive(tmp);
    const int64_t cut = static_cast<int64_t>(archive.size() / 3);
    test::LoopbackHttp server({{"/cifar-10-binary.tar.gz", archive}});
    const std::string root = tmp / "datasets", part = root + "/.fetch-cifar10/cifar-10-binary.tar.gz.part";

    server.cut_next_after(cut);
    CHECK_THROWS_WITH_AS(data::fetch_dataset(spec_for(tmp, archive), options(root, server.url())),
                         Contains("run the same command again to resume"), Error);
    REQUIRE(fs::exists(part));
    CHECK(static_cast<int64_t>(fs::file_size(part)) == cut);
    CHECK(!fs::exists(root + "/cifar10"));

    const std::string dir = data::fetch_dataset(spec_for(tmp, archive), options(root, server.url()));
    CHECK(server.ranges().back() == "bytes=" + std::to_string(cut) + "-");
    CHECK(data::load_cifar10(dir, true).size() == 10);

    // The same interruption against a server that ignores Range: the whole file again, still verified.
    fs::remove_all(root);
    server.cut_next_after(cut);
    CHECK_THROWS_AS(data::fetch_dataset(spec_for(tmp, archive), options(root, server.url())), Error);
    server.ignore_ranges(true);
    CHECK(data::load_cifar10(data::fetch_dataset(spec_for(tmp, archive), options(root, server.url())), false).size() == 4);
}
