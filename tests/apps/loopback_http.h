// tests/apps/loopback_http.h -- a tiny HTTP/1.1 file server on 127.0.0.1 for the razor data fetch tests: GET with
// an optional "Range: bytes=N-" (206 Partial Content, 416 past the end), a cut mode that announces a file's full
// length but closes after K body bytes (an interrupted download), and a mode that ignores Range (answers 200).
// No external network: the port is the kernel's choice on the loopback interface.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace razor::test {

class LoopbackHttp {
public:
    // files: URL path ("/cifar-10-binary.tar.gz") -> body.
    explicit LoopbackHttp(std::map<std::string, std::string> files);
    ~LoopbackHttp();
    LoopbackHttp(const LoopbackHttp&) = delete;
    LoopbackHttp& operator=(const LoopbackHttp&) = delete;

    std::string url() const;                   // "http://127.0.0.1:PORT"
    void cut_next_after(int64_t bytes);        // the next file answer stops after `bytes` body bytes
    void ignore_ranges(bool on);               // answer 200 with the whole file even to a Range request
    std::vector<std::string> ranges() const;   // the Range header of every GET so far ("" when none), in order

private:
    void serve();
    void answer(int fd);
    std::map<std::string, std::string> files_;
    int listen_fd_ = -1, port_ = 0;
    std::atomic<bool> stop_{false};
    mutable std::mutex mutex_;
    int64_t cut_ = -1;
    bool ignore_ranges_ = false;
    std::vector<std::string> ranges_;
    std::thread thread_;
};

}  // namespace razor::test
