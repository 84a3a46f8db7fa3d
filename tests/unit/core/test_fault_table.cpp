// The fault table (issue 62): each fault the fake device can inject (fake_verbs.hpp,
// FaultKind) in each mode (sampled, full, full with --split) and direction (the WRITE
// loop's destination is the peer's staging buffer, the READ loop's is the region under
// test) must make the run FAIL with its cause; no row may pass. userspace/README.md lists
// the rows with these test names. Each row runs one 4 MiB + 100 B region in loopback
// (~20-60 ms, a Drop row its 0.3 s deadline; 68 rows, ~5 s in all).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "app/serve_loop.hpp"
#include "core/diag_context.hpp"
#include "core/engine.hpp"
#include "core/oob.hpp"
#include "fake_host.hpp"
#include "fake_verbs.hpp"
#include "serve_thread.hpp"

using namespace rxv;
using rxv::testing::FakeControl;
using rxv::testing::FakeDevice;
using rxv::testing::Fault;
using rxv::testing::FaultKind;

namespace {

enum class RunMode { Sampled, Full, Split };

struct Row {
  FaultKind fault;
  RunMode mode;
  OpCode dir;
};

std::string fault_name(FaultKind k) {
  switch (k) {
    case FaultKind::Drop:
      return "Drop";
    case FaultKind::Truncate:
      return "Truncate";
    case FaultKind::Shift:
      return "Shift";
    case FaultKind::Duplicate:
      return "Duplicate";
    case FaultKind::Corrupt:
      return "Corrupt";
    case FaultKind::NoData:
      return "NoData";
    case FaultKind::Overrun:
      return "Overrun";
    case FaultKind::PortDown:
      return "PortDown";
    case FaultKind::Delay:
      return "Delay";
    case FaultKind::Reorder:
      return "Reorder";
    case FaultKind::None:
      break;
  }
  return "None";
}
std::string row_name(const ::testing::TestParamInfo<Row>& i) {
  const Row& r = i.param;
  return fault_name(r.fault) +
         (r.mode == RunMode::Sampled ? "_Sampled"
          : r.mode == RunMode::Full  ? "_Full"
                                     : "_Split") +
         (r.dir == OpCode::Write ? "_Write" : "_Read");
}

constexpr std::uint64_t kSize = (4ull << 20) + 100;  // 5 transfers of at most 1 MiB in full mode

RunConfig config(RunMode m) {
  RunConfig c;
  c.seed = 62;
  c.op_timeout = 0.3;  // Drop: the deadline
  if (m == RunMode::Sampled) return c;
  c.mode = Mode::Full;
  c.msg_size = 1ull << 20;
  c.passes = 1;
  if (m == RunMode::Split) {
    c.split = 4;
    c.offset = 100;
  }
  return c;
}

// Picks the work request that gets the fault: one of direction `dir` in the first pass.
//  - READ, sampled, NoData/Duplicate: the first READ whose destination earlier READs of
//    its loop already filled (sampled transfers overlap): stale bytes that equal what it
//    should deliver unless every transfer has bytes of its own;
//  - READ, Overrun: the READ that ends at the region's end (sampled: the "last" transfer,
//    the plan's second; full: the last chunk): its bytes past the end are no other
//    transfer's to write;
//  - otherwise the second WR of that direction.
class Picker {
 public:
  Picker(Row r) : r_(r) {}
  Fault operator()(const WorkRequest& w, int) {
    if (fired_) return {};
    if (w.op != r_.dir) {
      if (w.op == OpCode::Write) filled_.clear();  // a new READ loop follows
      return {};
    }
    const std::size_t n = seen_++;
    bool hit = n == 1;
    if (r_.dir == OpCode::Read && r_.mode == RunMode::Sampled &&
        (r_.fault == FaultKind::NoData || r_.fault == FaultKind::Duplicate))
      hit = covered(w);
    if (r_.dir == OpCode::Read && r_.fault == FaultKind::Overrun)
      hit = r_.mode == RunMode::Sampled ? n == 1 : n == 4;
    for (const auto& s : w.sges) filled_.emplace_back(s.addr, s.addr + s.length);
    if (!hit) return {};
    fired_ = true;
    return {r_.fault, r_.fault == FaultKind::Corrupt ? 5u : 0u};
  }
  bool fired() const { return fired_; }

 private:
  // Every byte of w's destination was written by an earlier READ of this loop.
  bool covered(const WorkRequest& w) const {
    for (const auto& s : w.sges) {
      std::uint64_t a = s.addr;
      const std::uint64_t b = s.addr + s.length;
      bool moved = true;
      while (a < b && moved) {
        moved = false;
        for (const auto& f : filled_)
          if (f.first <= a && a < f.second) {
            a = f.second;
            moved = true;
          }
      }
      if (a < b) return false;
    }
    return true;
  }
  Row r_;
  bool fired_ = false;
  std::size_t seen_ = 0;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> filled_;
};

class FaultTable : public ::testing::TestWithParam<Row> {};
class FaultTableTwoHost : public ::testing::TestWithParam<Row> {};

// The row's outcome: the fault was injected, the run failed with its cause.
void expect_caught(const Row& row, const SizeResult& s, bool two_host);

}  // namespace

TEST_P(FaultTable, FailsWithItsCause) {
  const Row row = GetParam();
  FakeControl ctl;
  FakeDevice dev(ctl);
  const RunConfig cfg = config(row.mode);
  auto qp = dev.create_qp({}).value();
  LocalPeer peer(dev, staging_bytes_for(cfg));
  ASSERT_TRUE(peer.ok());
  auto picker = std::make_shared<Picker>(row);
  ctl.fault = [picker](const WorkRequest& w, int op) { return (*picker)(w, op); };
  rxv::testing::FakeHost host;  // the diagnosis reads the port through the device, as run does
  Engine eng(dev, *qp, peer, cfg,
             make_diag_context(
                 host, [&dev]() -> std::optional<bool> { return dev.port().active; }, false, host.module()));
  const SizeResult s = eng.run_size(kSize);
  ASSERT_TRUE(picker->fired()) << "the fault was never injected";
  expect_caught(row, s, false);
}

// The same faults in a two-host run: `rxe-verify serve`'s loop on a thread with its own
// fake device, the client's engine talking to it over TCP (RemotePeer); the client's QP
// moves the bytes, into the server's staging MR (its rkey checked).
TEST_P(FaultTableTwoHost, FailsWithItsCause) {
  const Row row = GetParam();
  FakeControl cctl;
  rxv::testing::ServeThread srv;
  Result<LineSocket> sock = Error("not tried");
  for (int i = 0; i < 100 && !sock; ++i) {
    sock = tcp_connect("127.0.0.1", srv.so.port, std::chrono::seconds(2));
    if (!sock) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!sock) srv.detach();
  ASSERT_TRUE(sock) << sock.error().summary;
  FakeDevice cdev(cctl);
  auto qp = cdev.create_qp({}).value();
  RunConfig cfg = config(row.mode);
  cfg.two_host = true;
  auto st = rxv::testing::hello(*sock, qp->local_addr(), staging_bytes_for(cfg), 1);
  ASSERT_TRUE(st);
  RemotePeer peer(*sock, st->addr, st->rkey, st->size, std::chrono::seconds(10));
  auto picker = std::make_shared<Picker>(row);
  cctl.fault = [picker](const WorkRequest& w, int op) { return (*picker)(w, op); };
  rxv::testing::FakeHost host;
  Engine eng(cdev, *qp, peer, cfg,
             make_diag_context(
                 host, [&cdev]() -> std::optional<bool> { return cdev.port().active; }, true, host.module()));
  const SizeResult s = eng.run_size(kSize);
  EXPECT_TRUE(sock->send(nlohmann::json{{"op", "bye"}}));
  EXPECT_TRUE(sock->recv(std::chrono::seconds(5)));
  srv.join();
  EXPECT_EQ(srv.rc, 0);
  ASSERT_TRUE(picker->fired()) << "the fault was never injected";
  expect_caught(row, s, true);
}

namespace {
void expect_caught(const Row& row, const SizeResult& s, bool two_host) {
  ASSERT_EQ(s.result, SizeOutcome::Fail) << "the run PASSED with the fault";
  ASSERT_TRUE(s.diagnosis);
  if (row.fault == FaultKind::PortDown) {
    // the port state read when the transfer failed, not the ACTIVE one of the start
    EXPECT_EQ(s.diagnosis->cause, cause::kDeviceDown) << s.diagnosis->summary;
    return;
  }
  if (row.fault == FaultKind::Drop || row.fault == FaultKind::Delay) {
    // lost: nothing completes; the deadline ends the loop (loopback: a transfer error;
    // two hosts: the network path)
    EXPECT_EQ(s.diagnosis->cause, two_host ? cause::kNetwork : cause::kTransferError);
    EXPECT_NE(s.diagnosis->summary.find("no completion before the deadline"), std::string::npos)
        << s.diagnosis->summary;
    return;
  }
  EXPECT_EQ(s.diagnosis->cause, cause::kDataCorruption) << s.diagnosis->summary;
  ASSERT_TRUE(s.mismatch);
  EXPECT_EQ(s.mismatch->direction, row.dir == OpCode::Write ? Direction::Write : Direction::Read);
  const std::string& why = s.mismatch->explanation;
  if (row.fault == FaultKind::Overrun) {
    EXPECT_NE(why.find("past its end (overrun"), std::string::npos) << why;
  }
  if (row.fault == FaultKind::NoData) {
    // (two hosts, WRITE: the server's staging still holds the guard bytes it was armed with)
    EXPECT_TRUE(why.find("stale") != std::string::npos || why.find("zero bytes") != std::string::npos ||
                why.find("no bytes arrived") != std::string::npos)
        << why;
  }
}

std::vector<Row> all_rows() {
  std::vector<Row> rows;
  for (FaultKind f :
       {FaultKind::Drop, FaultKind::Truncate, FaultKind::Shift, FaultKind::Duplicate, FaultKind::Corrupt,
        FaultKind::NoData, FaultKind::Overrun, FaultKind::PortDown, FaultKind::Delay, FaultKind::Reorder})
    for (RunMode m : {RunMode::Sampled, RunMode::Full, RunMode::Split})
      for (OpCode d : {OpCode::Write, OpCode::Read}) rows.push_back({f, m, d});
  return rows;
}

// Two hosts: sampled and full (--split changes nothing on the wire), both directions
// (a WRITE overrun: the server's staging is armed with guard bytes before each WRITE loop).
std::vector<Row> two_host_rows() {
  std::vector<Row> rows;
  for (const Row& r : all_rows())
    if (r.mode != RunMode::Split) rows.push_back(r);
  return rows;
}
}  // namespace

// What is legal must PASS (these rows assert it): completions of one poll returned newest
// first (RC completes a send queue in order, but a batch is read as a whole: its highest
// wr_id implies the others, whose data has all landed), and a WR that completes 50 ms
// late, well within its 0.3 s deadline. Their illegal forms are rows above: a later
// completion before this WR's data landed (Reorder), a delay past the deadline (Delay).
class FaultTableLegal : public ::testing::TestWithParam<RunMode> {};
TEST_P(FaultTableLegal, ReversedBatchesAndAShortDelayPass) {
  FakeControl ctl;
  FakeDevice dev(ctl);
  const RunConfig cfg = config(GetParam());
  auto qp = dev.create_qp({}).value();
  LocalPeer peer(dev, staging_bytes_for(cfg));
  ASSERT_TRUE(peer.ok());
  ctl.reverse_batches = true;
  int seen = 0;
  ctl.fault = [&seen](const WorkRequest&, int) {
    return ++seen == 2 ? Fault{FaultKind::Delay, 50} : Fault{};
  };
  Engine eng(dev, *qp, peer, cfg, [] { return DiagInput{}; });
  const SizeResult s = eng.run_size(kSize);
  EXPECT_EQ(ctl.faults, 1u);
  EXPECT_GT(ctl.max_batch, 1u);  // batches of several completions were reversed
  EXPECT_EQ(s.result, SizeOutcome::Pass) << (s.diagnosis ? s.diagnosis->summary : "");
}
INSTANTIATE_TEST_SUITE_P(Legal, FaultTableLegal,
                         ::testing::Values(RunMode::Sampled, RunMode::Full, RunMode::Split));

INSTANTIATE_TEST_SUITE_P(Loopback, FaultTable, ::testing::ValuesIn(all_rows()), row_name);
INSTANTIATE_TEST_SUITE_P(TwoHost, FaultTableTwoHost, ::testing::ValuesIn(two_host_rows()), row_name);
