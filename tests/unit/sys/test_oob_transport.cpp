// oob_transport.cpp's error paths: each Result carries the message the code gave before
// the one error channel (result.hpp) and the exit code its caller used for it.
#include "sys/oob_transport.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "core/diagnosis.hpp"

using namespace rxv;

namespace {
// A port on 127.0.0.1 that nothing listens on (bound, then closed).
std::uint16_t closed_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t l = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &l);
  close(fd);
  return ntohs(a.sin_port);
}
std::string summary_of(const Result<HostPort>& r) { return r ? "accepted" : r.error().summary; }
}  // namespace

// --connect's messages (the bad-input table's rv-connect-*), each a usage error.
TEST(OobTransport, HostPortErrorsAreUsageErrors) {
  EXPECT_EQ(summary_of(parse_host_port("peer:0")), "bad port in 'peer:0' (use 1-65535)");
  EXPECT_EQ(summary_of(parse_host_port("peer:65536")), "bad port in 'peer:65536' (use 1-65535)");
  EXPECT_EQ(summary_of(parse_host_port("peer:")), "bad port in 'peer:' (use 1-65535)");
  EXPECT_EQ(summary_of(parse_host_port("[::1]:x")), "bad port in '[::1]:x' (use 1-65535)");
  EXPECT_EQ(summary_of(parse_host_port(":47910")), "bad peer address ':47910': missing host");
  EXPECT_EQ(summary_of(parse_host_port("[::1")), "bad peer address '[::1' (use [IPv6]:PORT)");
  EXPECT_EQ(summary_of(parse_host_port("[::1]x")), "bad peer address '[::1]x'");
  EXPECT_EQ(summary_of(parse_host_port("")), "empty peer address");
  for (const char* bad : {"peer:0", ":5", "[::1", ""}) {
    auto r = parse_host_port(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().exit, kExitUsage) << bad;
  }
}

// std::from_chars reads the port as strtol did: leading blanks, a '+' and leading zeros
// are taken, a sign, a trailing blank or a hexadecimal prefix are not.
TEST(OobTransport, PortParsingIsUnchanged) {
  for (auto [text, port] : std::initializer_list<std::pair<const char*, int>>{
           {"peer: 5", 5}, {"peer:+5", 5}, {"peer:0080", 80}, {"peer:65535", 65535}, {"peer:1", 1}}) {
    auto r = parse_host_port(text);
    ASSERT_TRUE(r) << text;
    EXPECT_EQ(r->port, port) << text;
  }
  for (const char* bad :
       {"peer:-5", "peer:5 ", "peer:0x10", "peer:99999999999999999999", "peer:+", "peer:++5"})
    EXPECT_EQ(summary_of(parse_host_port(bad)), "bad port in '" + std::string(bad) + "' (use 1-65535)");
}

TEST(OobTransport, ConnectRefusedIsNotReadyOnTheNetwork) {
  const std::uint16_t port = closed_port();
  auto r = tcp_connect("127.0.0.1", port, std::chrono::seconds(2));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().summary,
            "cannot connect to 127.0.0.1:" + std::to_string(port) + ": Connection refused");
  EXPECT_EQ(r.error().exit, kExitNotReady);
  EXPECT_EQ(r.error().cause, cause::kNetwork);
}

TEST(OobTransport, ConnectToANameThatDoesNotResolve) {
  auto r = tcp_connect("", 47910, std::chrono::seconds(2));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().summary.rfind("cannot resolve '': ", 0), 0u) << r.error().summary;
  EXPECT_EQ(r.error().exit, kExitNotReady);
}

// serve's listen errors: a port in use is exit 3 with the remedy serve prints in
// parentheses, a bind address that does not resolve is a usage error (exit 2).
TEST(OobTransport, ListenErrors) {
  auto first = tcp_listen("127.0.0.1", closed_port());
  ASSERT_TRUE(first) << first.error().summary;
  sockaddr_in a{};
  socklen_t l = sizeof a;
  getsockname(first->fd(), reinterpret_cast<sockaddr*>(&a), &l);
  const std::uint16_t port = ntohs(a.sin_port);
  int busy = socket(AF_INET, SOCK_STREAM, 0);  // the same port without SO_REUSEADDR: taken
  a.sin_port = htons(port);
  if (bind(busy, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) FAIL() << "port " << port << " not taken";
  close(busy);
  auto second = tcp_listen("127.0.0.1", port);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().summary,
            "cannot listen on port " + std::to_string(port) + ": Address already in use");
  EXPECT_EQ(second.error().remedy, "choose another with --port");
  EXPECT_EQ(second.error().exit, kExitNotReady);

  auto unresolved = tcp_listen("no.such.host.invalid", port);
  ASSERT_FALSE(unresolved);
  EXPECT_EQ(unresolved.error().summary.rfind("cannot resolve bind address 'no.such.host.invalid': ", 0), 0u)
      << unresolved.error().summary;
  EXPECT_EQ(unresolved.error().remedy, "");
  EXPECT_EQ(unresolved.error().exit, kExitUsage);
}

TEST(OobTransport, AcceptTimesOutNotReady) {
  auto l = tcp_listen("127.0.0.1", closed_port());
  ASSERT_TRUE(l);
  auto c = tcp_accept(*l, 50);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().summary, "no client within 50 ms");
  EXPECT_EQ(c.error().exit, kExitNotReady);
}

// recv's errors, in the words serve refuses a client with and run reports.
TEST(OobTransport, RecvErrors) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  LineSocket a(sv[0]), b(sv[1]);
  auto timed = b.recv(std::chrono::milliseconds(50));
  ASSERT_FALSE(timed);
  EXPECT_EQ(timed.error().summary, "timed out waiting for the peer");
  EXPECT_FALSE(closed_by_peer(timed.error()));
  ASSERT_EQ(::write(sv[0], "[1,2]\n", 6), 6);  // JSON, but not an object
  auto malformed = b.recv(std::chrono::seconds(1));
  ASSERT_FALSE(malformed);
  EXPECT_EQ(malformed.error().summary, "malformed message from peer");
  std::string big(kMaxMessageBytes + 2, 'a');
  std::thread writer([&] { (void)::write(sv[0], big.data(), big.size()); });
  auto too_long = b.recv(std::chrono::seconds(5));
  writer.join();
  ASSERT_FALSE(too_long);
  EXPECT_EQ(too_long.error().summary, "message from peer too long (over 65536 bytes without a newline)");
}

TEST(OobTransport, RecvAndSendOnAClosedPeer) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  LineSocket b(sv[1]);
  ::close(sv[0]);
  auto closed = b.recv(std::chrono::seconds(1));
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().summary, "connection closed by peer");
  EXPECT_TRUE(closed_by_peer(closed.error()));
  auto sent = b.send({{"op", "bye"}});
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error().summary, "send: Broken pipe");
}

// A non-blocking socket whose peer reads late: send waits for room (EAGAIN), it does not
// fail the message half-sent.
TEST(OobTransport, SendWaitsOutAFullBufferOnANonBlockingSocket) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  int small = 4096;
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  LineSocket a(sv[0]), b(sv[1]);
  const std::string text(48 * 1024, 'x');  // more than both buffers hold
  std::thread reader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto got = b.recv(std::chrono::seconds(5));
    ASSERT_TRUE(got) << got.error().summary;
    EXPECT_EQ((*got)["t"], text);
  });
  auto sent = a.send(nlohmann::json{{"t", text}});
  reader.join();
  EXPECT_TRUE(sent) << sent.error().summary;
}
