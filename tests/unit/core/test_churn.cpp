#include <gtest/gtest.h>

#include <cerrno>

#include "core/churn.hpp"
#include "core/local_peer.hpp"
#include "fake_verbs.hpp"
#include "test_data.hpp"

using namespace rxv;
using rxv::testing::FakeControl;
using rxv::testing::FakeDevice;

namespace {

const char* kMeminfo =
    "MemTotal:        4012340 kB\n"
    "MemFree:         3500000 kB\n"
    "MemAvailable:    3600000 kB\n"
    "Slab:              61234 kB\n"
    "VmallocTotal:   34359738367 kB\n"
    "VmallocUsed:       12345 kB\n";
const char* kVmallocinfo =
    "0xffffc90000000000-0xffffc90000005000   20480 irq_init_percpu_irqstack+0x114/0x180 vmap\n"
    "0xffffc90000005000-0xffffc90000007000    8192 acpi_os_map_iomem+0x1ab/0x1e0 phys=0x00000000 ioremap\n"
    "0xffffc90000400000-0xffffc90000801000 4198400 __kvmalloc_node_noprof+0x6e/0x190 pages=1024 vmalloc "
    "vpages N0=1024\n"
    "0xffffc90000c00000-0xffffc90001001000 4198400 unpurged vm_area\n";

struct Rig {
  FakeControl ctl;
  FakeDevice dev{ctl};
  std::unique_ptr<QueuePair> qp;
  std::unique_ptr<LocalPeer> peer;
  ChurnConfig cfg;
  DiagInput base;
  int kmem_calls = 0;
  Rig() {
    qp = dev.create_qp({}).value();
    cfg.size = 4ull << 20;
    cfg.count = 5;
    cfg.run.passes = 1;
    cfg.run.seed = 7;
    peer = std::make_unique<LocalPeer>(dev, staging_bytes_for(cfg.run));
    base.buddyinfo = data("buddyinfo-fragmented.txt");
    base.limits = data("limits-unlimited.txt");
    base.meminfo = data("meminfo-24G.txt");
    base.module.flavor = ModuleFlavor::Stock;
    ctl.regs = 0;
  }
  ChurnReport run() {
    // Every reading "allocates" 1 MiB more vmalloc than the one before.
    return run_churn(
        dev, qp.get(), peer.get(), cfg, [this] { return base; },
        [this] {
          KernelMemory k = parse_kernel_memory(kMeminfo, kVmallocinfo);
          k.vmallocinfo += static_cast<std::uint64_t>(kmem_calls++) << 20;
          return k;
        });
  }
};

}  // namespace

TEST(Churn, ParsesKernelMemoryFigures) {
  auto k = parse_kernel_memory(kMeminfo, kVmallocinfo);
  EXPECT_TRUE(k.has_meminfo);
  EXPECT_TRUE(k.has_vmallocinfo);
  EXPECT_EQ(k.mem_free, 3500000ull * 1024);
  EXPECT_EQ(k.slab, 61234ull * 1024);
  EXPECT_EQ(k.vmalloc_used, 12345ull * 1024);           // not VmallocTotal
  EXPECT_EQ(k.vmallocinfo, 20480ull + 8192 + 4198400);  // the unpurged (freed) area not counted
  auto none = parse_kernel_memory("", "");
  EXPECT_FALSE(none.has_meminfo);
  EXPECT_FALSE(none.has_vmallocinfo);
  // Unprivileged readers of vmallocinfo get nothing: not a zero figure.
  EXPECT_FALSE(parse_kernel_memory(kMeminfo, "").has_vmallocinfo);
}

TEST(Churn, SummarizesSeconds) {
  auto s = summarize({0.3, 0.1, 0.2});
  EXPECT_DOUBLE_EQ(s.min, 0.1);
  EXPECT_DOUBLE_EQ(s.median, 0.2);
  EXPECT_DOUBLE_EQ(s.max, 0.3);
  EXPECT_DOUBLE_EQ(summarize({0.1, 0.2, 0.4, 0.9}).median, 0.3);
  EXPECT_EQ(summarize({}).n, 0u);
}

TEST(Churn, RegistersAndDeregistersCountTimes) {
  Rig r;
  auto rep = r.run();
  EXPECT_EQ(r.ctl.regs, 5);
  ASSERT_EQ(rep.iterations.size(), 5u);
  for (unsigned i = 0; i < 5; ++i) {
    EXPECT_EQ(rep.iterations[i].index, i + 1);
    EXPECT_TRUE(rep.iterations[i].registered);
    EXPECT_FALSE(rep.iterations[i].traffic);
  }
  EXPECT_EQ(r.ctl.ops, 0);     // no traffic asked for
  EXPECT_EQ(r.kmem_calls, 3);  // baseline, registered (first iteration), after
  ASSERT_TRUE(rep.baseline && rep.registered && rep.after);
  EXPECT_EQ(rep.after->vmallocinfo - rep.baseline->vmallocinfo, 2ull << 20);
  EXPECT_EQ(finalize(rep), kExitPass);
  EXPECT_EQ(rep.verdict, Verdict::Pass);
  auto j = to_json(rep);
  EXPECT_EQ(j["command"], "churn");
  EXPECT_EQ(j["iterations"].size(), 5u);
  EXPECT_EQ(j["completed"], 5);
  EXPECT_EQ(j["reg_seconds"]["n"], 5);
  EXPECT_EQ(j["kernel_memory"]["registered_minus_baseline"]["vmallocinfo"], 1 << 20);
  EXPECT_EQ(j["kernel_memory"]["after_minus_baseline"]["vmallocinfo"], 2 << 20);
  EXPECT_EQ(j["kernel_memory"]["after_minus_baseline"]["slab"], 0);
  EXPECT_TRUE(j["failure"].is_null());
  auto t = to_text(rep);
  EXPECT_NE(t.find("register    min"), std::string::npos) << t;
  EXPECT_NE(t.find("vmallocinfo"), std::string::npos) << t;
  EXPECT_NE(t.find("verdict: pass"), std::string::npos) << t;
}

TEST(Churn, ReportsTheFailingIterationWithADiagnosis) {
  Rig r;
  r.cfg.size = 144ull << 20;  // metadata 576 KiB = order 8; the fragmented sample tops out at 7
  r.ctl.reg_errno = [&](std::size_t len) { return len == r.cfg.size && r.ctl.regs == 3 ? ENOMEM : 0; };
  auto rep = r.run();
  ASSERT_EQ(rep.iterations.size(), 3u);
  EXPECT_FALSE(rep.iterations[2].registered);
  EXPECT_EQ(rep.iterations[2].reg_errno, ENOMEM);
  EXPECT_EQ(rep.failed_iteration, 3u);
  EXPECT_EQ(rep.failed_stage, "register");
  ASSERT_TRUE(rep.failure);
  EXPECT_EQ(rep.failure->cause, cause::kFragmentation) << rep.failure->summary;
  EXPECT_TRUE(rep.after);  // figures are still read after a failure
  EXPECT_EQ(finalize(rep), kExitFail);
  auto j = to_json(rep);
  EXPECT_EQ(j["failure"]["iteration"], 3);
  EXPECT_EQ(j["failure"]["diagnosis"]["cause"], "fragmentation");
  EXPECT_EQ(j["completed"], 2);
  EXPECT_TRUE(j["iterations"][2]["dereg_seconds"].is_null());
  EXPECT_NE(to_text(rep).find("FAILED at iteration 3 of 5, register [fragmentation]"), std::string::npos)
      << to_text(rep);
}

TEST(Churn, TrafficVerifiesEveryRegistration) {
  Rig r;
  r.cfg.traffic = true;
  r.cfg.count = 3;
  auto rep = r.run();
  ASSERT_EQ(rep.iterations.size(), 3u);
  for (const auto& it : rep.iterations) {
    ASSERT_TRUE(it.traffic);
    EXPECT_EQ(it.traffic->result, SizeOutcome::Pass);
    EXPECT_GT(it.traffic->verified_bytes, 0u);
    EXPECT_EQ(it.traffic->passes, 1u);
  }
  EXPECT_GT(r.ctl.ops, 0);
  EXPECT_EQ(r.ctl.regs, 3);
  EXPECT_EQ(finalize(rep), kExitPass);
}

TEST(Churn, CorruptionInTheSecondIterationFailsThere) {
  Rig r;
  r.cfg.traffic = true;
  r.cfg.count = 4;
  // Count the ops of one iteration, then corrupt the first op of the second.
  {
    Rig probe;
    probe.cfg.traffic = true;
    probe.cfg.count = 1;
    probe.run();
    r.ctl.corrupt_op_at = probe.ctl.ops;
  }
  auto rep = r.run();
  EXPECT_EQ(rep.failed_iteration, 2u);
  EXPECT_EQ(rep.failed_stage, "traffic");
  ASSERT_TRUE(rep.failure);
  EXPECT_EQ(rep.failure->cause, cause::kDataCorruption);
  EXPECT_EQ(rep.iterations.size(), 2u);
  EXPECT_EQ(finalize(rep), kExitFail);
}

TEST(Churn, RecordsTheFreeBlocksRightBeforeEachRegistration) {
  Rig r;
  r.cfg.size = 1ull << 30;  // 262,144 pages: 4 MiB of metadata, order 10
  r.cfg.count = 2;
  int reads = 0;
  std::vector<int> regs_at_read;
  // the first reading has one free order-10 block in Normal, the second none
  r.cfg.read_buddyinfo = [&]() -> std::optional<std::string> {
    regs_at_read.push_back(r.ctl.regs);
    if (reads++ == 0)
      return std::string(
          "Node 0, zone      DMA      1 1 1 0 2 1 1 0 1 1 3\n"
          "Node 0, zone   Normal   10 9 8 7 6 5 4 3 2 1 1\n");
    return data("buddyinfo-fragmented.txt");
  };
  auto rep = r.run();
  ASSERT_EQ(rep.iterations.size(), 2u);
  EXPECT_EQ(regs_at_read, (std::vector<int>{0, 1}));  // read before each ibv_reg_mr, not after
  ASSERT_TRUE(rep.iterations[0].buddy_before);
  EXPECT_EQ(rep.iterations[0].buddy_before->order, 10);
  EXPECT_EQ(rep.iterations[0].buddy_before->free_blocks, 1u);  // DMA's 3 do not count
  EXPECT_EQ(rep.iterations[0].buddy_before->largest_free_order, 10);
  ASSERT_TRUE(rep.iterations[1].buddy_before);
  EXPECT_EQ(rep.iterations[1].buddy_before->free_blocks, 0u);
  EXPECT_EQ(rep.iterations[1].buddy_before->largest_free_order, 7);
  auto j = to_json(rep);
  EXPECT_EQ(j["iterations"][0]["buddyinfo_before"]["free_blocks"], 1);
  EXPECT_EQ(j["iterations"][1]["buddyinfo_before"]["order"], 10);
  EXPECT_EQ(j["iterations"][1]["buddyinfo_before"]["zones"][2]["zone"], "Normal");
  EXPECT_EQ(j["iterations"][1]["buddyinfo_before"]["zones"][2]["free"][0], 51413);
}

TEST(Churn, NoBuddyinfoReaderOrUnreadableRecordsNothing) {
  Rig r;
  r.cfg.count = 1;
  auto rep = r.run();
  EXPECT_FALSE(rep.iterations[0].buddy_before);
  EXPECT_TRUE(to_json(rep)["iterations"][0]["buddyinfo_before"].is_null());
  r.cfg.read_buddyinfo = []() -> std::optional<std::string> { return std::nullopt; };
  EXPECT_FALSE(r.run().iterations[0].buddy_before);
}
