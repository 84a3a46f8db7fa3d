// app/run.cpp through the fakes: the loopback QP pair rebuilt after a failed size, the
// remaining sizes skipped after a two-host connection broke, memlock counted on the side
// that pins.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "app/app.hpp"
#include "app/serve_loop.hpp"
#include "app_fixtures.hpp"
#include "core/loopback.hpp"
#include "fake_host.hpp"
#include "fake_verbs.hpp"

using namespace rxv;
using rxv::testing::FakeControl;
using rxv::testing::FakeHost;
using rxv::testing::FakeProvider;
using rxv::testing::small_run;

namespace {

// Is something listening on 127.0.0.1:port (per /proc/net/tcp)?
bool listening(unsigned port) {
  std::ifstream f("/proc/net/tcp");
  std::string line;
  char want[8];
  std::snprintf(want, sizeof want, ":%04X", port);
  while (std::getline(f, line))
    if (line.find(std::string(want) + " ") != std::string::npos && line.find(" 0A ") != std::string::npos)
      return true;
  return false;
}

}  // namespace

TEST(AppRun, LoopbackPassesEverySize) {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  Outcome out = run_command(small_run({"64K,128K+16"}), prov, host);
  EXPECT_EQ(out.exit, kExitPass);
  ASSERT_TRUE(out.has_report);
  EXPECT_EQ(out.report["verdict"], "pass");
  EXPECT_EQ(out.report["transport"], "loopback");
  EXPECT_EQ(out.report["gid_index"], 1);  // the RoCE v2 IPv4-mapped GID
  ASSERT_EQ(out.report["results"].size(), 2u);
  EXPECT_NE(out.text.find("64 KiB"), std::string::npos) << out.text;
}

TEST(AppRun, LoopbackRebuildsTheQpPairAfterAFailedSize) {
  FakeControl c;
  c.fail_op_at = 0;  // the first WRITE of the first size: its QP pair is broken
  FakeProvider prov(c);
  FakeHost host;
  Outcome out = run_command(small_run({"64K", "64K", "64K"}), prov, host);
  EXPECT_EQ(out.exit, kExitFail);
  const auto& r = out.report["results"];
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0]["result"], "fail");
  // the next sizes ran on a new pair instead of being skipped or failing on the old one
  EXPECT_EQ(r[1]["result"], "pass") << r[1].dump();
  EXPECT_EQ(r[2]["result"], "pass") << r[2].dump();
  EXPECT_EQ(out.report["verdict"], "fail");
}

TEST(AppRun, TwoHostSkipsTheRemainingSizesAfterABrokenConnection) {
  // The server is run_server on another fake device in this process: the fake QPs copy
  // into its staging buffer directly, as RDMA would into the peer's memory.
  FakeControl sc;
  FakeProvider sprov(sc);
  ServeOptions so;
  so.device = "rxe0";
  so.gid_index = 1;
  so.bind = "127.0.0.1";
  so.port = static_cast<std::uint16_t>(20000 + getpid() % 20000);
  so.timeout = 30;
  int server_rc = -1;
  std::thread server([&] { server_rc = run_server(sprov, so); });
  for (int i = 0; i < 500 && !listening(so.port); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(listening(so.port));

  FakeControl c;
  c.fail_op_at = 0;  // the client's QP breaks on its first operation
  FakeProvider prov(c);
  FakeHost host;
  RunCommandConfig o = small_run({"64K", "128K", "256K"});
  o.connect = "127.0.0.1:" + std::to_string(so.port);
  Outcome out = run_command(o, prov, host);
  server.join();
  EXPECT_EQ(out.exit, kExitFail);
  EXPECT_EQ(out.report["transport"], "tcp " + o.connect);
  const auto& r = out.report["results"];
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0]["result"], "fail");
  for (int i : {1, 2}) {
    EXPECT_EQ(r[i]["result"], "skip") << r[i].dump();
    EXPECT_EQ(r[i]["diagnosis"]["cause"], "skipped");
  }
  EXPECT_EQ(server_rc, kExitPass);  // the client said bye
}

TEST(AppRun, PortDownIsNotReadyWithAReport) {
  FakeControl c;
  c.port_active = false;
  FakeProvider prov(c);
  FakeHost host;
  Outcome out = run_command(small_run({"64K"}), prov, host);
  EXPECT_EQ(out.exit, kExitNotReady);
  ASSERT_TRUE(out.has_report);
  EXPECT_EQ(out.report["verdict"], "not_ready");
  EXPECT_TRUE(out.text.empty());
}

TEST(AppRun, TxDepthSizesTheQueuePair) {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  auto o = small_run({"256K"});
  o.tx_depth = 24;
  Outcome out = run_command(o, prov, host);
  EXPECT_EQ(out.exit, kExitPass) << out.report.dump();
  EXPECT_EQ(c.created_depth, 24u);
  EXPECT_EQ(c.created_wait.mode, WaitMode::Adaptive);
  EXPECT_LE(c.max_in_flight, 24u);
  EXPECT_EQ(c.overcommits, 0u);
  const auto& w = out.report["results"][0]["write"];
  EXPECT_GT(w["iterations"].get<std::uint64_t>(), 0u);
  EXPECT_GT(w["wall_seconds"].get<double>(), 0.0);
  o.tx_depth = 0;
  EXPECT_THROW(run_command(o, prov, host), UsageError);
}

TEST(AppRun, IterationsDurationAndGbits) {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  auto o = small_run({"1M"});
  o.mode = "full";
  o.msg_size = "256K";
  o.iters = 9;  // 4 transfers per pass: 3 passes
  o.report_gbits = true;
  o.busy_poll = true;
  Outcome out = run_command(o, prov, host);
  EXPECT_EQ(c.created_wait.mode, WaitMode::BusyPoll);
  EXPECT_EQ(out.exit, kExitPass) << out.report.dump();
  const auto& r = out.report["results"][0];
  EXPECT_EQ(r["passes"], 3);
  EXPECT_EQ(r["write"]["transfers"], 12);
  EXPECT_NE(out.text.find("BW average[Gb/sec]"), std::string::npos) << out.text;
  EXPECT_EQ(out.text.find("MiB/s]"), std::string::npos) << out.text;
  o.report_gbits = false;
  EXPECT_NE(run_command(o, prov, host).text.find("BW average[MiB/s]"), std::string::npos);
  for (long long bad : {0ll, -5ll}) {
    o.iters = bad;
    EXPECT_THROW(run_command(o, prov, host), UsageError) << bad;
  }
  o.iters = -1;
  o.duration = -1;
  EXPECT_THROW(run_command(o, prov, host), UsageError);
}

TEST(AppRun, WaitingModeReachesTheQueuePairsAndTheReport) {
  struct Case {
    bool busy_poll, no_spin;
    WaitMode mode;
    const char* json_mode;
    nlohmann::json spin_us;
  };
  for (const Case& k : {Case{false, false, WaitMode::Adaptive, "adaptive", kDefaultSpin.count()},
                        Case{true, false, WaitMode::BusyPoll, "busy_poll", nullptr},
                        Case{false, true, WaitMode::Event, "event", 0}}) {
    FakeControl c;
    FakeProvider prov(c);
    FakeHost host;
    auto o = small_run({"64K"});
    o.busy_poll = k.busy_poll;
    o.no_spin = k.no_spin;
    Outcome out = run_command(o, prov, host);
    EXPECT_EQ(out.exit, kExitPass) << k.json_mode;
    EXPECT_EQ(c.created_wait.mode, k.mode) << k.json_mode;
    EXPECT_EQ(c.created_wait.spin, kDefaultSpin) << k.json_mode;
    EXPECT_EQ(out.report["completion_wait"]["mode"], k.json_mode);
    EXPECT_EQ(out.report["completion_wait"]["spin_us"], k.spin_us) << k.json_mode;
  }
  // the spin is a parameter of the run (the default mode's only)
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  auto o = small_run({"64K"});
  o.spin = std::chrono::microseconds(200);
  Outcome out = run_command(o, prov, host);
  EXPECT_EQ(c.created_wait.spin, std::chrono::microseconds(200));
  EXPECT_EQ(out.report["completion_wait"]["spin_us"], 200);
  // --spin USEC takes its place (test_run_options.cpp: its values and conflicts)
  o.spin_option = "1000";
  out = run_command(o, prov, host);
  EXPECT_EQ(c.created_wait.mode, WaitMode::Adaptive);
  EXPECT_EQ(c.created_wait.spin, std::chrono::microseconds(1000));
  EXPECT_EQ(out.report["completion_wait"]["spin_us"], 1000);
  o.spin_option.reset();
  // an environment failure's report says it too
  c.port_active = false;
  o.no_spin = true;
  EXPECT_EQ(run_command(o, prov, host).report["completion_wait"]["mode"], "event");
}

TEST(AppRun, BusyPollAndNoSpinExcludeEachOther) {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  auto o = small_run({"64K"});
  o.busy_poll = true;
  o.no_spin = true;
  try {
    run_command(o, prov, host);
    ADD_FAILURE() << "no usage error";
  } catch (const UsageError& u) {
    EXPECT_NE(std::string(u.what()).find("--busy-poll and --no-spin: pick one"), std::string::npos)
        << u.what();
  }
  EXPECT_EQ(c.regs, 0) << "nothing is registered before the options are checked";
}

namespace {
struct Ran {
  Outcome out;
  std::string err;  // stderr
};
Ran run_capturing(const RunCommandConfig& o, Provider& prov, HostEnv& host) {
  ::testing::internal::CaptureStderr();
  Outcome out = run_command(o, prov, host);
  return {std::move(out), ::testing::internal::GetCapturedStderr()};
}
// A 127.0.0.1 listener whose one client gets `answer` (a JSON line, or nothing: closed)
// after its hello.
struct OneShotServer {
  Result<LineSocket> listener = tcp_listen("127.0.0.1", 0);
  std::uint16_t port = 0;
  std::thread th;
  explicit OneShotServer(std::string answer) {
    sockaddr_in a{};
    socklen_t l = sizeof a;
    getsockname(listener->fd(), reinterpret_cast<sockaddr*>(&a), &l);
    port = ntohs(a.sin_port);
    th = std::thread([this, answer] {
      auto c = tcp_accept(*listener, 10000);
      if (!c) return;
      (void)c->recv(std::chrono::seconds(5));
      if (!answer.empty()) (void)::write(c->fd(), answer.data(), answer.size());
    });
  }
  ~OneShotServer() { th.join(); }
};
}  // namespace

// The device does not open: the verbs text, the remedy, exit 3, the report's no_device.
TEST(AppRun, OpenFailureIsNotReadyWithTheRemedy) {
  FakeControl c;
  c.open_error = "cannot open rxe0: No such device";
  FakeProvider prov(c);
  FakeHost host;
  auto r = run_capturing(small_run({"64K"}), prov, host);
  EXPECT_EQ(r.out.exit, kExitNotReady);
  EXPECT_EQ(r.err,
            "rxe-verify run: error: cannot open rxe0: No such device; load ib_uverbs and rdma_rxe and check "
            "that `rdma link show` lists rxe0\n");
  ASSERT_TRUE(r.out.has_report);
  EXPECT_EQ(r.out.report["error"]["cause"], "no_device");
  EXPECT_EQ(r.out.report["error"]["summary"], "cannot open rxe0: No such device");
}

TEST(AppRun, LoopbackQpThatCannotBeCreatedIsNotReady) {
  FakeControl c;
  c.create_qp_error = "ibv_create_cq: Cannot allocate memory";
  FakeProvider prov(c);
  FakeHost host;
  auto r = run_capturing(small_run({"64K"}), prov, host);
  EXPECT_EQ(r.out.exit, kExitNotReady);
  EXPECT_EQ(r.err, "rxe-verify run: error: ibv_create_cq: Cannot allocate memory\n");
  EXPECT_EQ(r.out.report["error"]["cause"], "unknown");
}

TEST(AppRun, PortDownLineNamesTheNetdev) {
  FakeControl c;
  c.port_active = false;
  FakeProvider prov(c);
  FakeHost host;
  auto r = run_capturing(small_run({"64K"}), prov, host);
  EXPECT_EQ(
      r.err,
      "rxe-verify run: error: port 1 of rxe0 is PORT_DOWN; bring its netdev up: `ip link set eth0 up`\n");
  EXPECT_EQ(r.out.report["error"]["cause"], "device_down");
}

// --connect to a port nothing listens on: exit 3, what to start where.
TEST(AppRun, TwoHostConnectionRefusedSaysToStartServe) {
  std::uint16_t port;
  {
    auto l = tcp_listen("127.0.0.1", 0);  // a free port, closed again
    ASSERT_TRUE(l);
    sockaddr_in a{};
    socklen_t len = sizeof a;
    getsockname(l->fd(), reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  auto o = small_run({"64K"});
  o.connect = "127.0.0.1:" + std::to_string(port);
  auto r = run_capturing(o, prov, host);
  const std::string p = std::to_string(port);
  EXPECT_EQ(r.out.exit, kExitNotReady);
  EXPECT_EQ(r.err,
            "rxe-verify run: error: cannot connect to 127.0.0.1:" + p +
                ": Connection refused; start `rxe-verify serve` on 127.0.0.1 and check that TCP port " + p +
                " is reachable\n");
  EXPECT_EQ(r.out.report["error"]["cause"], "network_path_or_firewall");
}

TEST(AppRun, TwoHostServerThatClosesIsNoAnswer) {
  OneShotServer s("");
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  auto o = small_run({"64K"});
  o.connect = "127.0.0.1:" + std::to_string(s.port);
  auto r = run_capturing(o, prov, host);
  EXPECT_EQ(r.out.exit, kExitNotReady);
  EXPECT_EQ(r.err, "rxe-verify run: error: no answer from the server: connection closed by peer\n");
  EXPECT_EQ(r.out.report["error"]["cause"], "network_path_or_firewall");
}

TEST(AppRun, TwoHostServerThatRefusesIsNamed) {
  OneShotServer s("{\"ok\":false,\"error\":\"port 1 of rxe0 is not ACTIVE on the server\"}\n");
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  auto o = small_run({"64K"});
  o.connect = "127.0.0.1:" + std::to_string(s.port);
  auto r = run_capturing(o, prov, host);
  EXPECT_EQ(r.out.exit, kExitNotReady);
  EXPECT_EQ(r.err, "rxe-verify run: error: server refused: port 1 of rxe0 is not ACTIVE on the server\n");
  EXPECT_EQ(r.out.report["error"]["cause"], "unknown");
}

TEST(AppRun, TwoHostQpThatCannotBeCreatedIsNotReady) {
  FakeControl c;
  c.create_qp_error = "ibv_create_qp: Cannot allocate memory";
  FakeProvider prov(c);
  FakeHost host;
  auto o = small_run({"64K"});
  o.connect = "127.0.0.1:9";
  auto r = run_capturing(o, prov, host);
  EXPECT_EQ(r.out.exit, kExitNotReady);
  EXPECT_EQ(r.err, "rxe-verify run: error: ibv_create_qp: Cannot allocate memory\n");
}

// A usage error from device choice is thrown, not reported (rv-device-unknown).
TEST(AppRun, UnknownDeviceIsAUsageError) {
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  auto o = small_run({"64K"});
  o.device = "nosuchdev";
  try {
    (void)run_command(o, prov, host);
    ADD_FAILURE() << "no usage error";
  } catch (const UsageError& u) {
    EXPECT_EQ(
        std::string(u.what()),
        "unknown device 'nosuchdev' (available: rxe0); name one listed by `rxe-verify doctor`, or leave "
        "--device out");
    EXPECT_EQ(u.exit(), kExitUsage);
  }
}

// The device's max_mr_size is respected: a region (or one --split piece) above it is a
// usage error naming the limit and --split, before anything is allocated.
TEST(AppRun, RegionAboveMaxMrSizeIsAUsageError) {
  FakeControl c;
  c.max_mr_size = 16ull << 20;  // the 15 MiB sampled staging buffer fits
  FakeProvider prov(c);
  FakeHost host;
  try {
    run_command(small_run({"32M"}), prov, host);
    ADD_FAILURE() << "no usage error";
  } catch (const UsageError& u) {
    EXPECT_EQ(u.exit(), kExitUsage);
    EXPECT_NE(std::string(u.what()).find("max_mr_size (16 MiB)"), std::string::npos) << u.what();
    EXPECT_NE(std::string(u.what()).find("--split"), std::string::npos) << u.what();
  }
  EXPECT_EQ(c.regs, 0);
  auto o = small_run({"32M"});
  o.split = 4;  // four 8 MiB MRs fit
  EXPECT_EQ(run_command(o, prov, host).exit, kExitPass);
}

namespace {
// A server thread on its own fake device (as in TwoHostSkipsTheRemainingSizes...).
struct Server {
  FakeControl sc;
  FakeProvider sprov{sc};
  ServeOptions so;
  int rc = -1;
  std::thread th;
  explicit Server(unsigned salt) {
    so.device = "rxe0";
    so.gid_index = 1;
    so.bind = "127.0.0.1";
    so.port = static_cast<std::uint16_t>(20000 + (getpid() + salt) % 20000);
    so.timeout = 30;
  }
  void start() {
    th = std::thread([this] { rc = run_server(sprov, so); });
    for (int i = 0; i < 500 && !listening(so.port); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ~Server() {
    if (th.joinable()) th.join();
  }
};
}  // namespace

// The client of a two-host run pins its region only: a 1 MiB memlock limit holds a 64 KiB
// region, though not the 16 MiB staging buffer (the server's, pinned there).
TEST(AppRun, TwoHostClientCountsItsRegionNotTheServersStaging) {
  Server srv(7);
  srv.start();
  ASSERT_TRUE(listening(srv.so.port));
  FakeControl c;
  FakeProvider prov(c);
  FakeHost host;
  host.files["/proc/self/limits"] =
      "Limit                     Soft Limit           Hard Limit           Units     \n"
      "Max locked memory         1048576              1048576              bytes     \n";
  RunCommandConfig o = small_run({"64K"});
  o.connect = "127.0.0.1:" + std::to_string(srv.so.port);
  Outcome out = run_command(o, prov, host);
  EXPECT_EQ(out.exit, kExitPass) << out.text;
  EXPECT_EQ(out.report["verdict"], "pass") << out.report.dump();
}
