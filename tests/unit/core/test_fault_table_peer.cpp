// The fault table's desynchronised-peer rows (issue 62, userspace/README.md "Fault
// table"): a two-host run whose out-of-band replies are tampered with by a proxy between
// the client's RemotePeer and `rxe-verify serve`'s loop. One reply of the first size is
// repeated (Duplicate), replaced by the reply to the request before it (Stale), or held
// until the client's next request so that every later request gets the answer of the
// one before (Late: the reply of a request the client gave up on). The run must FAIL the
// size with the named cause, and a second size on the same connection must not pass
// (the session is over). Each row ~0.1 s, Late rows ~1.1 s (the reply timeout).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "app/serve_loop.hpp"
#include "core/engine.hpp"
#include "core/oob.hpp"
#include "fake_verbs.hpp"
#include "serve_thread.hpp"

using namespace rxv;
using rxv::testing::FakeControl;
using rxv::testing::FakeDevice;

namespace {

enum class Desync { Duplicate, Stale, Late };
enum class RunMode { Sampled, Full };
struct Row {
  Desync fault;
  RunMode mode;
  OpCode dir;  // Write: a verify's reply is tampered with; Read: a fill's
};

std::string row_name(const ::testing::TestParamInfo<Row>& i) {
  const Row& r = i.param;
  const char* f = r.fault == Desync::Duplicate ? "ReplyDuplicate"
                  : r.fault == Desync::Stale   ? "ReplyStale"
                                               : "ReplyLate";
  return std::string(f) + (r.mode == RunMode::Sampled ? "_Sampled" : "_Full") +
         (r.dir == OpCode::Write ? "_Write" : "_Read");
}

constexpr std::uint64_t kSize = (4ull << 20) + 100;

RunConfig config(RunMode m) {
  RunConfig c;
  c.seed = 62;
  c.op_timeout = 0.3;
  c.two_host = true;
  if (m == RunMode::Full) {
    c.mode = Mode::Full;
    c.msg_size = 1ull << 20;
    c.passes = 1;
  }
  return c;
}

int listen_any(std::uint16_t& port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  listen(fd, 1);
  socklen_t l = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &l);
  port = ntohs(a.sin_port);
  return fd;
}

void send_all(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<std::size_t>(n);
  }
}

// A line proxy client <-> server that tampers with the reply to the second request of
// `op` ("verify" or "fill"), once.
class Proxy {
 public:
  Proxy(std::uint16_t server_port, Desync f, std::string op) : f_(f), op_(std::move(op)) {
    lfd_ = listen_any(port_);
    th_ = std::thread([this, server_port] { run(server_port); });
  }
  ~Proxy() {
    stop_ = true;
    th_.join();
    close(lfd_);
  }
  std::uint16_t port() const { return port_; }
  bool fired() const { return fired_; }

 private:
  void run(std::uint16_t server_port) {
    pollfd lp{lfd_, POLLIN, 0};
    if (poll(&lp, 1, 10000) <= 0) return;
    int c = accept(lfd_, nullptr, nullptr);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(server_port);
    int s = -1;
    for (int i = 0; i < 200 && s < 0; ++i) {  // the server thread may not listen yet
      s = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        close(s);
        s = -1;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    if (s < 0) {
      close(c);
      return;
    }
    std::string from_c, from_s;
    while (!stop_) {
      pollfd p[2] = {{c, POLLIN, 0}, {s, POLLIN, 0}};
      if (poll(p, 2, 20) <= 0) continue;
      char b[65536];
      if (p[0].revents) {
        ssize_t n = recv(c, b, sizeof b, 0);
        if (n <= 0) break;
        from_c.append(b, static_cast<std::size_t>(n));
        for (auto nl = from_c.find('\n'); nl != std::string::npos; nl = from_c.find('\n')) {
          std::string line = from_c.substr(0, nl + 1);
          from_c.erase(0, nl + 1);
          auto j = nlohmann::json::parse(line, nullptr, false);
          ops_.push_back(j.is_object() ? j.value("op", std::string()) : std::string());
          if (!held_.empty()) {  // Late: the held reply answers this request
            send_all(c, held_);
            held_.clear();
          }
          send_all(s, line);
        }
      }
      if (p[1].revents) {
        ssize_t n = recv(s, b, sizeof b, 0);
        if (n <= 0) break;
        from_s.append(b, static_cast<std::size_t>(n));
        for (auto nl = from_s.find('\n'); nl != std::string::npos; nl = from_s.find('\n')) {
          std::string line = from_s.substr(0, nl + 1);
          from_s.erase(0, nl + 1);
          reply(c, line);
        }
      }
    }
    close(c);
    close(s);
  }
  // One reply of the server, in request order.
  void reply(int c, const std::string& line) {
    std::string op = ops_.empty() ? "" : ops_.front();
    if (!ops_.empty()) ops_.pop_front();
    const bool target = !fired_ && op == op_ && seen_++ == 1;
    if (late_) {  // every reply from the held one on is one request late
      held_ = line;
      return;
    }
    if (!target) {
      send_all(c, line);
      prev_ = line;
      return;
    }
    fired_ = true;
    switch (f_) {
      case Desync::Duplicate:
        send_all(c, line);
        send_all(c, line);
        break;
      case Desync::Stale:
        send_all(c, prev_);
        break;
      case Desync::Late:
        late_ = true;
        held_ = line;
        break;
    }
  }

  Desync f_;
  std::string op_;
  int lfd_ = -1;
  std::uint16_t port_ = 0;
  std::thread th_;
  std::atomic<bool> stop_{false}, fired_{false};
  std::deque<std::string> ops_;
  std::string prev_, held_;
  unsigned seen_ = 0;
  bool late_ = false;
};

class PeerDesync : public ::testing::TestWithParam<Row> {};

}  // namespace

TEST_P(PeerDesync, FailsWithItsCause) {
  const Row row = GetParam();
  FakeControl cctl;
  rxv::testing::ServeThread srv;
  auto proxy = std::make_unique<Proxy>(srv.so.port, row.fault, row.dir == OpCode::Write ? "verify" : "fill");
  Result<LineSocket> sock = tcp_connect("127.0.0.1", proxy->port(), std::chrono::seconds(2));
  ASSERT_TRUE(sock) << sock.error().summary;
  FakeDevice cdev(cctl);
  auto qp = cdev.create_qp({}).value();
  const RunConfig cfg = config(row.mode);
  auto st = rxv::testing::hello(*sock, qp->local_addr(), staging_bytes_for(cfg), 2);
  ASSERT_TRUE(st);
  RemotePeer peer(*sock, st->addr, st->rkey, st->size, std::chrono::seconds(1));
  const std::string want = row.fault == Desync::Late ? "peer_timeout" : "peer_out_of_step";
  {
    Engine eng(cdev, *qp, peer, cfg, [] { return DiagInput{}; });
    const SizeResult s = eng.run_size(kSize);
    EXPECT_TRUE(proxy->fired()) << "the fault was never injected";
    EXPECT_EQ(s.result, SizeOutcome::Fail) << "the size PASSED with the fault";
    if (s.diagnosis) {
      EXPECT_EQ(s.diagnosis->cause, want) << s.diagnosis->summary;
    }
  }
  {
    // a second size on the same connection (a new QP: as `run` after a failed size with
    // nothing in flight): no answer may count
    auto qp2 = cdev.create_qp({}).value();
    Engine eng(cdev, *qp2, peer, cfg, [] { return DiagInput{}; });
    const SizeResult s = eng.run_size(kSize);
    EXPECT_EQ(s.result, SizeOutcome::Fail) << "a size after the slip PASSED";
    if (s.diagnosis) {
      EXPECT_EQ(s.diagnosis->cause, want) << s.diagnosis->summary;
    }
  }
  *sock = LineSocket();  // the client goes: the proxy and the server see the end
  proxy.reset();
  srv.join();
}

namespace {
std::vector<Row> rows() {
  std::vector<Row> v;
  for (Desync f : {Desync::Duplicate, Desync::Stale, Desync::Late})
    for (RunMode m : {RunMode::Sampled, RunMode::Full})
      for (OpCode d : {OpCode::Write, OpCode::Read}) v.push_back({f, m, d});
  return v;
}
}  // namespace

INSTANTIATE_TEST_SUITE_P(TwoHost, PeerDesync, ::testing::ValuesIn(rows()), row_name);
