// The fake device (fake_verbs.hpp) is strict where rxe is: keys and MR bounds are checked
// and a violation completes with rxe's status; and each injected fault does what its
// name says. The engine tests and the fault table rely on both.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "fake_verbs.hpp"

using namespace rxv;
using rxv::testing::FakeControl;
using rxv::testing::FakeDevice;
using rxv::testing::Fault;
using rxv::testing::FaultKind;

namespace {

// 8 KiB source and destination, each its own MR; one WR moves `len` bytes src -> dst.
struct Bench {
  FakeControl ctl;
  FakeDevice dev{ctl};
  std::unique_ptr<QueuePair> qp = dev.create_qp({}).value();
  std::vector<unsigned char> src = std::vector<unsigned char>(8192), dst = std::vector<unsigned char>(8192);
  std::unique_ptr<MemoryRegion> smr = dev.reg_mr(src.data(), src.size()).mr;
  std::unique_ptr<MemoryRegion> dmr = dev.reg_mr(dst.data(), dst.size()).mr;
  Bench() {
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 13 + i / 251 + 1);
  }
  WorkRequest write(std::uint64_t off, std::uint32_t len) const {
    WorkRequest w;
    w.op = OpCode::Write;
    w.sges = {{reinterpret_cast<std::uint64_t>(src.data() + off), len, smr->lkey()}};
    w.raddr = reinterpret_cast<std::uint64_t>(dst.data() + off);
    w.rkey = dmr->rkey();
    return w;
  }
  // Post and poll one WR: its completion status.
  int run(WorkRequest w) {
    w.wr_id = 1;
    if (!qp->post(w)) return -1;
    std::vector<Completion> c;
    qp->poll(c, 32, std::chrono::milliseconds(0));
    return c.empty() ? -2 : c.front().status;
  }
};

}  // namespace

TEST(FakeVerbs, GoodKeysAndBoundsMoveTheBytes) {
  Bench b;
  EXPECT_EQ(b.run(b.write(100, 4000)), 0);
  EXPECT_EQ(std::memcmp(b.src.data() + 100, b.dst.data() + 100, 4000), 0);
  EXPECT_EQ(b.dst[99], 0);
  EXPECT_EQ(b.dst[4100], 0);
}

TEST(FakeVerbs, WrongLkeyIsALocalProtectionError) {
  Bench b;
  auto w = b.write(0, 64);
  w.sges[0].lkey = b.dmr->lkey() + 77;
  EXPECT_EQ(b.run(w), rxv::testing::kWcLocProtErr);
  EXPECT_TRUE(b.qp->broken());
  EXPECT_EQ(b.dst[0], 0);  // nothing moved
}

TEST(FakeVerbs, SgeBeyondItsMrIsALocalProtectionError) {
  Bench b;
  auto w = b.write(8192 - 32, 64);  // 32 bytes past the source MR
  w.raddr = reinterpret_cast<std::uint64_t>(b.dst.data());
  EXPECT_EQ(b.run(w), rxv::testing::kWcLocProtErr);
}

TEST(FakeVerbs, SgeOfAnotherMrsKeyIsALocalProtectionError) {
  Bench b;
  auto w = b.write(0, 64);
  w.sges[0].lkey = b.dmr->lkey();  // a live MR, but not the one this address is in
  EXPECT_EQ(b.run(w), rxv::testing::kWcLocProtErr);
}

TEST(FakeVerbs, WrongRkeyIsARemoteAccessError) {
  Bench b;
  auto w = b.write(0, 64);
  w.rkey = b.smr->rkey() + 5;
  EXPECT_EQ(b.run(w), rxv::testing::kWcRemAccessErr);
}

TEST(FakeVerbs, RemoteRangeBeyondItsMrIsARemoteAccessError) {
  Bench b;
  auto w = b.write(0, 64);
  w.raddr = reinterpret_cast<std::uint64_t>(b.dst.data() + 8192 - 63);
  EXPECT_EQ(b.run(w), rxv::testing::kWcRemAccessErr);
}

TEST(FakeVerbs, DeregisteredMrIsRejected) {
  Bench b;
  auto w = b.write(0, 64);
  b.dmr.reset();
  EXPECT_EQ(b.run(w), rxv::testing::kWcRemAccessErr);
}

TEST(FakeVerbs, MoreSgesThanMaxSgeFailThePost) {
  Bench b;
  b.ctl.max_sge = 2;
  auto w = b.write(0, 64);
  w.sges = {w.sges[0], w.sges[0], w.sges[0]};
  EXPECT_EQ(b.run(w), -1);
}

namespace {
// The destination after one WRITE of [512, 512+1024) with fault f (dst starts zeroed).
std::vector<unsigned char> with_fault(Fault f, Bench& b) {
  b.ctl.fault = [f](const WorkRequest&, int) { return f; };
  EXPECT_EQ(b.run(b.write(512, 1024)), 0);
  EXPECT_EQ(b.ctl.faults, 1u);
  return b.dst;
}
}  // namespace

TEST(FakeVerbs, FaultNoDataCompletesWithoutWriting) {
  Bench b;
  auto d = with_fault({FaultKind::NoData, 0}, b);
  EXPECT_EQ(std::count(d.begin(), d.end(), 0), 8192);
}

TEST(FakeVerbs, FaultTruncateDeliversTheHead) {
  Bench b;
  auto d = with_fault({FaultKind::Truncate, 100}, b);
  EXPECT_EQ(std::memcmp(d.data() + 512, b.src.data() + 512, 100), 0);
  EXPECT_EQ(d[612], 0);
}

TEST(FakeVerbs, FaultShiftLandsLate) {
  Bench b;
  auto d = with_fault({FaultKind::Shift, 8}, b);
  EXPECT_EQ(d[512], 0);
  EXPECT_EQ(std::memcmp(d.data() + 520, b.src.data() + 512, 1016), 0);
  EXPECT_EQ(d[1536], 0);  // within the range: nothing past its end
}

TEST(FakeVerbs, FaultCorruptFlipsOneByte) {
  Bench b;
  auto d = with_fault({FaultKind::Corrupt, 7}, b);
  EXPECT_EQ(d[519], b.src[519] ^ 0x5a);
  EXPECT_EQ(std::memcmp(d.data() + 520, b.src.data() + 520, 1016), 0);
}

TEST(FakeVerbs, FaultOverrunChangesBytesPastTheEnd) {
  Bench b;
  auto d = with_fault({FaultKind::Overrun, 16}, b);
  EXPECT_EQ(std::memcmp(d.data() + 512, b.src.data() + 512, 1024), 0);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(d[1536 + i], 0x5a);
  EXPECT_EQ(d[1552], 0);
}

TEST(FakeVerbs, FaultDuplicateReplaysThePreviousPayload) {
  Bench b;
  b.ctl.fault = [](const WorkRequest&, int op) { return op == 1 ? Fault{FaultKind::Duplicate, 0} : Fault{}; };
  EXPECT_EQ(b.run(b.write(0, 256)), 0);
  EXPECT_EQ(b.run(b.write(4096, 256)), 0);
  // the second WRITE's destination got the first one's payload
  EXPECT_EQ(std::memcmp(b.dst.data() + 4096, b.src.data(), 256), 0);
  EXPECT_NE(std::memcmp(b.dst.data() + 4096, b.src.data() + 4096, 256), 0);
}

TEST(FakeVerbs, FaultDropNeverCompletes) {
  Bench b;
  b.ctl.fault = [](const WorkRequest&, int) { return Fault{FaultKind::Drop, 0}; };
  EXPECT_EQ(b.run(b.write(0, 64)), -2);
  EXPECT_EQ(b.dst[0], 0);
}
