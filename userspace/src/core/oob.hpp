// Out-of-band exchange for two-host runs: JSON messages, one a line (oob_transport.hpp).
//
//   client -> {"op":"hello","version":2,"qp":{qpn,psn,gid},"staging":N}
//   server <- {"ok":true,"version":2,"qp":{...},"staging":{"addr","rkey","size"},"device","module"}
//   client -> {"op":"arm","id"}                                 <- {"ok":true,"id"}
//   client -> {"op":"fill","id","st","off","len","key"}         <- {"ok":true,"id"}
//   client -> {"op":"verify","id","st","off","len","key","candidates":[[key,label]..],
//              "region_size"}   <- {"ok":true,"id"} | {"ok":false,"id","mismatch":{..},"explanation"}
//   client -> {"op":"bye","id"}                                 <- {"ok":true,"id"}
// Every request after the hello carries an id (1, 2, ... in the order sent) and its reply
// echoes it: the client takes no reply for another request (a lost, repeated or late
// one), and any call that fails (error, refusal, timeout, wrong id) ends the session:
// later calls fail without a message. A verify carries at most kMaxSentCandidates keys
// (the loops just before it), so no message grows with the run. "arm", sent before each
// WRITE loop, sets the server's staging buffer to guard bytes; the server sets each
// verified range back to guard bytes, so every WRITE lands among guards (overrun check)
// without a message per transfer.
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

// 2: request ids, "arm"; a server below it is refused at hello (its replies carry no id).
inline constexpr int kProtocolVersion = 2;
// Candidate keys a verify carries: the loops just before the current one (a stale byte of
// an older loop is still a mismatch, only its explanation names no pass).
inline constexpr std::size_t kMaxSentCandidates = 8;
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
  Result<void> arm_staging() override;
  VerifyOutcome verify(std::uint64_t st_off, std::uint64_t region_off, std::uint64_t len, std::uint64_t key,
                       const std::vector<KeyCandidate>& candidates, std::uint64_t region_size) override;
  // A call failed: the session is over (run skips the remaining sizes).
  bool broken() const override { return ended_.has_value(); }
  // The clean end: bye, its reply awaited (not judged); nothing when the session is over.
  void bye();

 private:
  // One request with the next id and its reply: the reply with that id, or the error that
  // ends the session (cause peer_out_of_step for another id, peer_timeout for none in
  // time, network_path_or_firewall for a broken connection, unknown for a refusal).
  Result<nlohmann::json> call(nlohmann::json req);
  LineSocket& s_;
  std::uint64_t addr_;
  std::uint32_t rkey_;
  std::uint64_t size_;
  std::chrono::milliseconds timeout_;
  std::uint64_t next_id_ = 1;
  std::optional<Error> ended_;
};

}  // namespace rxv
