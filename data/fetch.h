// data/fetch.h -- `razor data fetch`: download a dataset's official files over HTTPS (libcurl), verify the checksum
// its authors publish (MD5, computed with OpenSSL's libcrypto), unpack it (libarchive) and leave exactly the folder
// razor's loaders read: DIR/cifar10 (data_batch_*.bin, data/cifar.h), DIR/cifar100 (train.bin, test.bin),
// DIR/fashion-mnist (the four IDX .gz files, read compressed by data/idx.h).
//
// reference: torchvision.datasets.utils.download_and_extract_archive (URL + published MD5 per file, an archive's
// top folder). docs: docs/data.md "Getting the datasets", docs/cli.md "razor data fetch".
//
// Crash and error behaviour, in order:
//   1. each file downloads to DIR/.fetch-NAME/FILE.part; an interrupted download keeps it, and the next run asks the
//      server for the rest (HTTP Range) -- or starts again when the server ignores ranges;
//   2. a file whose checksum differs is removed and refused: the error names the file, the URL, expected and got;
//   3. the archive unpacks into DIR/.fetch-NAME/unpacked, which is renamed to DIR/NAME only when every file the loader
//      needs is there, so DIR/NAME is either complete or absent; a failed unpack removes the half-written folder.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace razor::data {

// Where `razor data fetch` puts datasets by default, relative to the current folder (razor train's --data default is
// kDatasetRoot/NAME when that folder exists).
constexpr const char* kDatasetRoot = "datasets";
// "datasets/cifar10" for "cifar10".
std::string default_dataset_dir(const std::string& dataset);

struct FetchFile {
    std::string name;   // the file's name at base_url, and on disk
    std::string md5;    // the published MD5, lower-case hex
};

// One dataset's official source and the layout it unpacks to.
struct FetchSpec {
    std::string dataset;                // "cifar10", "cifar100", "fashion-mnist": DIR/dataset is the result
    std::string base_url;               // the files are base_url + "/" + name
    std::vector<FetchFile> files;
    bool tar_gz = false;                // files[0] is a .tar.gz to unpack; else the files are the dataset as they are
    std::string archive_folder;         // tar_gz: the archive's top folder, whose contents become DIR/dataset
    std::vector<std::string> required;  // the files the loader reads, checked before DIR/dataset appears
};

// The official sources (the authors' pages: www.cs.toronto.edu/~kriz/cifar.html, zalandoresearch/fashion-mnist).
const std::vector<FetchSpec>& fetch_specs();
// The spec of `dataset`; throws razor::Error listing the known names otherwise.
const FetchSpec& fetch_spec(const std::string& dataset);

struct FetchOptions {
    std::string root = kDatasetRoot;   // DIR
    std::string mirror;                // replaces the spec's base_url ("" = the official one)
    bool progress = true;              // a progress line on stderr while downloading
    std::function<void(const std::string&)> log;   // one line per step ("download ...", "verified ..."); may be empty
};

// Runs steps 1-3 above; returns DIR/dataset. A complete DIR/dataset is left alone (logged, nothing downloaded).
// Throws razor::Error naming the file, URL or folder with a hint on every failure.
std::string fetch_dataset(const FetchSpec& spec, const FetchOptions& options);

// The pieces, for the tests:
// Downloads `url` into `part`, continuing from its current size when it exists. Returns the bytes now in `part`.
int64_t download_resumable(const std::string& url, const std::string& part, bool progress);
// The MD5 of a file's bytes, lower-case hex.
std::string md5_of_file(const std::string& path);
// Unpacks a .tar.gz into `dest` (created), refusing absolute paths, ".." and links that leave `dest`.
void extract_tar_gz(const std::string& archive, const std::string& dest);

}  // namespace razor::data
