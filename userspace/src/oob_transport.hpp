// Out-of-band TCP transport for two-host runs: sockets and newline-delimited JSON framing.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace rxv {

inline constexpr std::uint16_t kDefaultPort = 47910;
// Limit on what a peer sends in one message (a verify carries two candidate keys per pass
// run so far, ~40 bytes each: 1 MiB holds ~25,000 passes).
inline constexpr std::size_t kMaxMessageBytes = 1u << 20;

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
  // "" or error; a string that is not UTF-8 goes out with U+FFFD in its place
  std::string send(const nlohmann::json& j);
  // Next message, or nullopt with err set (timeout, closed, bad JSON).
  std::optional<nlohmann::json> recv(std::chrono::milliseconds timeout, std::string& err);

 private:
  int fd_ = -1;
  std::string buf_;
};

// "host", "host:port", "[v6]:port"
bool parse_host_port(const std::string& s, std::string& host, std::uint16_t& port, std::string& err);
std::optional<LineSocket> tcp_connect(const std::string& host, std::uint16_t port,
                                      std::chrono::milliseconds timeout, std::string& err);

// Why tcp_listen failed: the bind address did not resolve, no socket, or bind/listen
// refused (the port taken, say).
enum class ListenFailure { Resolve, Socket, Bind };
// A listening socket on bind:port (bind "" = any, on an IPv6 dual-stack socket when there
// is one), or nullopt with err and why set.
std::optional<LineSocket> tcp_listen(const std::string& bind, std::uint16_t port, std::string& err,
                                     ListenFailure& why);
// The next client of `listener`, or nullopt when none came within timeout_ms (-1: wait
// forever).
std::optional<LineSocket> tcp_accept(const LineSocket& listener, int timeout_ms);

}  // namespace rxv
