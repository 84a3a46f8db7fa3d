// The engine's hot path allocates nothing per posted work request (issue 62 item 7:
// perftest builds its work requests once). This binary replaces the global operator new
// and counts every allocation, on every thread (the checker's too). The engine runs over
// the fake device through a QueuePair that forwards to the fake's and reads the count at
// every post; what the fake itself allocates (its queue, its completions) is not counted.
// The allocations between consecutive posts of one loop are the hot path's: their sum
// must not grow with the number of posts.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "core/engine.hpp"
#include "fake_verbs.hpp"
#include "test_data.hpp"

// The replacements below pair malloc with free; once inlined, GCC's check sees std::free
// of what "operator new" returned and warns (a false positive for a replacement).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
std::atomic<std::uint64_t> g_allocs{0};
thread_local int t_in_fake = 0;  // > 0: inside the fake device, not counted
}  // namespace

void* operator new(std::size_t n) {
  if (!t_in_fake) g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  if (!t_in_fake) g_allocs.fetch_add(1, std::memory_order_relaxed);
  const auto al = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return ::operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

using namespace rxv;
using rxv::testing::FakeControl;
using rxv::testing::FakeDevice;

namespace {

struct InFake {
  InFake() { ++t_in_fake; }
  ~InFake() { --t_in_fake; }
  InFake(const InFake&) = delete;
  InFake& operator=(const InFake&) = delete;
};

// The fake's QP, counted around: at every post, the allocations since the previous post
// of the same loop (same opcode, consecutive) are added to hot.
class CountingQp final : public QueuePair {
 public:
  explicit CountingQp(std::unique_ptr<QueuePair> q) : q_(std::move(q)) {}
  QpAddr local_addr() const override { return q_->local_addr(); }
  Result<void> connect(const QpAddr& r) override {
    InFake f;
    return q_->connect(r);
  }
  Result<void> post(const WorkRequest& wr) override {
    const std::uint64_t now = g_allocs.load();
    if (posts > 0 && wr.op == last_op_) hot += now - last_;
    last_op_ = wr.op;
    ++posts;
    InFake f;
    auto r = q_->post(wr);
    last_ = g_allocs.load();
    return r;
  }
  int poll(std::vector<Completion>& out, int max, std::chrono::milliseconds w) override {
    InFake f;
    return q_->poll(out, max, w);
  }
  void drain() override {
    InFake f;
    q_->drain();
  }
  unsigned max_send_wr() const override { return q_->max_send_wr(); }
  unsigned max_rd_atomic() const override { return q_->max_rd_atomic(); }
  bool broken() const override { return q_->broken(); }

  std::uint64_t posts = 0, hot = 0;

 private:
  std::unique_ptr<QueuePair> q_;
  OpCode last_op_ = OpCode::Write;
  std::uint64_t last_ = 0;
};

struct Counted {
  std::uint64_t posts, hot;
};

// One run_size over `size` bytes in `mode`; the posts and the hot path's allocations.
Counted run(Mode mode, std::uint64_t size, unsigned split = 1, unsigned passes = 1) {
  FakeControl ctl;
  FakeDevice dev{ctl};
  CountingQp qp(dev.create_qp({}).value());
  RunConfig cfg;
  cfg.seed = 7;
  cfg.mode = mode;
  cfg.passes = passes;
  cfg.msg_size = 64 << 10;
  cfg.split = split;
  cfg.progress = false;
  LocalPeer peer(dev, staging_bytes_for(cfg));
  DiagInput base;
  base.buddyinfo = data("buddyinfo-host.txt");
  base.limits = data("limits-unlimited.txt");
  base.meminfo = data("meminfo-24G.txt");
  Engine e(dev, qp, peer, cfg, [&] { return base; });
  SizeResult s = e.run_size(size);
  EXPECT_EQ(s.result, SizeOutcome::Pass) << (s.diagnosis ? s.diagnosis->summary : "");
  return {qp.posts, qp.hot};
}

}  // namespace

TEST(EngineAlloc, FullModeAllocatesNothingPerPost) {
  // 64 KiB messages: 32 and 128 transfers each way
  const Counted a = run(Mode::Full, 2ull << 20), b = run(Mode::Full, 8ull << 20);
  EXPECT_EQ(b.posts, 4 * a.posts);
  EXPECT_EQ(b.hot, a.hot) << a.posts << " posts: " << a.hot << " allocations between posts, " << b.posts
                          << " posts: " << b.hot;
  EXPECT_EQ(b.hot, 0u) << "allocations between the posts of " << b.posts << " posts";
}

TEST(EngineAlloc, SplitScatterListsAllocateNothingPerPost) {
  // several MRs: transfers that cross an MR boundary are WRs of several SGEs
  const Counted a = run(Mode::Full, 2ull << 20, 3), b = run(Mode::Full, 8ull << 20, 3);
  EXPECT_GT(b.posts, a.posts);
  EXPECT_EQ(b.hot, 0u) << a.posts << " posts: " << a.hot << ", " << b.posts << " posts: " << b.hot;
}

TEST(EngineAlloc, SampledModeAllocatesNothingPerPost) {
  // a pass's transfers do not depend on the size: more passes are more posts
  const Counted a = run(Mode::Sampled, 8ull << 20, 1, 1), b = run(Mode::Sampled, 8ull << 20, 1, 4);
  EXPECT_GT(a.posts, 100u);
  EXPECT_EQ(b.posts, 4 * a.posts);
  EXPECT_EQ(b.hot, 0u) << a.posts << " posts: " << a.hot << ", " << b.posts << " posts: " << b.hot;
}
