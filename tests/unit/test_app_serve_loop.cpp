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
