// Out-of-band TCP transport for two-host runs: sockets and newline-delimited JSON framing.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/result.hpp"

namespace rxv {

inline constexpr std::uint16_t kDefaultPort = 47910;
// Limit on what a peer sends in one message: the longest a protocol message can be is a
// verify with its kMaxSentCandidates keys (core/oob.hpp), under 2 KiB; a reply is shorter.
inline constexpr std::size_t kMaxMessageBytes = 64u << 10;
// How long send() waits for room in the socket's buffer (a non-blocking socket whose
// peer does not read) before it gives up.
inline constexpr std::chrono::milliseconds kSendTimeout{30000};

// s cut to at most `max` bytes plus "..." when longer, at a UTF-8 character boundary:
// a peer's text (valid UTF-8, as the JSON parser checked it) must stay valid UTF-8,
// or the JSON writer refuses it.
std::string shorten_utf8(const std::string& s, std::size_t max);

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
  // One message out; a string that is not UTF-8 goes out with U+FFFD in its place. On a
  // non-blocking socket a full send buffer (EAGAIN) is waited out, at most `timeout`.
  Result<void> send(const nlohmann::json& j, std::chrono::milliseconds timeout = kSendTimeout);
  // The next message, or an error: timed out, closed by the peer (closed_by_peer), not a
  // JSON object, or over kMaxMessageBytes without a newline.
  Result<nlohmann::json> recv(std::chrono::milliseconds timeout);

 private:
  int fd_ = -1;
  std::string buf_;
};

// recv's error when the peer closed the connection (a clean end between messages).
bool closed_by_peer(const Error& e);
// recv's error when no whole message came within its timeout.
bool timed_out(const Error& e);

// A peer address: "host", "host:port", "[v6]:port" (port 1-65535, default kDefaultPort).
struct HostPort {
  std::string host;
  std::uint16_t port = kDefaultPort;
};
// Errors are usage errors (exit 2) whose summary follows "--connect: ".
Result<HostPort> parse_host_port(const std::string& s);

// A connected socket, or why not (the name did not resolve, every address refused or
// timed out): exit 3, cause network_path_or_firewall.
Result<LineSocket> tcp_connect(const std::string& host, std::uint16_t port,
                               std::chrono::milliseconds timeout);

// A listening socket on bind:port (bind "" = any, on an IPv6 dual-stack socket when there
// is one), or why not: the bind address did not resolve (exit 2), no socket (exit 3), or
// bind/listen refused, the port taken, say (exit 3, the remedy says to choose another).
Result<LineSocket> tcp_listen(const std::string& bind, std::uint16_t port);
// The next client of `listener`, or an error (exit 3) when none came within timeout_ms
// (-1: wait forever).
Result<LineSocket> tcp_accept(const LineSocket& listener, int timeout_ms);

}  // namespace rxv
