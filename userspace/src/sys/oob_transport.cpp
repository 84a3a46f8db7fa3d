// Out-of-band TCP transport: LineSocket's framing, peer addresses, connect, listen, accept.
#include "sys/oob_transport.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <string_view>

#include "base/cause.hpp"

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

Result<void> LineSocket::send(const json& j, std::chrono::milliseconds timeout) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  const auto end = std::chrono::steady_clock::now() + timeout;
  std::size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        // the peer has not read yet: wait for room, not spin, not give up at once
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        pollfd p{fd_, POLLOUT, 0};
        if (left.count() <= 0 ||
            (::poll(&p, 1, static_cast<int>(left.count())) == 0 && std::chrono::steady_clock::now() >= end))
          return Error("timed out sending to the peer (it reads nothing)");
        continue;
      }
      const int e = errno;
      return Error(std::string("send: ") + std::strerror(e), "", kExitFail, "unknown", e);
    }
    off += static_cast<std::size_t>(n);
  }
  return {};
}

namespace {
constexpr const char* kClosedByPeer = "connection closed by peer";
constexpr const char* kTimedOut = "timed out waiting for the peer";
}  // namespace

bool closed_by_peer(const Error& e) { return e.summary == kClosedByPeer; }
bool timed_out(const Error& e) { return e.summary == kTimedOut; }

Result<json> LineSocket::recv(std::chrono::milliseconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto nl = buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      json j = json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object()) return Error("malformed message from peer");
      return j;
    }
    if (buf_.size() > kMaxMessageBytes)
      return Error("message from peer too long (over " + std::to_string(kMaxMessageBytes) +
                   " bytes without a newline)");
    int wait = -1;
    if (timeout.count() > 0) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now())
              .count();
      if (left <= 0) return Error(kTimedOut);
      wait = static_cast<int>(left);
    }
    pollfd p{fd_, POLLIN, 0};
    int pr = ::poll(&p, 1, wait);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) continue;
    char b[65536];
    ssize_t n = ::recv(fd_, b, sizeof b, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error(kClosedByPeer);
    buf_.append(b, static_cast<std::size_t>(n));
  }
}

namespace {
// A port: 1-65535 in decimal; as strtol read it before, leading blanks and a '+' are
// taken ("peer: 5" is port 5).
std::optional<std::uint16_t> parse_port(std::string_view p) {
  while (!p.empty() && std::isspace(static_cast<unsigned char>(p.front()))) p.remove_prefix(1);
  if (!p.empty() && p.front() == '+') p.remove_prefix(1);
  unsigned v = 0;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
  if (p.empty() || ec != std::errc{} || end != p.data() + p.size() || v < 1 || v > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(v);
}
}  // namespace

Result<HostPort> parse_host_port(const std::string& s) {
  HostPort hp;
  std::string p;
  if (s.empty()) return usage_error("empty peer address");
  if (s[0] == '[') {
    auto rb = s.find(']');
    if (rb == std::string::npos) return usage_error("bad peer address '" + s + "' (use [IPv6]:PORT)");
    hp.host = s.substr(1, rb - 1);
    if (rb + 1 < s.size()) {
      if (s[rb + 1] != ':') return usage_error("bad peer address '" + s + "'");
      p = s.substr(rb + 2);
    }
  } else {
    auto c = s.rfind(':');
    if (c != std::string::npos && s.find(':') == c) {
      hp.host = s.substr(0, c);
      p = s.substr(c + 1);
    } else {
      hp.host = s;
    }
  }
  if (hp.host.empty()) return usage_error("bad peer address '" + s + "': missing host");
  if (!p.empty() || (s.back() == ':')) {
    auto port = parse_port(p);
    if (!port) return usage_error("bad port in '" + s + "' (use 1-65535)");
    hp.port = *port;
  }
  return hp;
}

Result<LineSocket> tcp_connect(const std::string& host, std::uint16_t port,
                               std::chrono::milliseconds timeout) {
  auto network = [](std::string summary) {
    return Error(std::move(summary), "", kExitNotReady, cause::kNetwork);
  };
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  addrinfo* res = nullptr;
  std::string ps = std::to_string(port);
  if (int e = getaddrinfo(host.c_str(), ps.c_str(), &hints, &res))
    return network("cannot resolve '" + host + "': " + gai_strerror(e));
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
  return network("cannot connect to " + host + ":" + ps + ": " + last);
}

Result<LineSocket> tcp_listen(const std::string& bind, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string ps = std::to_string(port);
  if (int e = getaddrinfo(bind.empty() ? nullptr : bind.c_str(), ps.c_str(), &hints, &res))
    return usage_error("cannot resolve bind address '" + bind + "': " + gai_strerror(e));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
  // Prefer an IPv6 dual-stack socket when binding to any.
  addrinfo* pick = res;
  for (addrinfo* a = res; a; a = a->ai_next)
    if (bind.empty() && a->ai_family == AF_INET6) pick = a;
  int fd = ::socket(pick->ai_family, pick->ai_socktype | SOCK_CLOEXEC, pick->ai_protocol);
  if (fd < 0) {
    const int e = errno;
    return Error(std::string("socket: ") + std::strerror(e), "", kExitNotReady, "unknown", e);
  }
  LineSocket listener(fd);
  int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (pick->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (::bind(fd, pick->ai_addr, pick->ai_addrlen) != 0 || ::listen(fd, 4) != 0) {
    const int e = errno;
    return Error("cannot listen on port " + ps + ": " + std::strerror(e), "choose another with --port",
                 kExitNotReady, "unknown", e);
  }
  return listener;
}

Result<LineSocket> tcp_accept(const LineSocket& listener, int timeout_ms) {
  while (true) {
    pollfd p{listener.fd(), POLLIN, 0};
    int pr = ::poll(&p, 1, timeout_ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0)
      return Error("no client within " + std::to_string(timeout_ms) + " ms", "", kExitNotReady,
                   cause::kNetwork);
    int cfd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (cfd < 0) continue;
    set_nodelay(cfd);
    return LineSocket(cfd);
  }
}

}  // namespace rxv
