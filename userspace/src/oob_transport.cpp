// Out-of-band TCP transport: LineSocket's framing, peer addresses, connect, listen, accept.
#include "oob_transport.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace rxv {
using nlohmann::json;

namespace {
// Each message goes out as written (Nagle off).
void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}
}  // namespace

LineSocket::~LineSocket() {
  if (fd_ >= 0) ::close(fd_);
}
LineSocket& LineSocket::operator=(LineSocket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    buf_ = std::move(o.buf_);
    o.fd_ = -1;
  }
  return *this;
}

std::string shorten_utf8(const std::string& s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "...";
}

std::string LineSocket::send(const json& j) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  std::size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::string("send: ") + std::strerror(errno);
    }
    off += static_cast<std::size_t>(n);
  }
  return "";
}

std::optional<json> LineSocket::recv(std::chrono::milliseconds timeout, std::string& err) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto nl = buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      json j = json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        err = "malformed message from peer";
        return std::nullopt;
      }
      return j;
    }
    if (buf_.size() > kMaxMessageBytes) {
      err = "message from peer too long (over " + std::to_string(kMaxMessageBytes) +
            " bytes without a newline)";
      return std::nullopt;
    }
    int wait = -1;
    if (timeout.count() > 0) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now())
              .count();
      if (left <= 0) {
        err = "timed out waiting for the peer";
        return std::nullopt;
      }
      wait = static_cast<int>(left);
    }
    pollfd p{fd_, POLLIN, 0};
    int pr = ::poll(&p, 1, wait);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) continue;
    char b[65536];
    ssize_t n = ::recv(fd_, b, sizeof b, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = "connection closed by peer";
      return std::nullopt;
    }
    buf_.append(b, static_cast<std::size_t>(n));
  }
}

bool parse_host_port(const std::string& s, std::string& host, std::uint16_t& port, std::string& err) {
  port = kDefaultPort;
  std::string p;
  if (s.empty()) {
    err = "empty peer address";
    return false;
  }
  if (s[0] == '[') {
    auto rb = s.find(']');
    if (rb == std::string::npos) {
      err = "bad peer address '" + s + "' (use [IPv6]:PORT)";
      return false;
    }
    host = s.substr(1, rb - 1);
    if (rb + 1 < s.size()) {
      if (s[rb + 1] != ':') {
        err = "bad peer address '" + s + "'";
        return false;
      }
      p = s.substr(rb + 2);
    }
  } else {
    auto c = s.rfind(':');
    if (c != std::string::npos && s.find(':') == c) {
      host = s.substr(0, c);
      p = s.substr(c + 1);
    } else {
      host = s;
    }
  }
  if (host.empty()) {
    err = "bad peer address '" + s + "': missing host";
    return false;
  }
  if (!p.empty() || (s.back() == ':')) {
    char* e = nullptr;
    long v = std::strtol(p.c_str(), &e, 10);
    if (p.empty() || *e || v < 1 || v > 65535) {
      err = "bad port in '" + s + "' (use 1-65535)";
      return false;
    }
    port = static_cast<std::uint16_t>(v);
  }
  return true;
}

std::optional<LineSocket> tcp_connect(const std::string& host, std::uint16_t port,
                                      std::chrono::milliseconds timeout, std::string& err) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  addrinfo* res = nullptr;
  std::string ps = std::to_string(port);
  if (int e = getaddrinfo(host.c_str(), ps.c_str(), &hints, &res)) {
    err = "cannot resolve '" + host + "': " + gai_strerror(e);
    return std::nullopt;
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
  std::string last = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    LineSocket s(fd);
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno != EINPROGRESS) {
      last = std::strerror(errno);
      continue;
    }
    if (rc != 0) {
      pollfd p{fd, POLLOUT, 0};
      int pr = ::poll(&p, 1, static_cast<int>(timeout.count()));
      if (pr <= 0) {
        last = "connection timed out";
        continue;
      }
      int soerr = 0;
      socklen_t l = sizeof soerr;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &l);
      if (soerr) {
        last = std::strerror(soerr);
        continue;
      }
    }
    set_nodelay(fd);
    return s;
  }
  err = "cannot connect to " + host + ":" + ps + ": " + last;
  return std::nullopt;
}

std::optional<LineSocket> tcp_listen(const std::string& bind, std::uint16_t port, std::string& err,
                                     ListenFailure& why) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string ps = std::to_string(port);
  if (int e = getaddrinfo(bind.empty() ? nullptr : bind.c_str(), ps.c_str(), &hints, &res)) {
    err = "cannot resolve bind address '" + bind + "': " + gai_strerror(e);
    why = ListenFailure::Resolve;
    return std::nullopt;
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
  // Prefer an IPv6 dual-stack socket when binding to any.
  addrinfo* pick = res;
  for (addrinfo* a = res; a; a = a->ai_next)
    if (bind.empty() && a->ai_family == AF_INET6) pick = a;
  int fd = ::socket(pick->ai_family, pick->ai_socktype | SOCK_CLOEXEC, pick->ai_protocol);
  if (fd < 0) {
    err = std::string("socket: ") + std::strerror(errno);
    why = ListenFailure::Socket;
    return std::nullopt;
  }
  LineSocket listener(fd);
  int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (pick->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (::bind(fd, pick->ai_addr, pick->ai_addrlen) != 0 || ::listen(fd, 4) != 0) {
    err = "cannot listen on port " + ps + ": " + std::strerror(errno);
    why = ListenFailure::Bind;
    return std::nullopt;
  }
  return listener;
}

std::optional<LineSocket> tcp_accept(const LineSocket& listener, int timeout_ms) {
  while (true) {
    pollfd p{listener.fd(), POLLIN, 0};
    int pr = ::poll(&p, 1, timeout_ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) return std::nullopt;
    int cfd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (cfd < 0) continue;
    set_nodelay(cfd);
    return LineSocket(cfd);
  }
}

}  // namespace rxv
