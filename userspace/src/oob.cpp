#include "oob.hpp"

#include "report.hpp"  // kExit*

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace rxv {
using nlohmann::json;

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

std::string LineSocket::send(const json& j) {
  std::string s = j.dump() + "\n";
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
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      end - std::chrono::steady_clock::now())
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

bool parse_host_port(const std::string& s, std::string& host, std::uint16_t& port,
                     std::string& err) {
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
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return s;
  }
  err = "cannot connect to " + host + ":" + ps + ": " + last;
  return std::nullopt;
}

namespace {
std::string hex(const std::array<std::uint8_t, 16>& g) {
  char b[40];
  for (int i = 0; i < 16; ++i) std::snprintf(b + 2 * i, 3, "%02x", g[static_cast<std::size_t>(i)]);
  return std::string(b, 32);
}
}  // namespace

json qp_to_json(const QpAddr& a) { return {{"qpn", a.qpn}, {"psn", a.psn}, {"gid", hex(a.gid)}}; }

std::optional<QpAddr> qp_from_json(const json& j) {
  if (!j.is_object() || !j.contains("qpn") || !j.contains("psn") || !j.contains("gid") ||
      !j["qpn"].is_number_unsigned() || !j["psn"].is_number_unsigned() || !j["gid"].is_string() ||
      j["qpn"].get<std::uint64_t>() > 0xffffffu || j["psn"].get<std::uint64_t>() > 0xffffffu)
    return std::nullopt;  // QPNs and PSNs are 24-bit
  QpAddr a;
  a.qpn = j["qpn"].get<std::uint32_t>();
  a.psn = j["psn"].get<std::uint32_t>();
  std::string g = j["gid"].get<std::string>();
  if (g.size() != 32) return std::nullopt;
  for (std::size_t i = 0; i < 16; ++i) {
    auto nib = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    int hi = nib(g[2 * i]), lo = nib(g[2 * i + 1]);  // strtoul took "-1", " f", "+f"
    if (hi < 0 || lo < 0) return std::nullopt;
    a.gid[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return a;
}

std::optional<std::uint64_t> u64_field(const json& m, const char* key, std::uint64_t def) {
  auto it = m.find(key);
  if (it == m.end()) return def;
  if (!it->is_number_unsigned()) return std::nullopt;  // negative, fractional, huge, text
  return it->get<std::uint64_t>();
}
std::optional<std::string> str_field(const json& m, const char* key, const std::string& def) {
  auto it = m.find(key);
  if (it == m.end()) return def;
  if (!it->is_string()) return std::nullopt;
  return it->get<std::string>();
}
namespace {
bool bool_field(const json& m, const char* key) {
  auto it = m.find(key);
  return it != m.end() && it->is_boolean() && it->get<bool>();
}
// A peer's error text, cut to one line of sane length.
std::string peer_text(const json& m, const char* key, const std::string& def) {
  std::string t = str_field(m, key, def).value_or(def);
  for (char& c : t)
    if (c == '\n' || c == '\r') c = ' ';
  if (t.size() > 400) t = t.substr(0, 400) + "...";
  return t;
}
}  // namespace

bool parse_hello_reply(const json& r, ServerHello& h, std::string& err) {
  if (!bool_field(r, "ok")) {
    err = "server refused: " + peer_text(r, "error", "?");
    return false;
  }
  auto q = r.find("qp");
  auto st = r.find("staging");
  std::optional<QpAddr> qa;
  if (q != r.end()) qa = qp_from_json(*q);
  if (!qa || st == r.end() || !st->is_object()) {
    err = "malformed server answer";
    return false;
  }
  auto addr = u64_field(*st, "addr", 0), rkey = u64_field(*st, "rkey", 0),
       size = u64_field(*st, "size", 0);
  if (!addr || !rkey || !size || *rkey > 0xffffffffu || *size == 0) {
    err = "malformed server answer (staging buffer)";
    return false;
  }
  h.qp = *qa;
  h.staging_addr = *addr;
  h.staging_rkey = static_cast<std::uint32_t>(*rkey);
  h.staging_size = *size;
  return true;
}

std::optional<json> RemotePeer::call(const json& req, std::string& err) {
  if (auto e = s_.send(req); !e.empty()) {
    err = e;
    return std::nullopt;
  }
  return s_.recv(timeout_, err);
}

std::string RemotePeer::fill(std::uint64_t st, std::uint64_t off, std::uint64_t len,
                             std::uint64_t key) {
  std::string err;
  auto r = call({{"op", "fill"}, {"st", st}, {"off", off}, {"len", len}, {"key", key}}, err);
  if (!r) return err;
  if (!bool_field(*r, "ok")) return peer_text(*r, "error", "peer refused fill");
  return "";
}

VerifyOutcome RemotePeer::verify(std::uint64_t st, std::uint64_t off, std::uint64_t len,
                                 std::uint64_t key, const std::vector<KeyCandidate>& cands,
                                 std::uint64_t region_size) {
  VerifyOutcome v;
  json c = json::array();
  for (const auto& k : cands) c.push_back(json::array({k.key, k.label}));
  std::string err;
  auto r = call({{"op", "verify"},
                 {"st", st},
                 {"off", off},
                 {"len", len},
                 {"key", key},
                 {"candidates", c},
                 {"region_size", region_size}},
                err);
  if (!r) {
    v.ok = false;
    v.error = err;
    return v;
  }
  if (bool_field(*r, "ok")) return v;
  v.ok = false;
  auto mi = r->find("mismatch");
  if (mi != r->end() && mi->is_object()) {
    auto offset = u64_field(*mi, "offset", 0), exp = u64_field(*mi, "expected", 0),
         act = u64_field(*mi, "actual", 0), bad = u64_field(*mi, "bad_bytes", 0);
    if (!offset || !exp || !act || !bad || *exp > 255 || *act > 255) {
      v.error = "malformed mismatch report from the server";
      return v;
    }
    Mismatch mm;
    mm.region_offset = *offset;
    mm.expected = static_cast<std::uint8_t>(*exp);
    mm.actual = static_cast<std::uint8_t>(*act);
    mm.bad_bytes = *bad;
    mm.first_bad_page = mm.region_offset / 4096;
    v.mismatch = mm;
    v.explanation = peer_text(*r, "explanation", "");
  } else {
    v.error = peer_text(*r, "error", "peer verify failed");
  }
  return v;
}

namespace {

void say(const std::string& s) { std::fprintf(stderr, "rxe-verify serve: %s\n", s.c_str()); }

// The request's staging range [st, st + len) inside a buffer of `size` bytes, without
// overflow (st + len can wrap for a hostile client).
bool range_ok(std::uint64_t st, std::uint64_t len, std::uint64_t size) {
  return st <= size && len <= size - st;
}

}  // namespace

std::string serve_session(Provider& prov, const ServeOptions& o, LineSocket& s) {
  // a silent client holds the (one-client-at-a-time) server for at most this long, also
  // with --timeout 0 (which only means: wait for a client forever)
  double idle = o.timeout > 0 ? o.timeout : kDefaultIdleSeconds;
  auto to = std::chrono::milliseconds(static_cast<long long>(idle * 1000));
  auto refuse = [&](const std::string& e) {
    s.send({{"ok", false}, {"error", e}});
    return e;
  };
  std::string err;
  auto hello = s.recv(to, err);
  if (!hello) return err == "connection closed by peer" ? err : refuse(err);
  auto op0 = str_field(*hello, "op", "");
  if (!op0 || *op0 != "hello") return refuse("first message is not hello");
  std::optional<QpAddr> rq;
  if (auto q = hello->find("qp"); q != hello->end()) rq = qp_from_json(*q);
  auto staging = u64_field(*hello, "staging", 0);
  if (!rq) return refuse("bad QP address in hello");
  if (!staging || *staging == 0 || *staging > o.max_staging)
    return refuse("bad staging size (1 to " + std::to_string(o.max_staging) + " bytes)");
  std::string derr;
  auto dev = prov.open(o.device, derr);
  if (!dev) return refuse(derr);
  if (!dev->port().active) return refuse("port 1 of " + o.device + " is not ACTIVE on the server");
  QpParams qpp;
  qpp.gid_index = o.gid_index;
  auto qp = dev->create_qp(qpp, derr);
  if (!qp) return refuse(derr);
  LocalPeer peer(*dev, *staging);
  if (!peer.ok())
    return refuse("server cannot register its " + std::to_string(*staging) +
                  "-byte staging buffer: " + std::strerror(peer.reg_errno()));
  if (auto e = qp->connect(*rq); !e.empty()) return refuse(e);
  s.send({{"ok", true},
          {"version", kProtocolVersion},
          {"qp", qp_to_json(qp->local_addr())},
          {"staging", {{"addr", peer.staging_addr()}, {"rkey", peer.staging_rkey()},
                       {"size", peer.staging_size()}}},
          {"device", o.device},
          {"module", o.module_flavor}});
  if (!o.quiet) say("client connected; serving " + o.device);
  while (true) {
    auto m = s.recv(to, err);
    if (!m) return err == "connection closed by peer" ? "" : refuse(err);
    auto op = str_field(*m, "op", "");
    auto st = u64_field(*m, "st", 0), off = u64_field(*m, "off", 0), len = u64_field(*m, "len", 0),
         key = u64_field(*m, "key", 0);
    if (!op) {
      s.send({{"ok", false}, {"error", "bad field 'op' (a string)"}});
      continue;
    }
    if (*op == "bye") {
      s.send({{"ok", true}});
      return "";
    }
    if (*op != "fill" && *op != "verify") {
      std::string shown = op->size() > 40 ? op->substr(0, 40) + "..." : *op;
      s.send({{"ok", false}, {"error", "unknown op '" + shown + "'"}});
      continue;
    }
    if (!st || !off || !len || !key) {
      s.send({{"ok", false}, {"error", "bad field in " + *op + ": st, off, len and key are "
                                                              "non-negative integers"}});
      continue;
    }
    if (!range_ok(*st, *len, peer.staging_size())) {
      s.send({{"ok", false}, {"error", "staging range out of bounds"}});
      continue;
    }
    if (*op == "fill") {
      std::string e = peer.fill(*st, *off, *len, *key);
      s.send(e.empty() ? json{{"ok", true}} : json{{"ok", false}, {"error", e}});
      continue;
    }
    std::vector<KeyCandidate> c;
    if (auto ci = m->find("candidates"); ci != m->end() && ci->is_array())
      for (const auto& x : *ci)
        if (x.is_array() && x.size() == 2 && x[0].is_number_unsigned() && x[1].is_string() &&
            c.size() < kMaxCandidates)
          c.push_back({x[0].get<std::uint64_t>(), x[1].get<std::string>()});
    auto rs = u64_field(*m, "region_size", *len + *off);
    if (!rs) {
      s.send({{"ok", false}, {"error", "bad field 'region_size' (a non-negative integer)"}});
      continue;
    }
    auto v = peer.verify(*st, *off, *len, *key, c, *rs);
    if (v.ok) {
      s.send({{"ok", true}});
    } else if (v.mismatch) {
      s.send({{"ok", false},
              {"mismatch", {{"offset", v.mismatch->region_offset},
                            {"expected", v.mismatch->expected},
                            {"actual", v.mismatch->actual},
                            {"bad_bytes", v.mismatch->bad_bytes}}},
              {"explanation", v.explanation}});
    } else {
      s.send({{"ok", false}, {"error", v.error}});
    }
  }
}

int run_server(Provider& prov, const ServeOptions& o) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string ps = std::to_string(o.port);
  if (int e = getaddrinfo(o.bind.empty() ? nullptr : o.bind.c_str(), ps.c_str(), &hints, &res)) {
    std::fprintf(stderr, "rxe-verify serve: error: cannot resolve bind address '%s': %s\n",
                 o.bind.c_str(), gai_strerror(e));
    return kExitUsage;
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
  // Prefer an IPv6 dual-stack socket when binding to any.
  addrinfo* pick = res;
  for (addrinfo* a = res; a; a = a->ai_next)
    if (o.bind.empty() && a->ai_family == AF_INET6) pick = a;
  int fd = ::socket(pick->ai_family, pick->ai_socktype | SOCK_CLOEXEC, pick->ai_protocol);
  if (fd < 0) {
    std::fprintf(stderr, "rxe-verify serve: error: socket: %s\n", std::strerror(errno));
    return kExitNotReady;
  }
  LineSocket listener(fd);
  int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (pick->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (::bind(fd, pick->ai_addr, pick->ai_addrlen) != 0 || ::listen(fd, 4) != 0) {
    std::fprintf(stderr,
                 "rxe-verify serve: error: cannot listen on port %u: %s (choose another with "
                 "--port)\n",
                 static_cast<unsigned>(o.port), std::strerror(errno));
    return kExitNotReady;
  }
  say("listening on TCP port " + ps + " (device " + o.device + ", gid index " +
      std::to_string(o.gid_index) + ")" + (o.forever ? "" : "; exits after one client"));
  while (true) {
    pollfd p{fd, POLLIN, 0};
    int wait = o.timeout > 0 ? static_cast<int>(o.timeout * 1000) : -1;
    int pr = ::poll(&p, 1, wait);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) {
      say("no client within " + std::to_string(static_cast<long long>(o.timeout)) +
          " s; giving up (use --timeout 0 to wait forever)");
      return kExitNotReady;
    }
    int cfd = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (cfd < 0) continue;
    setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    LineSocket client(cfd);
    std::string e = serve_session(prov, o, client);
    if (!e.empty()) say("session ended: " + e);
    else say("client finished");
    if (!o.forever) return e.empty() ? kExitPass : kExitFail;
  }
}

}  // namespace rxv
