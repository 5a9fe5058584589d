// tests/apps/loopback_http.cpp -- see loopback_http.h.
#include "apps/loopback_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace razor::test {
namespace {

void send_all(int fd, const char* data, size_t n) {
    while (n > 0) {
        const ssize_t k = ::send(fd, data, n, MSG_NOSIGNAL);
        if (k <= 0) return;
        data += k, n -= static_cast<size_t>(k);
    }
}

// The value of header `name` (lower-case compare) in `request`; "" when absent.
std::string header(const std::string& request, const std::string& name) {
    size_t at = 0;
    while ((at = request.find("\r\n", at)) != std::string::npos) {
        at += 2;
        const size_t colon = request.find(':', at), end = request.find("\r\n", at);
        if (colon == std::string::npos || end == std::string::npos || colon > end) continue;
        std::string key = request.substr(at, colon - at);
        for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (key == name) return request.substr(request.find_first_not_of(' ', colon + 1),
                                               end - request.find_first_not_of(' ', colon + 1));
    }
    return {};
}

}  // namespace

LoopbackHttp::LoopbackHttp(std::map<std::string, std::string> files) : files_(std::move(files)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 8) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
        throw std::runtime_error("LoopbackHttp: cannot listen on 127.0.0.1");
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
}

LoopbackHttp::~LoopbackHttp() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
}

std::string LoopbackHttp::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

void LoopbackHttp::cut_next_after(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    cut_ = bytes;
}

void LoopbackHttp::ignore_ranges(bool on) {
    std::lock_guard<std::mutex> lock(mutex_);
    ignore_ranges_ = on;
}

std::vector<std::string> LoopbackHttp::ranges() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return ranges_;
}

void LoopbackHttp::serve() {
    while (!stop_) {
        pollfd p{listen_fd_, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        const int fd = ::accept(listen_fd_, nullptr, nullptr);
        if (fd < 0) continue;
        answer(fd);
        ::close(fd);
    }
}

void LoopbackHttp::answer(int fd) {
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t k = ::recv(fd, buf, sizeof buf, 0);
        if (k <= 0) return;
        request.append(buf, static_cast<size_t>(k));
    }
    const size_t sp1 = request.find(' '), sp2 = request.find(' ', sp1 + 1);
    const std::string path = request.substr(sp1 + 1, sp2 - sp1 - 1), range = header(request, "range");
    int64_t cut = -1;
    bool ignore = false;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        ranges_.push_back(range);
        ignore = ignore_ranges_;
        std::swap(cut, cut_);
    }
    auto it = files_.find(path);
    if (it == files_.end()) {
        const std::string r = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        send_all(fd, r.data(), r.size());
        return;
    }
    const std::string& body = it->second;
    const int64_t size = static_cast<int64_t>(body.size());
    int64_t from = 0;
    if (!ignore && range.rfind("bytes=", 0) == 0) from = std::stoll(range.substr(6));
    std::string head;
    if (from >= size && from > 0) {
        head = "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */" + std::to_string(size) +
               "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        send_all(fd, head.data(), head.size());
        return;
    }
    head = from > 0 ? "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes " + std::to_string(from) + "-" +
                          std::to_string(size - 1) + "/" + std::to_string(size) + "\r\n"
                    : std::string("HTTP/1.1 200 OK\r\n");
    head += "Content-Length: " + std::to_string(size - from) + "\r\nConnection: close\r\n\r\n";
    send_all(fd, head.data(), head.size());
    const int64_t n = cut >= 0 ? std::min(cut, size - from) : size - from;
    send_all(fd, body.data() + from, static_cast<size_t>(n));
}

}  // namespace razor::test
