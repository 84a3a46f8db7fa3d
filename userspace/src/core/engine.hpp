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
#include "core/local_peer.hpp"
#include "core/mapped_buffer.hpp"
#include "core/pattern.hpp"
#include "core/peer.hpp"
#include "core/pipeline.hpp"
#include "core/plan.hpp"
#include "core/report.hpp"
#include "core/run_config.hpp"
#include "sys/verbs.hpp"

namespace rxv {

// A result for SIZE with its metadata arithmetic filled in and nothing run yet.
SizeResult planned_result(std::uint64_t size, const RunConfig& cfg);

class Engine {
 public:
  Engine(Device& dev, QueuePair& qp, Peer& peer, RunConfig cfg, DiagContext ctx);
  SizeResult run_size(std::uint64_t size);
  // The WRITE/READ passes over a region that is already registered as `mrs` (laid out as
  // `layout`, r.size bytes at `base`). Fills r's loop figures; false (and r.result
  // "fail" with a diagnosis) on the first failure, true and r.result "pass" otherwise.
  // [lo, hi) is the memory around the region that READ guards may use (default: the
  // region only; run_size gives a page before it and kGuardBytes after it).
  bool exercise(SizeResult& r, unsigned char* base, const SplitLayout& layout,
                const std::vector<std::unique_ptr<MemoryRegion>>& mrs, const unsigned char* lo = nullptr,
                const unsigned char* hi = nullptr);

 private:
  // Work requests of one transfer: its scatter list over T, cut at MR boundaries, at
  // most max_sge entries per WR; `remote` is the staging address it goes to/from. Written
  // into the first N elements of `out` (returns N), reusing them and their SGE lists:
  // the hot path allocates nothing per post once they have grown (LoopSpec::wrs).
  std::size_t wrs_of(const Transfer& t, std::uint64_t remote, unsigned char* base, const SplitLayout& layout,
                     const std::vector<std::unique_ptr<MemoryRegion>>& mrs,
                     std::vector<WorkRequest>& out) const;
  // The region a size's loops run over: `size` bytes at `base`, registered as `mrs`.
  struct Region {
    unsigned char* base;
    const SplitLayout& layout;
    const std::vector<std::unique_ptr<MemoryRegion>>& mrs;
    std::uint64_t size;
    std::uint64_t before, after_end;  // guard room: bytes before base, region coordinate of its end
  };
  // The staging buffer as `count` slots of `bytes`: transfer i uses slot i % count,
  // placed kGuardBytes into it (plus its region offset % 64 in sampled mode).
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
