// The pipelined data path of one loop (all WRITEs or all READs of a pass):
//   - up to `depth` work requests in flight on the QP (the caller caps READs at the
//     negotiated max_rd_atomic),
//   - selective signalling: a WR is signalled when the pipeline would otherwise stall
//     (last of the loop, send queue or staging about to be full) and periodically, so
//     the send queue keeps draining; RC completes a send queue in order, so a signalled
//     completion implies every earlier WR,
//   - batched CQ polling (up to 32 completions per call),
//   - verification overlapped with transfer: a completed transfer is handed to a checker
//     thread while later transfers are on the wire. At most `slots` transfers are posted
//     and not yet verified, which bounds the staging memory (slots x slot bytes).
// A failure stops posting; if anything is still in flight the QP is drained (moved to
// the error state, flushed completions collected) before the buffers can go away.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/pattern.hpp"
#include "sys/verbs.hpp"

namespace rxv {

// A data check's outcome: a peer/transport error, or a pattern mismatch and its story.
struct VerifyOutcome {
  bool ok = true;
  std::string error;  // transport/peer error (not a data mismatch)
  std::string cause;  // its diagnosis cause when known (base/cause.hpp), else ""
  std::optional<Mismatch> mismatch;
  std::string explanation;
};

struct LoopSpec {
  OpCode op = OpCode::Write;
  std::size_t count = 0;  // transfers
  // Work requests of transfer i (wr_id and signalled are set by the pipeline): written
  // into the first N elements of `out`, which is grown when it is short and never shrunk,
  // so its elements and their SGE lists are reused (no allocation per post once they
  // have grown); returns N.
  std::function<std::size_t(std::size_t i, std::vector<WorkRequest>& out)> wrs;
  // Main thread, before transfer i is posted: an error stops the loop (e.g. the peer's fill).
  std::function<Result<void>(std::size_t)> prepare;
  // Checker thread, after transfer i completed: the data check.
  std::function<VerifyOutcome(std::size_t)> check;
  // Main thread, whenever the count of verified transfers grew (progress display).
  std::function<void(std::size_t verified)> progress;
  std::function<std::uint64_t(std::size_t)> bytes;  // payload of transfer i
  // True when transfer i (> j) may not be in flight with transfer j: their ranges in the
  // region overlap, and each carries its own pattern. i waits until j completed (WRITE:
  // its source was read) or was verified (READ: its destination was checked). Unset:
  // no transfer waits for another.
  std::function<bool(std::size_t i, std::size_t j)> overlaps;
  unsigned depth = 128;  // WRs in flight
  unsigned slots = 2;    // transfers posted and not yet verified
  // No-progress limit while `in_flight_bytes` are outstanding.
  std::function<std::chrono::milliseconds(std::uint64_t in_flight_bytes)> deadline;
  bool threaded = true;  // false: check inline on the main thread (no overlap)
};

struct LoopFailure {
  enum class Kind { None, Post, Completion, Timeout, Poll, Prepare, Check };
  Kind kind = Kind::None;
  std::size_t transfer = 0;  // plan index of the failed transfer
  std::uint64_t wr_id = 0;   // failed (or oldest outstanding) work request
  int wc_status = 0;
  std::string status_str;            // WC status text or error
  std::string cause;                 // Kind::Prepare: the error's cause token, when known
  std::size_t completed_before = 0;  // transfers completed before the failure
  std::size_t verified_before = 0;   // of those, verified
  std::uint64_t in_flight = 0;       // WRs outstanding when it happened (then drained)
  VerifyOutcome check;               // Kind::Check: the checker's finding
};

struct LoopResult {
  LoopFailure failure;
  std::uint64_t bytes = 0;   // completed payload
  std::uint64_t wrs = 0;     // work requests posted
  std::size_t verified = 0;  // transfers verified
  double wire_seconds = 0;   // time with at least one WR in flight
  double wall_seconds = 0;   // whole loop including fills and checks
  double peak_Bps = 0;       // best completion rate over >= 50 ms windows
  bool ok() const { return failure.kind == LoopFailure::Kind::None; }
};

LoopResult run_pipeline(QueuePair& qp, const LoopSpec& s);

// One line for a failed pipeline: "transfer 7 (wr_id 8) failed: STATUS; 6 transfers
// completed (5 verified) before it, 3 work requests in flight were drained".
std::string describe(const LoopFailure& f);

}  // namespace rxv
