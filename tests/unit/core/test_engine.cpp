#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>

#include "core/engine.hpp"
#include "fake_verbs.hpp"
#include "test_data.hpp"

using namespace rxv;
using rxv::testing::FakeControl;
using rxv::testing::FakeDevice;

namespace {

struct Rig {
  FakeControl ctl;
  FakeDevice dev{ctl};
  std::unique_ptr<QueuePair> qp;
  std::unique_ptr<LocalPeer> peer;
  RunConfig cfg;
  DiagInput base;
  Rig(RunConfig c = {}) : cfg(c) {
    qp = dev.create_qp({}).value();
    cfg.seed = 99;
    peer = std::make_unique<LocalPeer>(dev, staging_bytes_for(cfg));
    base.buddyinfo = data("buddyinfo-host.txt");
    base.limits = data("limits-unlimited.txt");
    base.meminfo = data("meminfo-24G.txt");
    base.module.flavor = ModuleFlavor::Stock;
    ctl.regs = 0;
  }
  SizeResult run(std::uint64_t size) {
    Engine e(dev, *qp, *peer, cfg, [this] { return base; });
    return e.run_size(size);
  }
};

}  // namespace

TEST(Engine, SampledPassesAndCountsBytes) {
  Rig r;
  auto s = r.run(8ull << 20);
  EXPECT_EQ(s.result, SizeOutcome::Pass) << (s.diagnosis ? s.diagnosis->summary : "");
  EXPECT_TRUE(s.registered);
  EXPECT_EQ(s.pages, 2048u);
  EXPECT_GT(s.transfers, 100u);
  EXPECT_EQ(s.write.bytes, s.read.bytes);
  EXPECT_EQ(s.verified_bytes, s.write.bytes + s.read.bytes);
  EXPECT_FALSE(s.diagnosis);
}

TEST(Engine, FullModeMovesWholeRegionBothWays) {
  RunConfig c;
  c.mode = Mode::Full;
  c.msg_size = 1ull << 20;
  c.passes = 1;
  c.offset = 16;
  Rig r(c);
  const std::uint64_t size = (6ull << 20) + 123;
  auto s = r.run(size);
  EXPECT_EQ(s.result, SizeOutcome::Pass);
  EXPECT_EQ(s.write.bytes, size);
  EXPECT_EQ(s.read.bytes, size);
  EXPECT_EQ(s.verified_bytes, 2 * size);
  EXPECT_EQ(s.pages, span_pages(16, size));
}

TEST(Engine, RegistrationFailureIsRecordedAndDiagnosed) {
  RunConfig c;
  c.offset = 16;
  Rig r(c);
  r.ctl.reg_errno = [](std::size_t len) { return len > (2u << 20) ? ENOMEM : 0; };
  auto s = r.run(4ull << 20);
  EXPECT_EQ(s.result, SizeOutcome::Fail);
  EXPECT_FALSE(s.registered);
  EXPECT_EQ(s.reg_errno, ENOMEM);
  EXPECT_EQ(s.pages, 1025u);
  EXPECT_EQ(s.metadata_bytes, 1025u * 16);
  EXPECT_EQ(s.write.bytes, 0u);
  ASSERT_TRUE(s.diagnosis);  // small metadata order on stock: not blamed on rxe
  EXPECT_EQ(s.diagnosis->cause, "unknown");
}

TEST(Engine, RegistrationEnomemMemlock) {
  Rig r;
  r.base.limits = data("limits-64K.txt");
  r.base.cap_eff = 0;
  r.ctl.reg_errno = [](std::size_t len) { return len > (2u << 20) ? ENOMEM : 0; };
  auto s = r.run(4ull << 20);
  EXPECT_EQ(s.result, SizeOutcome::Fail);
  ASSERT_TRUE(s.diagnosis);
  EXPECT_EQ(s.diagnosis->cause, "memlock");
  EXPECT_NE(s.diagnosis->remedy.find("limits.conf"), std::string::npos);
}

TEST(Engine, RetryExceededTwoHostIsNetwork) {
  RunConfig c;
  c.two_host = true;
  Rig r(c);
  r.ctl.fail_op_at = 3;
  r.base.two_host = true;
  FwResult fw;
  fw.verdict = FwVerdict::Drop;
  fw.source = "nftables";
  fw.detail = "chain inet filter input: policy drop";
  r.base.firewall = fw;
  auto s = r.run(4ull << 20);
  EXPECT_EQ(s.result, SizeOutcome::Fail);
  ASSERT_TRUE(s.diagnosis);
  EXPECT_EQ(s.diagnosis->cause, "network_path_or_firewall");
  EXPECT_NE(s.diagnosis->remedy.find("4791"), std::string::npos);
  EXPECT_NE(s.diagnosis->summary.find("offset"), std::string::npos);
  EXPECT_TRUE(r.qp->broken());
}

TEST(Engine, TimeoutIsReported) {
  RunConfig c;
  c.two_host = true;
  c.op_timeout = 0.2;
  Rig r(c);
  r.ctl.fail_op_at = 0;
  r.ctl.fail_timeout = true;
  auto s = r.run(1ull << 20);
  ASSERT_TRUE(s.diagnosis);
  EXPECT_EQ(s.diagnosis->cause, "network_path_or_firewall");
  EXPECT_NE(s.diagnosis->summary.find("deadline"), std::string::npos);
}

TEST(Engine, CorruptionOnWriteReportedWithOffset) {
  RunConfig c;
  c.mode = Mode::Full;
  c.msg_size = 1ull << 20;
  c.passes = 1;
  Rig r(c);
  r.ctl.corrupt_op_at = 2;  // third 1 MiB chunk of the write loop
  r.ctl.corrupt_at = 4096 * 3 + 5;
  auto s = r.run(4ull << 20);
  EXPECT_EQ(s.result, SizeOutcome::Fail);
  ASSERT_TRUE(s.mismatch);
  EXPECT_EQ(s.mismatch->offset, (2ull << 20) + 4096 * 3 + 5);
  EXPECT_EQ(s.mismatch->direction, Direction::Write);
  ASSERT_TRUE(s.diagnosis);
  EXPECT_EQ(s.diagnosis->cause, "data_corruption");
}

TEST(Engine, ShortReadDetectedAsStale) {
  RunConfig c;
  c.mode = Mode::Full;
  c.msg_size = 1ull << 20;
  c.passes = 1;
  Rig r(c);
  r.ctl.short_op_at = 4 + 1;  // second read op (after 4 write ops) copies half
  auto s = r.run(4ull << 20);
  EXPECT_EQ(s.result, SizeOutcome::Fail);
  ASSERT_TRUE(s.mismatch);
  EXPECT_EQ(s.mismatch->direction, Direction::Read);
  EXPECT_EQ(s.mismatch->offset, (1ull << 20) + (512ull << 10));
  EXPECT_NE(s.mismatch->explanation.find("stale"), std::string::npos) << s.mismatch->explanation;
}

TEST(Engine, SplitUsesScatterListsAcrossMrs) {
  RunConfig c;
  c.mode = Mode::Full;
  c.msg_size = 1ull << 20;
  c.split = 8;
  c.offset = 100;
  c.passes = 1;
  Rig r(c);
  auto s = r.run((4ull << 20) + 1);
  EXPECT_EQ(s.result, SizeOutcome::Pass);
  EXPECT_EQ(s.mrs, 8u);
  EXPECT_GE(r.ctl.max_sges_seen, 2u);
  EXPECT_EQ(r.ctl.regs, 8);
}

TEST(Engine, SplitRespectsMaxSge) {
  RunConfig c;
  c.mode = Mode::Full;
  c.msg_size = 1ull << 20;
  c.split = 64;
  c.passes = 1;
  Rig r(c);
  r.ctl.max_sge = 2;
  auto s = r.run(1ull << 20);
  if (s.diagnosis) ADD_FAILURE() << s.diagnosis->summary;
  EXPECT_EQ(s.result, SizeOutcome::Pass);
  EXPECT_LE(r.ctl.max_sges_seen, 2u);
}

TEST(Engine, PipelinesFullModeAndCapsReadsAtRdAtomic) {
  RunConfig c;
  c.mode = Mode::Full;
  c.msg_size = 64 << 10;
  c.passes = 1;
  c.tx_depth = 32;
  Rig r(c);
  QpParams p;
  p.tx_depth = 32;
  r.qp = r.dev.create_qp(p).value();
  r.ctl.rd_atomic = 4;
  auto s = r.run(8ull << 20);  // 128 transfers each way
  ASSERT_EQ(s.result, SizeOutcome::Pass) << (s.diagnosis ? s.diagnosis->summary : "");
  EXPECT_EQ(r.ctl.max_in_flight, 32u);       // WRITEs fill the send queue
  EXPECT_EQ(r.ctl.max_reads_in_flight, 4u);  // READs stop at max_rd_atomic
  EXPECT_EQ(r.ctl.overcommits, 0u);
  EXPECT_EQ(s.write.iterations, 128u);
  EXPECT_EQ(s.read.transfers, 128u);
  EXPECT_EQ(s.verified_bytes, 16ull << 20);
  EXPECT_GT(s.write.wall_seconds, 0);
}

TEST(Engine, OverlappedCheckerFindsCorruptedPageAtItsOffset) {
  RunConfig c;
  c.mode = Mode::Full;
  c.msg_size = 64 << 10;
  c.offset = 16;
  c.passes = 1;
  Rig r(c);
  // 4 MiB in 64 KiB transfers: 64 WRITEs, then READs; WR 64 + 41 is the 42nd READ,
  // checked on the checker thread while later READs are in flight. Corrupt byte 3 of
  // its 6th page.
  r.ctl.corrupt_op_at = 64 + 41;
  r.ctl.corrupt_at = 5 * 4096 + 3;
  auto s = r.run(4ull << 20);
  ASSERT_EQ(s.result, SizeOutcome::Fail);
  ASSERT_TRUE(s.mismatch);
  const std::uint64_t off = 41ull * (64 << 10) + 5 * 4096 + 3;
  EXPECT_EQ(s.mismatch->offset, off);
  EXPECT_EQ(s.mismatch->page, (16 + off) / 4096);
  EXPECT_EQ(s.mismatch->direction, Direction::Read);
  EXPECT_EQ(s.mismatch->bad_bytes, 1u);
  ASSERT_TRUE(s.diagnosis);
  EXPECT_EQ(s.diagnosis->cause, "data_corruption");
}

TEST(Engine, FailureMidPipelineSaysWhichTransfer) {
  RunConfig c;
  c.mode = Mode::Full;
  c.msg_size = 64 << 10;
  c.passes = 1;
  Rig r(c);
  r.ctl.fail_op_at = 50;
  auto s = r.run(8ull << 20);
  ASSERT_EQ(s.result, SizeOutcome::Fail);
  ASSERT_TRUE(s.diagnosis);
  EXPECT_EQ(s.diagnosis->cause, "transfer_error");
  EXPECT_NE(s.diagnosis->summary.find("at region offset " + std::to_string(50ull * (64 << 10))),
            std::string::npos)
      << s.diagnosis->summary;
  EXPECT_NE(s.diagnosis->summary.find("transfer 50 (wr_id 51)"), std::string::npos) << s.diagnosis->summary;
  EXPECT_EQ(r.ctl.drains, 1u);
  EXPECT_TRUE(r.qp->broken());
}

TEST(Engine, IterationsRepeatWholePassesUntilReached) {
  RunConfig c;
  c.mode = Mode::Full;
  c.msg_size = 1ull << 20;
  c.passes = 1;
  c.min_transfers = 10;  // 4 transfers per pass over 4 MiB: 3 passes
  Rig r(c);
  auto s = r.run(4ull << 20);
  EXPECT_EQ(s.result, SizeOutcome::Pass);
  EXPECT_EQ(s.passes, 3u);
  EXPECT_EQ(s.write.transfers, 12u);
  EXPECT_EQ(s.read.transfers, 12u);
  EXPECT_EQ(s.write.bytes, 12ull << 20);
}

TEST(Engine, DurationRepeatsPassesUntilTimeIsUp) {
  RunConfig c;
  c.mode = Mode::Full;
  c.msg_size = 1ull << 20;
  c.passes = 1;
  c.duration = 0.3;
  Rig r(c);
  auto t0 = std::chrono::steady_clock::now();
  auto s = r.run(1ull << 20);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(s.result, SizeOutcome::Pass);
  EXPECT_GE(took, 0.3);  // at least the duration (whole passes; no upper bound asserted)
  EXPECT_GT(s.passes, 1u);
  EXPECT_EQ(s.write.bytes, static_cast<std::uint64_t>(s.passes) << 20);
  EXPECT_EQ(s.verified_bytes, 2 * s.write.bytes);
}

namespace {
// The loopback peer, but every fill fails as a broken connection to `serve` would.
class FillFailsPeer final : public Peer {
 public:
  explicit FillFailsPeer(Peer& p) : p_(p) {}
  std::uint64_t staging_addr() const override { return p_.staging_addr(); }
  std::uint32_t staging_rkey() const override { return p_.staging_rkey(); }
  std::uint64_t staging_size() const override { return p_.staging_size(); }
  Result<void> fill(std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t) override {
    return Error("connection closed by peer");
  }
  VerifyOutcome verify(std::uint64_t st, std::uint64_t off, std::uint64_t len, std::uint64_t key,
                       const std::vector<KeyCandidate>& c, std::uint64_t region) override {
    return p_.verify(st, off, len, key, c, region);
  }

 private:
  Peer& p_;
};
}  // namespace

// A peer's fill error (the READ loop's prepare step) is the size's network diagnosis,
// its text first, as before the fill returned a Result.
TEST(Engine, PeerFillErrorIsANetworkDiagnosis) {
  Rig r;
  FillFailsPeer peer(*r.peer);
  Engine e(r.dev, *r.qp, peer, r.cfg, [&r] { return r.base; });
  auto s = e.run_size(1ull << 20);
  EXPECT_EQ(s.result, SizeOutcome::Fail);
  ASSERT_TRUE(s.diagnosis);
  EXPECT_EQ(s.diagnosis->cause, cause::kNetwork);
  EXPECT_EQ(s.diagnosis->summary.rfind("peer call failed: connection closed by peer; RDMA READ of ", 0), 0u)
      << s.diagnosis->summary;
  EXPECT_EQ(s.diagnosis->remedy, "check the out-of-band TCP connection to the peer");
}

namespace {
// The loopback peer, but its rkey is off by one (an engine that sent a wrong rkey).
class WrongRkeyPeer final : public Peer {
 public:
  explicit WrongRkeyPeer(Peer& p) : p_(p) {}
  std::uint64_t staging_addr() const override { return p_.staging_addr(); }
  std::uint32_t staging_rkey() const override { return p_.staging_rkey() + 1; }
  std::uint64_t staging_size() const override { return p_.staging_size(); }
  Result<void> fill(std::uint64_t st, std::uint64_t off, std::uint64_t len, std::uint64_t key) override {
    return p_.fill(st, off, len, key);
  }
  VerifyOutcome verify(std::uint64_t st, std::uint64_t off, std::uint64_t len, std::uint64_t key,
                       const std::vector<KeyCandidate>& c, std::uint64_t region) override {
    return p_.verify(st, off, len, key, c, region);
  }

 private:
  Peer& p_;
};
// A QP that posts every SGE with the lkey of the region's first MR (what an engine that
// ignored --split's MR boundaries would do), over the fake QP.
class FirstLkeyQp final : public QueuePair {
 public:
  explicit FirstLkeyQp(QueuePair& q) : q_(q) {}
  QpAddr local_addr() const override { return q_.local_addr(); }
  Result<void> connect(const QpAddr& a) override { return q_.connect(a); }
  Result<void> post(const WorkRequest& w) override {
    WorkRequest c = w;
    if (!first_) first_ = w.sges.front().lkey;
    for (auto& s : c.sges) s.lkey = first_;
    return q_.post(c);
  }
  int poll(std::vector<Completion>& out, int max, std::chrono::milliseconds t) override {
    return q_.poll(out, max, t);
  }
  void drain() override { q_.drain(); }
  unsigned max_send_wr() const override { return q_.max_send_wr(); }
  unsigned max_rd_atomic() const override { return q_.max_rd_atomic(); }
  bool broken() const override { return q_.broken(); }

 private:
  QueuePair& q_;
  std::uint32_t first_ = 0;
};
}  // namespace

// rxe checks rkeys: a wrong one is IBV_WC_REM_ACCESS_ERR (status 10), a transfer error.
TEST(Engine, WrongRkeyFailsWithRemoteAccessError) {
  Rig r;
  WrongRkeyPeer peer(*r.peer);
  Engine e(r.dev, *r.qp, peer, r.cfg, [&r] { return r.base; });
  auto s = e.run_size(1ull << 20);
  ASSERT_EQ(s.result, SizeOutcome::Fail);
  ASSERT_TRUE(s.diagnosis);
  EXPECT_EQ(s.diagnosis->cause, cause::kTransferError);
  EXPECT_NE(s.diagnosis->summary.find("status 10"), std::string::npos) << s.diagnosis->summary;
}

// With --split each SGE must carry its own MR's lkey: an SGE in MR 2 under MR 1's lkey is
// IBV_WC_LOC_PROT_ERR (status 4). (SplitUsesScatterListsAcrossMrs passes because the
// engine gets this right, which the lenient fake could not tell.)
TEST(Engine, SplitSgeWithAnotherMrsLkeyFailsWithLocalProtectionError) {
  RunConfig c;
  c.mode = Mode::Full;
  c.msg_size = 1ull << 20;
  c.split = 8;
  c.passes = 1;
  Rig r(c);
  FirstLkeyQp qp(*r.qp);
  Engine e(r.dev, qp, *r.peer, r.cfg, [&r] { return r.base; });
  auto s = e.run_size(4ull << 20);
  ASSERT_EQ(s.result, SizeOutcome::Fail);
  ASSERT_TRUE(s.diagnosis);
  EXPECT_EQ(s.diagnosis->cause, cause::kTransferError);
  EXPECT_NE(s.diagnosis->summary.find("status 4"), std::string::npos) << s.diagnosis->summary;
}
