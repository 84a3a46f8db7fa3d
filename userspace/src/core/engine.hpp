// Per-size test: allocate, register (timed), RDMA WRITE and READ loops, verify.
//
// The region under test (T) lives on this side and is used as the *local* buffer of the
// initiating QP (its lkeys; with --split the scatter list spans MRs). The peer owns a
// staging buffer (msg-size bytes) used as the remote side: in loopback the peer is this
// process (LocalPeer), in a two-host run it is `rxe-verify serve` (RemotePeer in oob.hpp).
//   WRITE loop: fill T[range] with the pattern, RDMA WRITE T[range] -> staging, the peer
//               verifies staging.
//   READ loop:  the peer fills staging with the pattern, RDMA READ staging -> T[range],
//               verify T[range] here.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/diagnosis.hpp"
#include "core/pattern.hpp"
#include "core/pipeline.hpp"
#include "core/plan.hpp"
#include "core/report.hpp"
#include "sys/verbs.hpp"

namespace rxv {

// Anonymous private mapping owned by RAII.
class MappedBuffer {
 public:
  MappedBuffer() = default;
  explicit MappedBuffer(std::size_t len);
  ~MappedBuffer();
  MappedBuffer(MappedBuffer&& o) noexcept;
  MappedBuffer& operator=(MappedBuffer&& o) noexcept;
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;
  unsigned char* data() const { return static_cast<unsigned char*>(p_); }
  std::size_t size() const { return len_; }
  explicit operator bool() const { return p_ != nullptr; }
  int error() const { return err_; }
  // Fault every page in (MADV_POPULATE_WRITE, else touching each page).
  void populate();

 private:
  void* p_ = nullptr;
  std::size_t len_ = 0;
  int err_ = 0;
};

class Peer {
 public:
  virtual ~Peer() = default;
  virtual std::uint64_t staging_addr() const = 0;
  virtual std::uint32_t staging_rkey() const = 0;
  virtual std::uint64_t staging_size() const = 0;
  // Fill staging[st_off, +len) with the pattern of region bytes [region_off, +len); an
  // error is the peer's or the connection's.
  virtual Result<void> fill(std::uint64_t st_off, std::uint64_t region_off, std::uint64_t len,
                            std::uint64_t key) = 0;
  virtual VerifyOutcome verify(std::uint64_t st_off, std::uint64_t region_off, std::uint64_t len,
                               std::uint64_t key, const std::vector<KeyCandidate>& candidates,
                               std::uint64_t region_size) = 0;
};

// Staging buffer in this process (loopback, and the server side of a two-host run).
class LocalPeer final : public Peer {
 public:
  // A run stops at its first mismatch; a peer explains this many and answers the rest
  // without the search (on `serve` a client could otherwise ask for one search after
  // another: explain_mismatch costs up to ~10 ms).
  static constexpr unsigned kMaxExplained = 8;
  // Registers `size` bytes on dev; check ok()/error().
  LocalPeer(Device& dev, std::uint64_t size);
  bool ok() const { return mr_ != nullptr; }
  int reg_errno() const { return err_; }
  std::uint64_t staging_addr() const override;
  std::uint32_t staging_rkey() const override;
  std::uint64_t staging_size() const override { return buf_.size(); }
  Result<void> fill(std::uint64_t st_off, std::uint64_t region_off, std::uint64_t len,
                    std::uint64_t key) override;
  VerifyOutcome verify(std::uint64_t st_off, std::uint64_t region_off, std::uint64_t len, std::uint64_t key,
                       const std::vector<KeyCandidate>& candidates, std::uint64_t region_size) override;

 private:
  MappedBuffer buf_;
  std::unique_ptr<MemoryRegion> mr_;
  int err_ = 0;
  unsigned explained_ = 0;
};

struct RunConfig {
  std::uint64_t offset = 0;
  Mode mode = Mode::Sampled;
  std::uint64_t msg_size = 64ull << 20;
  std::uint64_t sample_max = 1ull << 20;  // largest sampled transfer
  unsigned passes = 2;
  std::uint64_t seed = 1;
  unsigned split = 1;
  double op_timeout = 0;  // seconds per operation; 0 = automatic
  bool two_host = false;
  bool progress = false;
  unsigned tx_depth = 128;  // WRs in flight per QP (READs also capped by max_rd_atomic)
  bool overlap = true;      // verify on a checker thread while later transfers run
  // Timed/counted runs (perftest's -D and -n): after `passes`, more whole passes while
  // fewer than min_transfers transfers per direction ran, or less than `duration`
  // seconds went by since the first transfer of the size. 0 = off.
  double duration = 0;
  std::uint64_t min_transfers = 0;
};

// Staging memory (the peer's pinned buffer) is `slots` slots of one transfer each:
//   slot  = msg-size (full mode) or sample-max + 64 (sampled mode), at most 2 GiB
//   slots = min(tx-depth, max(2, 16 MiB / slot))
// so staging = slots x slot: 16 MiB or less for transfers up to 8 MiB, two transfers
// above that (128 MiB at the default 64 MiB msg-size in full mode).
inline constexpr std::uint64_t kStagingBudget = 16ull << 20;
std::uint64_t staging_slot_bytes(const RunConfig& c);
unsigned staging_slots(const RunConfig& c);
// Staging bytes the peer needs for a config (slots x slot).
std::uint64_t staging_bytes_for(const RunConfig& c);
// Per-operation deadline: explicit, or 30 s + length at 4 MiB/s (slow emulated hosts).
std::chrono::milliseconds op_deadline(const RunConfig& c, std::uint64_t len);

// Supplies the diagnosis inputs that come from the host (captured when a failure occurs).
using DiagContext = std::function<DiagInput()>;

// A result for SIZE with its metadata arithmetic filled in and nothing run yet.
SizeResult planned_result(std::uint64_t size, const RunConfig& cfg);

class Engine {
 public:
  Engine(Device& dev, QueuePair& qp, Peer& peer, RunConfig cfg, DiagContext ctx);
  SizeResult run_size(std::uint64_t size);
  // The WRITE/READ passes over a region that is already registered as `mrs` (laid out as
  // `layout`, r.size bytes at `base`). Fills r's loop figures; false (and r.result
  // "fail" with a diagnosis) on the first failure, true and r.result "pass" otherwise.
  bool exercise(SizeResult& r, unsigned char* base, const SplitLayout& layout,
                const std::vector<std::unique_ptr<MemoryRegion>>& mrs);

 private:
  // Work requests of one transfer: its scatter list over T, cut at MR boundaries, at
  // most max_sge entries per WR; `remote` is the staging address it goes to/from.
  std::vector<WorkRequest> wrs_of(const Transfer& t, std::uint64_t remote, unsigned char* base,
                                  const SplitLayout& layout,
                                  const std::vector<std::unique_ptr<MemoryRegion>>& mrs) const;
  // The region a size's loops run over: `size` bytes at `base`, registered as `mrs`.
  struct Region {
    unsigned char* base;
    const SplitLayout& layout;
    const std::vector<std::unique_ptr<MemoryRegion>>& mrs;
    std::uint64_t size;
  };
  // The staging buffer as `count` slots of `bytes`: transfer i uses slot i % count.
  struct Slots {
    std::uint64_t bytes;
    unsigned count;
  };
  // One pass's transfers and upto[i], the bytes of plan[0, i) (progress, verified bytes).
  struct PassPlan {
    std::vector<Transfer> plan;
    std::vector<std::uint64_t> upto;
  };
  PassPlan pass_plan(std::uint64_t size, std::uint64_t slot, unsigned pass) const;
  // One loop, all WRITEs or all READs of pass `pass` (pattern `key`), through the pipeline;
  // `seen` are the keys of the loops before it (a mismatch's explanation names them).
  LoopResult run_loop(OpCode op, unsigned pass, std::uint64_t key, const PassPlan& p, const Slots& slots,
                      unsigned depth, const Region& region, const std::vector<KeyCandidate>& seen);
  // A failed pipeline (not a data mismatch) as the size's diagnosis.
  void fail_loop(SizeResult& r, OpCode op, const LoopFailure& f, const Transfer& t);
  // A data mismatch a loop's check found, as the size's mismatch and diagnosis.
  void fail_mismatch(SizeResult& r, OpCode op, const LoopFailure& f, const Transfer& t);
  void fail(SizeResult& r, const DiagInput& in);

  Device& dev_;
  QueuePair& qp_;
  Peer& peer_;
  RunConfig cfg_;
  DiagContext ctx_;
  int max_sge_ = 1;
};

}  // namespace rxv
