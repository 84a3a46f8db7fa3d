// What fuzz_oob feeds the out-of-band code, shared with the unit tests that replay
// tests/fuzz/regressions (tests/unit/core/test_oob_hostile.cpp): the input is the byte stream a
// TCP peer sent, delivered over a socketpair whose far end is then shut for writing.
//
// The first input byte picks the side:
//   even: the input is what a client sends to `rxe-verify serve` (hello, fill, verify,
//         bye, garbage...); serve_session runs against the fake verbs of tests/unit (the
//         staging buffer is real memory, so an out-of-bounds fill or verify is an ASan
//         report).
//   odd:  the input is what a server answers to `run --connect`: the client parses the
//         hello reply (parse_hello_reply) and the replies to one fill and one verify
//         (RemotePeer).
#pragma once
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "../unit/fake_verbs.hpp"
#include "app/serve_loop.hpp"
#include "core/local_peer.hpp"
#include "core/oob.hpp"

namespace rxv::fuzz {

// Both ends of the socketpair: `reader` gets the input then end-of-stream; it is
// non-blocking, so replies nobody reads fail with EAGAIN once the buffer is full instead
// of blocking. `writer` can read the replies.
struct Fed {
  int reader = -1, writer = -1;
  Fed() = default;
  Fed(const Fed&) = delete;
  Fed& operator=(const Fed&) = delete;
  ~Fed() {
    if (writer >= 0) ::close(writer);
  }
};

inline bool feed(const std::uint8_t* data, std::size_t size, Fed& f) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
  int big = 4 << 20;
  setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  std::size_t off = 0;
  while (off < size) {
    ssize_t n = ::send(sv[1], data + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) {  // more than the socket holds: not an input this harness takes
      ::close(sv[0]);
      ::close(sv[1]);
      return false;
    }
    off += static_cast<std::size_t>(n);
  }
  ::shutdown(sv[1], SHUT_WR);
  fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
  f.reader = sv[0];
  f.writer = sv[1];
  return true;
}

inline ServeOptions fuzz_serve_options() {
  ServeOptions o;
  o.device = "rxe0";
  o.gid_index = 1;
  o.timeout = 1;
  o.quiet = true;
  o.max_staging = 1 << 20;  // what a client may ask for; 1 MiB keeps executions fast
  return o;
}

// Runs one session on `input`; returns serve_session's result. f keeps the client end.
inline Result<void> server_side(const std::uint8_t* data, std::size_t size, Fed& f) {
  if (!feed(data, size, f)) return Error("input too large for the harness");
  LineSocket s(f.reader);
  rxv::testing::FakeControl c;
  rxv::testing::FakeProvider prov(c);
  return serve_session(prov, fuzz_serve_options(), s);
}

inline void client_side(const std::uint8_t* data, std::size_t size) {
  Fed f;
  if (!feed(data, size, f)) return;
  LineSocket s(f.reader);
  auto hello = s.recv(std::chrono::seconds(1));
  if (!hello) return;
  auto h = parse_hello_reply(*hello);
  if (!h) return;
  RemotePeer peer(s, h->staging_addr, h->staging_rkey, h->staging_size, std::chrono::seconds(1));
  (void)peer.fill(0, 0, 64, 1);
  (void)peer.verify(0, 0, 64, 1, {{1, "this run"}, {2, "an earlier pass"}}, 1 << 20);
}

inline void one_input(const std::uint8_t* data, std::size_t size) {
  if (size < 1 || size > (2u << 20)) return;
  if (data[0] % 2 == 0) {
    Fed f;
    (void)server_side(data + 1, size - 1, f);
  } else {
    client_side(data + 1, size - 1);
  }
}

}  // namespace rxv::fuzz
