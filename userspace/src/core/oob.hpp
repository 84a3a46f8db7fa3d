// Out-of-band exchange for two-host runs: JSON messages, one a line (oob_transport.hpp).
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
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/peer.hpp"
#include "core/run_config.hpp"
#include "sys/oob_transport.hpp"
#include "sys/verbs.hpp"

namespace rxv {

inline constexpr int kProtocolVersion = 1;
// Limits on what a peer sends besides the size of one message (oob_transport.hpp): candidate
// keys the server considers per verify (more only lose the naming of older passes in an
// explanation), and how long a connected client may stay silent when --timeout is 0.
inline constexpr std::size_t kMaxCandidates = 1024;
inline constexpr double kDefaultIdleSeconds = 300;

// A message field: absent -> def; present but of the wrong kind (for u64: negative,
// fractional, over 2^64-1, text) -> nullopt. Never throws.
std::optional<std::uint64_t> u64_field(const nlohmann::json& m, const char* key, std::uint64_t def);
std::optional<std::string> str_field(const nlohmann::json& m, const char* key, const std::string& def);

nlohmann::json qp_to_json(const QpAddr& a);
std::optional<QpAddr> qp_from_json(const nlohmann::json& j);

// The server's answer to hello, checked (run --connect).
struct ServerHello {
  QpAddr qp;
  std::uint64_t staging_addr = 0;
  std::uint32_t staging_rkey = 0;
  std::uint64_t staging_size = 0;
};
// The server refused ("server refused: ERROR") or answered something malformed.
Result<ServerHello> parse_hello_reply(const nlohmann::json& r);

class RemotePeer final : public Peer {
 public:
  RemotePeer(LineSocket& s, std::uint64_t addr, std::uint32_t rkey, std::uint64_t size,
             std::chrono::milliseconds timeout)
      : s_(s), addr_(addr), rkey_(rkey), size_(size), timeout_(timeout) {}
  std::uint64_t staging_addr() const override { return addr_; }
  std::uint32_t staging_rkey() const override { return rkey_; }
  std::uint64_t staging_size() const override { return size_; }
  Result<void> fill(std::uint64_t st_off, std::uint64_t region_off, std::uint64_t len,
                    std::uint64_t key) override;
  VerifyOutcome verify(std::uint64_t st_off, std::uint64_t region_off, std::uint64_t len, std::uint64_t key,
                       const std::vector<KeyCandidate>& candidates, std::uint64_t region_size) override;

 private:
  Result<nlohmann::json> call(const nlohmann::json& req);
  LineSocket& s_;
  std::uint64_t addr_;
  std::uint32_t rkey_;
  std::uint64_t size_;
  std::chrono::milliseconds timeout_;
};

}  // namespace rxv
