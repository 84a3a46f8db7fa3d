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

nlohmann::json qp_to_json(const QpAddr& a);
std::optional<QpAddr> qp_from_json(const nlohmann::json& j);

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
  double timeout = 300;  // seconds waiting for a client / between messages; 0 = none
  bool forever = false;
  std::string module_flavor;
};

// Runs the server loop; returns an exit code. Messages go to stderr (one line each).
int run_server(Provider& prov, const ServeOptions& o);

}  // namespace rxv
