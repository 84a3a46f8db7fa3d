// Out-of-band TCP exchange for two-host runs: newline-delimited JSON messages.
//
//   client -> {"op":"hello","version":1,"qp":{qpn,psn,gid},"staging":N}
//   server <- {"ok":true,"qp":{...},"staging":{"addr","rkey","size"},"device","module"}
//   client -> {"op":"fill","st","off","len","key"}              <- {"ok":true}
//   client -> {"op":"verify","st","off","len","key","candidates":[[key,label]..],
//              "region_size"}   <- {"ok":true} | {"ok":false,"mismatch":{..},"explanation"}
//   client -> {"op":"bye"}                                      <- {"ok":true}
// The server's QP is the RDMA responder; its staging MR is the remote side of every
// transfer; the region under test is registered on the client (`run --connect`).
#pragma once
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine.hpp"
#include "verbs.hpp"

namespace rxv {

inline constexpr std::uint16_t kDefaultPort = 47910;
inline constexpr int kProtocolVersion = 1;
// Limits on what a peer sends: one message (a verify carries two candidate keys per pass
// run so far, ~40 bytes each: 1 MiB holds ~25,000 passes), candidate keys the server
// considers per verify (more only lose the naming of older passes in an explanation), and
// how long a connected client may stay silent when --timeout is 0.
inline constexpr std::size_t kMaxMessageBytes = 1u << 20;
inline constexpr std::size_t kMaxCandidates = 1024;
inline constexpr double kDefaultIdleSeconds = 300;

class LineSocket {
 public:
  LineSocket() = default;
  explicit LineSocket(int fd) : fd_(fd) {}
  ~LineSocket();
  LineSocket(LineSocket&& o) noexcept : fd_(o.fd_), buf_(std::move(o.buf_)) { o.fd_ = -1; }
  LineSocket& operator=(LineSocket&& o) noexcept;
  LineSocket(const LineSocket&) = delete;
  LineSocket& operator=(const LineSocket&) = delete;
  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  std::string send(const nlohmann::json& j);  // "" or error
  // Next message, or nullopt with err set (timeout, closed, bad JSON).
  std::optional<nlohmann::json> recv(std::chrono::milliseconds timeout, std::string& err);

 private:
  int fd_ = -1;
  std::string buf_;
};

// "host", "host:port", "[v6]:port"
bool parse_host_port(const std::string& s, std::string& host, std::uint16_t& port,
                     std::string& err);
std::optional<LineSocket> tcp_connect(const std::string& host, std::uint16_t port,
                                      std::chrono::milliseconds timeout, std::string& err);

// A message field: absent -> def; present but of the wrong kind (for u64: negative,
// fractional, over 2^64-1, text) -> nullopt. Never throws.
std::optional<std::uint64_t> u64_field(const nlohmann::json& m, const char* key,
                                       std::uint64_t def);
std::optional<std::string> str_field(const nlohmann::json& m, const char* key,
                                     const std::string& def);

nlohmann::json qp_to_json(const QpAddr& a);
std::optional<QpAddr> qp_from_json(const nlohmann::json& j);

// The server's answer to hello, checked (run --connect).
struct ServerHello {
  QpAddr qp;
  std::uint64_t staging_addr = 0;
  std::uint32_t staging_rkey = 0;
  std::uint64_t staging_size = 0;
};
bool parse_hello_reply(const nlohmann::json& r, ServerHello& h, std::string& err);

class RemotePeer final : public Peer {
 public:
  RemotePeer(LineSocket& s, std::uint64_t addr, std::uint32_t rkey, std::uint64_t size,
             std::chrono::milliseconds timeout)
      : s_(s), addr_(addr), rkey_(rkey), size_(size), timeout_(timeout) {}
  std::uint64_t staging_addr() const override { return addr_; }
  std::uint32_t staging_rkey() const override { return rkey_; }
  std::uint64_t staging_size() const override { return size_; }
  std::string fill(std::uint64_t st_off, std::uint64_t region_off, std::uint64_t len,
                   std::uint64_t key) override;
  VerifyOutcome verify(std::uint64_t st_off, std::uint64_t region_off, std::uint64_t len,
                       std::uint64_t key, const std::vector<KeyCandidate>& candidates,
                       std::uint64_t region_size) override;

 private:
  std::optional<nlohmann::json> call(const nlohmann::json& req, std::string& err);
  LineSocket& s_;
  std::uint64_t addr_;
  std::uint32_t rkey_;
  std::uint64_t size_;
  std::chrono::milliseconds timeout_;
};

struct ServeOptions {
  std::string device;  // resolved device name
  int gid_index = -1;  // resolved
  std::string bind;    // "" = any
  std::uint16_t port = kDefaultPort;
  double timeout = 300;  // seconds waiting for a client / between messages; 0 = wait for a
                         // client forever (a session still idles out after kDefaultIdleSeconds)
  bool forever = false;
  std::string module_flavor;
  std::uint64_t max_staging = (2ull << 30) + 4096;  // largest staging buffer a client gets
  bool quiet = false;  // no per-session progress lines (the fuzz target)
};

// One client session on an accepted socket (run_server's loop; the fuzz target and the
// unit tests drive it over a socketpair); "" on a clean end, else the one-line reason.
std::string serve_session(Provider& prov, const ServeOptions& o, LineSocket& s);

// Runs the server loop; returns an exit code. Messages go to stderr (one line each).
int run_server(Provider& prov, const ServeOptions& o);

}  // namespace rxv
