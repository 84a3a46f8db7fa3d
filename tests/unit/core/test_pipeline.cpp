// The pipelined data path (pipeline.cpp) over the fake QP: depth, selective signalling,
// batched and reordered completions, failures and timeouts with requests in flight, the
// bound on unverified transfers (staging memory), and the overlapped checker.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "base/size.hpp"
#include "core/engine.hpp"
#include "fake_verbs.hpp"

using namespace rxv;
using rxv::testing::FakeControl;
using rxv::testing::FakeDevice;

namespace {

// N transfers of 4 KiB each from src[i] to dst[i] (one WR each); check compares them.
// src and dst are registered (the fake, like rxe, checks the keys and MR bounds).
struct Lane {
  static constexpr std::size_t kLen = 4096;
  FakeControl ctl;
  FakeDevice dev{ctl};
  std::unique_ptr<QueuePair> qp;
  std::vector<unsigned char> src, dst;
  std::unique_ptr<MemoryRegion> src_mr, dst_mr;
  std::atomic<std::size_t> checked{0};
  std::size_t max_unverified = 0;
  LoopSpec spec;
  Lane(std::size_t n, unsigned depth, unsigned slots) : src(n * kLen), dst(n * kLen) {
    QpParams p;
    p.tx_depth = depth;
    qp = dev.create_qp(p).value();
    src_mr = dev.reg_mr(src.data(), src.size()).mr;
    dst_mr = dev.reg_mr(dst.data(), dst.size()).mr;
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
    spec.count = n;
    spec.depth = depth;
    spec.slots = slots;
    spec.bytes = [](std::size_t) { return std::uint64_t{kLen}; };
    spec.deadline = [](std::uint64_t) { return std::chrono::milliseconds(100); };
    spec.wrs = [this](std::size_t i, std::vector<WorkRequest>& out) {
      WorkRequest w;
      w.sges = {{reinterpret_cast<std::uint64_t>(src.data() + i * kLen), kLen, src_mr->lkey()}};
      w.raddr = reinterpret_cast<std::uint64_t>(dst.data() + i * kLen);
      w.rkey = dst_mr->rkey();
      out = {w};
      return std::size_t{1};
    };
    spec.prepare = [this](std::size_t i) -> Result<void> {
      max_unverified = std::max(max_unverified, i - checked.load());
      return {};
    };
    spec.check = [this](std::size_t i) {
      VerifyOutcome v;
      if (std::memcmp(src.data() + i * kLen, dst.data() + i * kLen, kLen) != 0) {
        v.ok = false;
        v.error = "differs";
      }
      ++checked;
      return v;
    };
  }
  LoopResult run() { return run_pipeline(*qp, spec); }
};

}  // namespace

TEST(Pipeline, KeepsTxDepthInFlightWithSelectiveSignalling) {
  Lane l(1000, 16, 64);
  // the check inline: how many WRs are signalled then depends on the loop alone, not
  // on how far a checker thread got on a loaded machine (threaded, a lagging checker
  // fills the staging slots and every post stalls: 508 to 904 of 1000 seen under load)
  l.spec.threaded = false;
  auto r = l.run();
  ASSERT_TRUE(r.ok()) << describe(r.failure);
  EXPECT_EQ(r.verified, 1000u);
  EXPECT_EQ(r.bytes, 1000u * Lane::kLen);
  EXPECT_EQ(r.wrs, 1000u);
  EXPECT_EQ(l.ctl.max_in_flight, 16u);   // the pipe was full ...
  EXPECT_EQ(l.ctl.overcommits, 0u);      // ... and never beyond the send queue
  EXPECT_LT(l.ctl.signaled, 1000u / 2);  // not every WR signalled
  EXPECT_GT(l.ctl.signaled, 0u);
  EXPECT_EQ(l.ctl.drains, 0u);
  EXPECT_EQ(l.src, l.dst);
}

TEST(Pipeline, BatchedAndOutOfOrderCompletions) {
  Lane l(500, 32, 64);
  l.ctl.complete_per_poll = 24;  // several signalled completions per poll ...
  l.ctl.reverse_batches = true;  // ... returned newest first
  auto r = l.run();
  ASSERT_TRUE(r.ok()) << describe(r.failure);
  EXPECT_EQ(r.verified, 500u);
  EXPECT_GT(l.ctl.max_batch, 1u);
  EXPECT_EQ(l.ctl.overcommits, 0u);
  EXPECT_EQ(l.src, l.dst);
}

TEST(Pipeline, OneCompletionPerPollStillDrainsTheQueue) {
  Lane l(300, 8, 4);
  l.ctl.complete_per_poll = 1;
  auto r = l.run();
  ASSERT_TRUE(r.ok()) << describe(r.failure);
  EXPECT_EQ(r.verified, 300u);
}

TEST(Pipeline, FailureMidPipelineNamesTheRequest) {
  Lane l(200, 16, 64);
  l.ctl.fail_op_at = 37;  // the 38th WR (wr_id 38, transfer 37) fails
  l.ctl.complete_per_poll = 5;
  auto r = l.run();
  ASSERT_EQ(r.failure.kind, LoopFailure::Kind::Completion);
  EXPECT_EQ(r.failure.transfer, 37u);
  EXPECT_EQ(r.failure.wr_id, 38u);
  EXPECT_EQ(r.failure.wc_status, 12);
  EXPECT_LE(r.failure.completed_before, 37u);
  EXPECT_GT(r.failure.in_flight, 0u);
  EXPECT_EQ(l.ctl.drains, 1u);    // drained before the buffers go away
  EXPECT_LT(l.ctl.posted, 200u);  // stopped posting
  auto d = describe(r.failure);
  EXPECT_NE(d.find("transfer 37 (wr_id 38) completed with an error"), std::string::npos) << d;
  EXPECT_NE(d.find("work requests in flight were drained"), std::string::npos) << d;
}

TEST(Pipeline, TimeoutWithRequestsInFlight) {
  Lane l(100, 16, 64);
  l.ctl.fail_op_at = 20;
  l.ctl.fail_timeout = true;  // WR 21 and everything after it never completes
  auto t0 = std::chrono::steady_clock::now();
  auto r = l.run();
  ASSERT_EQ(r.failure.kind, LoopFailure::Kind::Timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(r.failure.transfer, 20u);  // the oldest outstanding transfer
  EXPECT_EQ(r.failure.wr_id, 21u);
  EXPECT_GT(r.failure.in_flight, 1u);
  EXPECT_EQ(l.ctl.drains, 1u);
  EXPECT_GT(l.ctl.flushed, 0u);
}

TEST(Pipeline, UnverifiedTransfersBoundedBySlots) {
  Lane l(200, 64, 3);
  auto slow = l.spec.check;
  l.spec.check = [&](std::size_t i) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // a slow checker
    return slow(i);
  };
  auto r = l.run();
  ASSERT_TRUE(r.ok()) << describe(r.failure);
  EXPECT_LT(l.max_unverified, 3u);  // transfer i posted only after i-3 was verified
  EXPECT_LE(l.ctl.max_in_flight, 3u);
  EXPECT_EQ(l.ctl.overcommits, 0u);
}

TEST(Pipeline, CheckFailureStopsPostingAndDrains) {
  Lane l(400, 16, 32);
  auto base = l.spec.check;
  l.spec.check = [&](std::size_t i) {
    VerifyOutcome v = base(i);
    if (i == 60) {
      v.ok = false;
      v.error = "injected";
    }
    return v;
  };
  auto r = l.run();
  ASSERT_EQ(r.failure.kind, LoopFailure::Kind::Check);
  EXPECT_EQ(r.failure.transfer, 60u);
  EXPECT_EQ(r.failure.check.error, "injected");
  EXPECT_EQ(r.verified, 60u);
  EXPECT_LT(l.ctl.posted, 400u);
}

TEST(Pipeline, InlineCheckingGivesTheSameResult) {
  Lane l(100, 8, 16);
  l.spec.threaded = false;
  auto r = l.run();
  ASSERT_TRUE(r.ok()) << describe(r.failure);
  EXPECT_EQ(r.verified, 100u);
}

// Transfers that overlap (each with its own pattern) are never in flight together: with
// every odd transfer overlapping the one before it, a WRITE waits for that one's
// completion, a READ for its verification; an even one goes in flight with the odd one
// before it.
TEST(Pipeline, OverlappingTransfersWaitForTheEarlierOne) {
  for (OpCode op : {OpCode::Write, OpCode::Read}) {
    Lane l(200, 16, 64);
    l.spec.op = op;
    std::vector<std::size_t> started;
    std::size_t violations = 0;
    l.spec.overlaps = [](std::size_t i, std::size_t j) { return i % 2 == 1 && j + 1 == i; };
    l.spec.prepare = [&](std::size_t i) -> Result<void> {
      // transfer i-1 done (WRITE: completed, so executed by the fake; READ: checked)
      if (i % 2 == 1 && (op == OpCode::Read ? l.checked.load() < i : l.ctl.ops < static_cast<int>(i)))
        ++violations;
      return {};
    };
    auto r = l.run();
    ASSERT_TRUE(r.ok()) << describe(r.failure);
    EXPECT_EQ(r.verified, 200u);
    EXPECT_EQ(violations, 0u) << (op == OpCode::Write ? "write" : "read");
    EXPECT_EQ(l.ctl.max_in_flight, 2u);  // an odd one waits; the even one after it does not
  }
}

// The error of a prepare step (a peer's fill) stops posting and is the failure's text.
TEST(Pipeline, PrepareErrorStopsTheLoopWithItsText) {
  Lane l(20, 4, 64);
  l.spec.threaded = false;
  l.spec.prepare = [](std::size_t i) -> Result<void> {
    if (i == 5) return Error("peer refused fill");
    return {};
  };
  auto r = l.run();
  ASSERT_EQ(r.failure.kind, LoopFailure::Kind::Prepare);
  EXPECT_EQ(r.failure.transfer, 5u);
  EXPECT_EQ(r.failure.status_str, "peer refused fill");
  EXPECT_EQ(describe(r.failure).rfind("transfer 5 could not be prepared: peer refused fill; ", 0), 0u)
      << describe(r.failure);
}

namespace {
// The fake QP, but its post number `fail_at` (0-based) fails as libibverbs would say it.
class FailingPostQp final : public QueuePair {
 public:
  FailingPostQp(QueuePair& q, unsigned fail_at) : q_(q), fail_at_(fail_at) {}
  QpAddr local_addr() const override { return q_.local_addr(); }
  Result<void> connect(const QpAddr& r) override { return q_.connect(r); }
  Result<void> post(const WorkRequest& w) override {
    if (posts_++ == fail_at_) {
      broken_ = true;
      return Error("ibv_post_send: Invalid argument");
    }
    return q_.post(w);
  }
  int poll(std::vector<Completion>& out, int max, std::chrono::milliseconds wait) override {
    return q_.poll(out, max, wait);
  }
  void drain() override { q_.drain(); }
  unsigned max_send_wr() const override { return q_.max_send_wr(); }
  unsigned max_rd_atomic() const override { return q_.max_rd_atomic(); }
  bool broken() const override { return broken_ || q_.broken(); }

 private:
  QueuePair& q_;
  unsigned fail_at_, posts_ = 0;
  bool broken_ = false;
};
}  // namespace

TEST(Pipeline, PostErrorNamesTheRequestAndTheVerbsCall) {
  Lane l(20, 4, 64);
  FailingPostQp qp(*l.qp, 6);
  auto r = run_pipeline(qp, l.spec);
  ASSERT_EQ(r.failure.kind, LoopFailure::Kind::Post);
  EXPECT_EQ(r.failure.transfer, 6u);
  EXPECT_EQ(r.failure.wr_id, 7u);
  EXPECT_EQ(r.failure.status_str, "ibv_post_send: Invalid argument");
  EXPECT_EQ(describe(r.failure).rfind(
                "transfer 6 (wr_id 7) could not be posted: ibv_post_send: Invalid argument", 0),
            0u)
      << describe(r.failure);
}

// The no-progress deadline counts time with work in flight only: a gap with nothing in
// flight (here a slow prepare: a peer's fill, say) longer than the deadline, followed by
// a transfer that completes after 20 ms, is no timeout; a transfer that never completes is.
TEST(Pipeline, DeadlineCountsOnlyTimeWithWorkInFlight) {
  Lane idle(3, 4, 1);  // one slot: transfer 1 is prepared after transfer 0 was verified
  idle.ctl.latency = std::chrono::milliseconds(20);
  idle.spec.prepare = [](std::size_t i) -> Result<void> {
    if (i == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // deadline 100 ms
    return {};
  };
  LoopResult r = run_pipeline(*idle.qp, idle.spec);
  EXPECT_TRUE(r.ok()) << describe(r.failure);
  EXPECT_EQ(r.verified, 3u);

  Lane stuck(3, 4, 1);
  stuck.ctl.latency = std::chrono::hours(1);
  LoopResult s = run_pipeline(*stuck.qp, stuck.spec);
  EXPECT_EQ(s.failure.kind, LoopFailure::Kind::Timeout) << describe(s.failure);
}
