// app/serve_loop.cpp's error paths: run_server's lines and exit codes when it cannot
// listen or no client comes, and serve_session's refusals when the device fails it
// (the hostile-client refusals are in test_oob_hostile.cpp).
#include "app/serve_loop.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake_verbs.hpp"

using namespace rxv;
using rxv::testing::FakeControl;
using rxv::testing::FakeProvider;

namespace {
struct Served {
  int exit;
  std::string err;  // stderr
};
Served serve(const ServeOptions& o) {
  FakeControl c;
  FakeProvider prov(c);
  ::testing::internal::CaptureStderr();
  int rc = run_server(prov, o);
  return {rc, ::testing::internal::GetCapturedStderr()};
}
ServeOptions on(const std::string& bind, std::uint16_t port, double timeout = 0.2) {
  ServeOptions o;
  o.device = "rxe0";
  o.gid_index = 1;
  o.bind = bind;
  o.port = port;
  o.timeout = timeout;
  return o;
}
}  // namespace

TEST(AppServeLoop, PortInUseIsNotReadyAndNamesTheOption) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t l = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &l);
  const std::string port = std::to_string(ntohs(a.sin_port));
  auto s = serve(on("127.0.0.1", ntohs(a.sin_port)));
  close(fd);
  EXPECT_EQ(s.exit, kExitNotReady);
  EXPECT_EQ(s.err, "rxe-verify serve: error: cannot listen on port " + port +
                       ": Address already in use (choose another with --port)\n");
}

TEST(AppServeLoop, UnresolvableBindAddressIsAUsageError) {
  auto s = serve(on("no.such.host.invalid", 47910));
  EXPECT_EQ(s.exit, kExitUsage);
  EXPECT_EQ(s.err.rfind("rxe-verify serve: error: cannot resolve bind address 'no.such.host.invalid': ", 0),
            0u)
      << s.err;
  EXPECT_EQ(s.err.find('('), std::string::npos) << "no remedy in parentheses: " << s.err;
}

TEST(AppServeLoop, NoClientIsNotReady) {
  auto s = serve(on("127.0.0.1", 0, 0.2));  // port 0: the kernel picks a free one
  EXPECT_EQ(s.exit, kExitNotReady);
  EXPECT_NE(
      s.err.find("rxe-verify serve: no client within 0 s; giving up (use --timeout 0 to wait forever)\n"),
      std::string::npos)
      << s.err;
}

namespace {
// serve_session on a socketpair with a good hello: the reply line and the result.
struct Refused {
  std::string result, reply;
};
Refused session_with(FakeControl& c) {
  int sv[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const std::string hello =
      R"({"op":"hello","version":1,"qp":{"qpn":17,"psn":5,"gid":"00112233445566778899aabbccddeeff"},"staging":4096})"
      "\n";
  EXPECT_EQ(::write(sv[1], hello.data(), hello.size()), static_cast<ssize_t>(hello.size()));
  FakeProvider prov(c);
  ServeOptions o = on("", 0, 1);
  o.quiet = true;
  Refused r;
  {
    LineSocket s(sv[0]);
    auto done = serve_session(prov, o, s);
    r.result = done ? "" : done.error().summary;
  }
  LineSocket client(sv[1]);
  auto answer = client.recv(std::chrono::seconds(1));
  r.reply = answer ? answer->value("error", "") : "no answer: " + answer.error().summary;
  return r;
}
}  // namespace

// The device's own error, as before: the client reads it, the server logs it.
TEST(AppServeLoop, DeviceErrorsRefuseTheClientWithTheVerbsText) {
  FakeControl open_fails;
  open_fails.open_error = "cannot open rxe0: No such device";
  auto a = session_with(open_fails);
  EXPECT_EQ(a.result, "cannot open rxe0: No such device");
  EXPECT_EQ(a.reply, "cannot open rxe0: No such device");
  FakeControl qp_fails;
  qp_fails.create_qp_error = "ibv_create_cq: Cannot allocate memory";
  auto b = session_with(qp_fails);
  EXPECT_EQ(b.result, "ibv_create_cq: Cannot allocate memory");
  EXPECT_EQ(b.reply, "ibv_create_cq: Cannot allocate memory");
  FakeControl connect_fails;
  connect_fails.connect_error = "ibv_modify_qp(RTR): Invalid argument";
  auto c = session_with(connect_fails);
  EXPECT_EQ(c.result, "ibv_modify_qp(RTR): Invalid argument");
  EXPECT_EQ(c.reply, "ibv_modify_qp(RTR): Invalid argument");
  FakeControl down;
  down.port_active = false;
  auto d = session_with(down);
  EXPECT_EQ(d.reply, "port 1 of rxe0 is not ACTIVE on the server");
}

// The staging buffer is pinned on the server: the server's memlock check (serve_command
// gives it the host's RLIMIT_MEMLOCK) refuses the hello before anything is registered,
// naming the cause, which the client's hello parser keeps.
TEST(AppServeLoop, ServerMemlockRefusesTheHelloWithItsCause) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const std::string hello =
      R"({"op":"hello","version":2,"qp":{"qpn":17,"psn":5,"gid":"00112233445566778899aabbccddeeff"},"staging":4096})"
      "\n";
  ASSERT_EQ(::write(sv[1], hello.data(), hello.size()), static_cast<ssize_t>(hello.size()));
  FakeControl c;
  FakeProvider prov(c);
  ServeOptions o = on("", 0, 1);
  o.quiet = true;
  std::uint64_t asked = 0;
  o.memlock = [&asked](std::uint64_t staging) -> Result<void> {
    asked = staging;
    return Error("RLIMIT_MEMLOCK is 64 KiB, below the 4 KiB this run pins", "raise it", kExitNotReady,
                 "memlock");
  };
  {
    LineSocket s(sv[0]);
    auto done = serve_session(prov, o, s);
    ASSERT_FALSE(done);
    EXPECT_EQ(done.error().cause, "memlock");
  }
  EXPECT_EQ(asked, 4096u);
  EXPECT_EQ(c.regs, 0);  // nothing registered
  LineSocket client(sv[1]);
  auto answer = client.recv(std::chrono::seconds(1));
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->value("cause", ""), "memlock");
  auto parsed = parse_hello_reply(*answer);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error().cause, "memlock");
  EXPECT_EQ(parsed.error().summary,
            "server refused: RLIMIT_MEMLOCK is 64 KiB, below the 4 KiB this run pins; raise it");
}
