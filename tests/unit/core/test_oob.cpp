#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "app/serve_loop.hpp"
#include "core/engine.hpp"
#include "core/oob.hpp"
#include "fake_verbs.hpp"

using namespace rxv;

TEST(Oob, HostPort) {
  auto hp = parse_host_port("peer");
  ASSERT_TRUE(hp);
  EXPECT_EQ(hp->host, "peer");
  EXPECT_EQ(hp->port, kDefaultPort);
  hp = parse_host_port("10.0.0.2:5000");
  ASSERT_TRUE(hp);
  EXPECT_EQ(hp->host, "10.0.0.2");
  EXPECT_EQ(hp->port, 5000);
  hp = parse_host_port("[fe80::1]:7");
  ASSERT_TRUE(hp);
  EXPECT_EQ(hp->host, "fe80::1");
  EXPECT_EQ(hp->port, 7);
  for (const char* bad : {"peer:0", "peer:x", "peer:", ":5", ""}) EXPECT_FALSE(parse_host_port(bad)) << bad;
}

// A peer's text is cut for a one-line answer; a cut inside a UTF-8 character made the JSON
// writer throw (found by fuzz_oob: regressions/abort-utf8-cut-in-unknown-op).
TEST(Oob, ShortenUtf8CutsAtACharacterBoundary) {
  EXPECT_EQ(shorten_utf8("abc", 3), "abc");
  EXPECT_EQ(shorten_utf8("abcd", 3), "abc...");
  const std::string e = "\xc3\xa9";                     // é: 2 bytes
  EXPECT_EQ(shorten_utf8("ab" + e + "z", 3), "ab...");  // the cut would split é
  EXPECT_EQ(shorten_utf8("ab" + e + "z", 4), "ab" + e + "...");
  const std::string euro = "\xe2\x82\xac";  // €: 3 bytes
  EXPECT_EQ(shorten_utf8(euro + euro, 4), euro + "...");
  EXPECT_EQ(shorten_utf8(euro, 2), "...");
  // what the writer then gets is valid: dump() does not throw
  EXPECT_NO_THROW((void)nlohmann::json(shorten_utf8("ab" + e + "z", 3)).dump());
}

TEST(Oob, QpJsonRoundTrip) {
  QpAddr a;
  a.qpn = 0x11;
  a.psn = 0xabcdef;
  for (int i = 0; i < 16; ++i) a.gid[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i * 17);
  auto b = qp_from_json(qp_to_json(a));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->qpn, a.qpn);
  EXPECT_EQ(b->psn, a.psn);
  EXPECT_EQ(b->gid, a.gid);
  EXPECT_FALSE(qp_from_json(nlohmann::json{{"qpn", 1}}));
  EXPECT_FALSE(qp_from_json(nlohmann::json{{"qpn", 1}, {"psn", 2}, {"gid", "zz"}}));
}

TEST(Oob, LineSocketFramingAndTimeout) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  LineSocket a(sv[0]), b(sv[1]);
  EXPECT_TRUE(a.send({{"op", "x"}, {"n", 1}}));
  EXPECT_TRUE(a.send({{"op", "y"}}));
  auto m1 = b.recv(std::chrono::seconds(2));
  auto m2 = b.recv(std::chrono::seconds(2));
  ASSERT_TRUE(m1 && m2);
  EXPECT_EQ((*m1)["op"], "x");
  EXPECT_EQ((*m2)["op"], "y");
  auto m3 = b.recv(std::chrono::milliseconds(100));
  ASSERT_FALSE(m3);
  EXPECT_NE(m3.error().summary.find("timed out"), std::string::npos);
  ::write(sv[0], "garbage\n", 8);
  auto m4 = b.recv(std::chrono::seconds(1));
  ASSERT_FALSE(m4);
  EXPECT_NE(m4.error().summary.find("malformed"), std::string::npos);
}

namespace {
std::uint16_t free_port() {
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
}  // namespace

// Server and client in one process with fake verbs: the fake QP's memcpy to the remote
// address reaches the server's staging buffer, so the whole protocol is exercised.
TEST(Oob, ServeAndRunEndToEndWithFakeVerbs) {
  rxv::testing::FakeControl sctl, cctl;
  rxv::testing::FakeProvider sprov(sctl);
  ServeOptions so;
  so.device = "rxe0";
  so.gid_index = 1;
  so.bind = "127.0.0.1";
  so.port = free_port();
  so.timeout = 20;
  int server_rc = -1;
  std::thread srv([&] { server_rc = run_server(sprov, so); });

  Result<LineSocket> sock = Error("not tried");
  for (int i = 0; i < 100 && !sock; ++i) {
    sock = tcp_connect("127.0.0.1", so.port, std::chrono::seconds(2));
    if (!sock) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(sock) << sock.error().summary;
  rxv::testing::FakeDevice cdev(cctl);
  auto qp = cdev.create_qp({}).value();
  RunConfig cfg;
  cfg.two_host = true;
  cfg.seed = 5;
  cfg.passes = 1;
  ASSERT_TRUE(sock->send(nlohmann::json{{"op", "hello"},
                                        {"version", 1},
                                        {"qp", qp_to_json(qp->local_addr())},
                                        {"staging", staging_bytes_for(cfg)}}));
  auto hr = sock->recv(std::chrono::seconds(10));
  ASSERT_TRUE(hr) << hr.error().summary;
  ASSERT_TRUE(hr->value("ok", false)) << hr->dump();
  auto st = (*hr)["staging"];
  RemotePeer peer(*sock, st["addr"].get<std::uint64_t>(), st["rkey"].get<std::uint32_t>(),
                  st["size"].get<std::uint64_t>(), std::chrono::seconds(10));
  Engine eng(cdev, *qp, peer, cfg, [] { return DiagInput{}; });
  auto r = eng.run_size(4ull << 20);
  EXPECT_EQ(r.result, SizeOutcome::Pass) << (r.diagnosis ? r.diagnosis->summary : "");
  EXPECT_GT(r.verified_bytes, 0u);

  // A corrupted write is reported by the server with the right offset.
  cctl.corrupt_op_at = cctl.ops + 1;
  cctl.corrupt_at = 3;
  auto r2 = eng.run_size(4ull << 20);
  EXPECT_EQ(r2.result, SizeOutcome::Fail);
  ASSERT_TRUE(r2.mismatch);
  EXPECT_EQ(r2.mismatch->direction, Direction::Write);

  EXPECT_TRUE(sock->send(nlohmann::json{{"op", "bye"}}));
  EXPECT_TRUE(sock->recv(std::chrono::seconds(5)));
  srv.join();
  EXPECT_EQ(server_rc, 0);
}

TEST(Oob, ServerHonoursTimeout) {
  rxv::testing::FakeControl ctl;
  rxv::testing::FakeProvider prov(ctl);
  ServeOptions so;
  so.device = "rxe0";
  so.bind = "127.0.0.1";
  so.port = free_port();
  so.timeout = 0.3;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(run_server(prov, so), 3);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}
