// data/fetch.cpp -- see fetch.h.
#include "data/fetch.h"

#include <archive.h>
#include <archive_entry.h>
#include <curl/curl.h>
#include <openssl/evp.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "core/check.h"

namespace razor::data {
namespace fs = std::filesystem;

namespace {

constexpr const char* kCommand = "razor data fetch";

std::string join_url(const std::string& base, const std::string& name) {
    return base.empty() || base.back() == '/' ? base + name : base + "/" + name;
}

// curl's write callback: appends to the FILE* of the part file.
size_t write_part(char* data, size_t size, size_t count, void* file) {
    return std::fwrite(data, size, count, static_cast<FILE*>(file));
}

struct ProgressState {
    std::string name;
    int64_t offset = 0;   // bytes the part held before this transfer
    std::chrono::steady_clock::time_point last{};
};

int print_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
    auto* p = static_cast<ProgressState*>(user);
    const auto t = std::chrono::steady_clock::now();
    if (t - p->last < std::chrono::milliseconds(500)) return 0;
    p->last = t;
    const double mib = 1024.0 * 1024.0;
    if (total > 0)
        std::fprintf(stderr, "\rfetch  %s  %.1f / %.1f MiB", p->name.c_str(), (p->offset + now) / mib,
                     (p->offset + total) / mib);
    else
        std::fprintf(stderr, "\rfetch  %s  %.1f MiB", p->name.c_str(), (p->offset + now) / mib);
    return 0;
}

int64_t file_size_or_zero(const std::string& path) {
    std::error_code ec;
    const auto n = fs::file_size(path, ec);
    return ec ? 0 : static_cast<int64_t>(n);
}

struct CurlDeleter {
    void operator()(CURL* c) const { curl_easy_cleanup(c); }
};

// One transfer of `url` into `part` from byte `from` (0: the whole file, truncating). Returns curl's code; `http`
// gets the response status.
CURLcode transfer(const std::string& url, const std::string& part, int64_t from, bool progress, long& http,
                  std::string& error) {
    std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
    if (!curl) throw Error(fmt(kCommand, ": libcurl could not start a transfer for ", url, "; hint: out of memory?"));
    FILE* f = std::fopen(part.c_str(), from > 0 ? "ab" : "wb");
    if (!f) throw Error(fmt(kCommand, ": cannot write ", part, "; hint: check the folder's permissions and free space"));
    char message[CURL_ERROR_SIZE] = {0};
    ProgressState state{fs::path(part).stem().string(), from, {}};
    CURL* c = curl.get();
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_part);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, message);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);   // a stalled connection fails after a minute (resumable)
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "razor-data-fetch");
    if (from > 0) curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(from));
    if (progress) {
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, print_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, &state);
    }
    const CURLcode rc = curl_easy_perform(c);
    const bool closed = std::fclose(f) == 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
    if (progress) std::fprintf(stderr, "\n");
    error = message[0] ? message : curl_easy_strerror(rc);
    if (rc == CURLE_OK && !closed)
        throw Error(fmt(kCommand, ": writing ", part, " failed; hint: check the free space"));
    return rc;
}

// The hex of a digest.
std::string hex(const unsigned char* bytes, unsigned n) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < n; ++i) out += digits[bytes[i] >> 4], out += digits[bytes[i] & 15];
    return out;
}

bool has_required(const std::string& dir, const FetchSpec& spec, std::string* missing) {
    for (const std::string& f : spec.required)
        if (!fs::is_regular_file(fs::path(dir) / f)) {
            if (missing) *missing += (missing->empty() ? "" : ", ") + f;
            else return false;
        }
    return !missing || missing->empty();
}

}  // namespace

std::string default_dataset_dir(const std::string& dataset) { return (fs::path(kDatasetRoot) / dataset).string(); }

const std::vector<FetchSpec>& fetch_specs() {
    static const std::vector<FetchSpec> specs = {
        {"cifar10", "https://www.cs.toronto.edu/~kriz",
         {{"cifar-10-binary.tar.gz", "c32a1d4ab5d03f1284b67883e8d87530"}}, true, "cifar-10-batches-bin",
         {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin",
          "test_batch.bin", "batches.meta.txt"}},
        {"cifar100", "https://www.cs.toronto.edu/~kriz",
         {{"cifar-100-binary.tar.gz", "03b5dce01913d631647c71ecec9e9cb8"}}, true, "cifar-100-binary",
         {"train.bin", "test.bin", "fine_label_names.txt", "coarse_label_names.txt"}},
        {"fashion-mnist", "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion",
         {{"train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"},
          {"train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe"},
          {"t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79"},
          {"t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310"}},
         false, "",
         {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
          "t10k-labels-idx1-ubyte.gz"}},
    };
    return specs;
}

const FetchSpec& fetch_spec(const std::string& dataset) {
    std::string names;
    for (const FetchSpec& s : fetch_specs()) {
        if (s.dataset == dataset) return s;
        names += (names.empty() ? "" : " | ") + s.dataset;
    }
    throw Error(fmt(kCommand, ": unknown dataset '", dataset, "'; expected one of ", names,
                    "; hint: an image folder needs no fetch (--dataset folder --data ROOT)"));
}

int64_t download_resumable(const std::string& url, const std::string& part, bool progress) {
    const int64_t from = file_size_or_zero(part);
    long http = 0;
    std::string error;
    CURLcode rc = transfer(url, part, from, progress, http, error);
    if (from > 0 && rc == CURLE_RANGE_ERROR)   // the server ignores Range: start again from byte 0
        rc = transfer(url, part, 0, progress, http, error);
    if (from > 0 && rc == CURLE_HTTP_RETURNED_ERROR && http == 416)   // nothing left to send: the part is whole
        return from;
    if (rc == CURLE_HTTP_RETURNED_ERROR)
        throw Error(fmt(kCommand, ": ", url, " answered HTTP ", http, "; hint: check the address (--mirror) or try "
                        "again later"));
    if (rc != CURLE_OK)
        throw Error(fmt(kCommand, ": the download of ", url, " stopped after ", file_size_or_zero(part), " bytes (",
                        error, "); the part is kept in ", part, "; hint: run the same command again to resume it"));
    return file_size_or_zero(part);
}

std::string md5_of_file(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw Error(fmt(kCommand, ": cannot read ", path, " to verify it"));
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    bool ok = ctx && EVP_DigestInit_ex(ctx.get(), EVP_md5(), nullptr) == 1;
    std::vector<char> buf(1 << 20);
    for (size_t n; ok && (n = std::fread(buf.data(), 1, buf.size(), f)) > 0;)
        ok = EVP_DigestUpdate(ctx.get(), buf.data(), n) == 1;
    const bool read_error = std::ferror(f) != 0;
    std::fclose(f);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    if (!ok || read_error || EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1)
        throw Error(fmt(kCommand, ": could not compute the MD5 of ", path, " (OpenSSL or a read error)"));
    return hex(digest, len);
}

void extract_tar_gz(const std::string& archive, const std::string& dest) {
    fs::create_directories(dest);
    std::unique_ptr<struct archive, decltype(&archive_read_free)> in(archive_read_new(), archive_read_free);
    std::unique_ptr<struct archive, decltype(&archive_write_free)> out(archive_write_disk_new(), archive_write_free);
    archive_read_support_filter_gzip(in.get());
    archive_read_support_format_tar(in.get());
    // Entries are written at dest/NAME: NAME itself must be relative and free of "..", checked below (libarchive's
    // NOABSOLUTEPATHS would refuse the joined path when dest is absolute); links on the way are refused by
    // SECURE_SYMLINKS.
    archive_write_disk_set_options(out.get(), ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                                  ARCHIVE_EXTRACT_SECURE_SYMLINKS);
    const auto fail = [&](struct archive* a, const std::string& what) {
        throw Error(fmt(kCommand, ": ", archive, ": ", what, " (libarchive: ", archive_error_string(a) ? archive_error_string(a) : "?",
                        "); hint: the archive is damaged: remove it and run the command again"));
    };
    if (archive_read_open_filename(in.get(), archive.c_str(), 1 << 16) != ARCHIVE_OK) fail(in.get(), "not a tar.gz");
    for (;;) {
        archive_entry* entry = nullptr;
        const int r = archive_read_next_header(in.get(), &entry);
        if (r == ARCHIVE_EOF) break;
        if (r != ARCHIVE_OK) fail(in.get(), "unreadable entry");
        const auto type = archive_entry_filetype(entry);
        if (type != AE_IFREG && type != AE_IFDIR) continue;   // only files and folders; links and devices are skipped
        const std::string name = archive_entry_pathname(entry);
        const fs::path relative(name);
        bool escapes = relative.is_absolute() || name.empty();
        for (const fs::path& part : relative) escapes = escapes || part == "..";
        if (escapes)
            throw Error(fmt(kCommand, ": ", archive, " holds the entry '", name, "', which would land outside ", dest,
                            "; hint: this is not the official archive: remove it"));
        archive_entry_set_pathname(entry, (fs::path(dest) / name).string().c_str());
        if (archive_write_header(out.get(), entry) != ARCHIVE_OK) fail(out.get(), fmt("cannot unpack ", name));
        const void* block = nullptr;
        size_t size = 0;
        la_int64_t offset = 0;
        for (int b; (b = archive_read_data_block(in.get(), &block, &size, &offset)) != ARCHIVE_EOF;) {
            if (b != ARCHIVE_OK) fail(in.get(), fmt("truncated or corrupt data in ", name));
            if (archive_write_data_block(out.get(), block, size, offset) != ARCHIVE_OK)
                fail(out.get(), fmt("cannot write ", name));
        }
        if (archive_write_finish_entry(out.get()) != ARCHIVE_OK) fail(out.get(), fmt("cannot finish ", name));
    }
    if (archive_write_close(out.get()) != ARCHIVE_OK) fail(out.get(), "cannot finish unpacking");
}

std::string fetch_dataset(const FetchSpec& spec, const FetchOptions& o) {
    const auto log = [&](const std::string& line) {
        if (o.log) o.log(line);
    };
    const fs::path root(o.root), final_dir = root / spec.dataset, staging = root / (".fetch-" + spec.dataset);
    if (fs::exists(final_dir)) {
        std::string missing;
        if (!has_required(final_dir.string(), spec, &missing))
            throw Error(fmt(kCommand, ": ", final_dir.string(), " exists but lacks ", missing,
                            "; hint: remove the folder and run the command again"));
        log(fmt(spec.dataset, " is already in ", final_dir.string(), "; nothing to do"));
        return final_dir.string();
    }
    fs::create_directories(staging);
    const std::string base = o.mirror.empty() ? spec.base_url : o.mirror;
    for (const FetchFile& f : spec.files) {
        const std::string done = (staging / f.name).string(), part = done + ".part", url = join_url(base, f.name);
        if (fs::is_regular_file(done)) {   // downloaded and verified by an earlier run
            log(fmt("have   ", f.name, " (verified earlier)"));
            continue;
        }
        const int64_t before = file_size_or_zero(part);
        log(before > 0 ? fmt("resume ", url, " from byte ", before) : fmt("fetch  ", url));
        const int64_t bytes = download_resumable(url, part, o.progress);
        const std::string got = md5_of_file(part);
        if (got != f.md5) {
            fs::remove(part);
            throw Error(fmt(kCommand, ": ", f.name, ": checksum mismatch: expected MD5 ", f.md5, ", got ", got, " (",
                            bytes, " bytes from ", url, "); the file was removed; hint: run the command again; if it "
                            "fails the same way, the server (--mirror) serves a different file"));
        }
        fs::rename(part, done);
        log(fmt("verify ", f.name, ": MD5 ", got, " as published (", bytes, " bytes)"));
    }
    // Unpack (or gather) into a folder of its own; DIR/dataset appears only complete, by one rename.
    const fs::path unpacked = staging / "unpacked";
    fs::remove_all(unpacked);
    try {
        fs::path source = unpacked;
        if (spec.tar_gz) {
            extract_tar_gz((staging / spec.files[0].name).string(), unpacked.string());
            source = unpacked / spec.archive_folder;
            if (!fs::is_directory(source))
                throw Error(fmt(kCommand, ": ", spec.files[0].name, " holds no folder ", spec.archive_folder,
                                "/; hint: the archive is not the official one: remove ", staging.string(),
                                " and run again"));
        } else {
            fs::create_directories(unpacked);
            for (const FetchFile& f : spec.files) fs::copy_file(staging / f.name, unpacked / f.name);
        }
        std::string missing;
        if (!has_required(source.string(), spec, &missing))
            throw Error(fmt(kCommand, ": the unpacked ", spec.dataset, " lacks ", missing, "; hint: the archive is "
                            "not the official one: remove ", staging.string(), " and run again"));
        fs::rename(source, final_dir);
    } catch (...) {
        std::error_code ec;
        fs::remove_all(unpacked, ec);
        throw;
    }
    fs::remove_all(staging);
    log(fmt("wrote  ", final_dir.string()));
    return final_dir.string();
}

}  // namespace razor::data
