#include "core/engine.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "base/size.hpp"
#include "core/progress.hpp"

namespace rxv {

Engine::Engine(Device& dev, QueuePair& qp, Peer& peer, RunConfig cfg, DiagContext ctx)
    : dev_(dev), qp_(qp), peer_(peer), cfg_(cfg), ctx_(std::move(ctx)) {
  max_sge_ = std::clamp(dev_.caps().max_sge, 1, 32);
}

void Engine::fail(SizeResult& r, const DiagInput& in) {
  r.result = SizeOutcome::Fail;
  r.diagnosis = diagnose(in);
}

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

std::size_t Engine::wrs_of(const Transfer& t, std::uint64_t remote, unsigned char* base,
                           const SplitLayout& layout, const std::vector<std::unique_ptr<MemoryRegion>>& mrs,
                           std::vector<WorkRequest>& out) const {
  const auto step = static_cast<std::size_t>(max_sge_);
  std::size_t n = 0;
  std::uint64_t o = t.offset;
  const std::uint64_t end = t.offset + t.length;
  while (o < end) {
    if (n == out.size()) {  // grows only: elements and their SGE lists (room for max_sge) are reused
      out.emplace_back();
      out.back().sges.reserve(step);
    }
    WorkRequest& w = out[n++];
    w.sges.clear();
    w.raddr = remote;
    w.rkey = peer_.staging_rkey();
    while (o < end && w.sges.size() < step) {
      const unsigned m = layout.mr_of(o);
      const std::uint64_t stop = std::min(end, layout.starts[m + 1]);
      w.sges.push_back(
          {reinterpret_cast<std::uint64_t>(base + o), static_cast<std::uint32_t>(stop - o), mrs[m]->lkey()});
      remote += stop - o;
      o = stop;
    }
  }
  return n;
}

namespace {
// A peer call's failure (two hosts: the out-of-band session, which it ended) as a
// diagnosis: its cause when the call named one, else the connection's.
Diagnosis peer_diagnosis(const std::string& c, std::string summary) {
  if (c == cause::kPeerOutOfStep)
    return {c, std::move(summary),
            "the session was ended: a reply did not answer its request; check that the server runs the same "
            "rxe-verify and that nothing else writes to its port, then run again"};
  if (c == cause::kPeerTimeout)
    return {c, std::move(summary),
            "the session was ended: the server did not answer in time; check its load and its log "
            "(`rxe-verify serve` prints why a session ended), then run again"};
  return {cause::kNetwork, std::move(summary), "check the out-of-band TCP connection to the peer"};
}
}  // namespace

void Engine::fail_loop(SizeResult& r, OpCode op, const LoopFailure& f, const Transfer& t) {
  const char* opname = op == OpCode::Write ? "RDMA WRITE" : "RDMA READ";
  std::string where = std::string(opname) + " of " + std::to_string(t.length) + " bytes at region offset " +
                      std::to_string(t.offset) + " (" + describe(f) + ")";
  if (f.kind == LoopFailure::Kind::Prepare ||
      (f.kind == LoopFailure::Kind::Check && !f.check.error.empty())) {
    r.result = SizeOutcome::Fail;
    const bool prep = f.kind == LoopFailure::Kind::Prepare;
    std::string e = prep ? "peer call failed: " + f.status_str : "peer verification failed: " + f.check.error;
    r.diagnosis = peer_diagnosis(prep ? f.cause : f.check.cause, e + "; " + where);
    return;
  }
  DiagInput in = ctx_ ? ctx_() : DiagInput{};
  in.stage = f.kind == LoopFailure::Kind::Timeout ? Stage::Timeout : Stage::Transfer;
  in.size = r.size;
  in.offset = r.offset;
  in.wc_status = f.kind == LoopFailure::Kind::Completion ? f.wc_status : -1;
  in.wc_status_str = f.status_str;
  in.two_host = cfg_.two_host;
  fail(r, in);
  r.diagnosis->summary = where + ": " + r.diagnosis->summary;
}

SizeResult planned_result(std::uint64_t size, const RunConfig& cfg) {
  SizeResult r;
  r.size = size;
  r.offset = cfg.offset;
  MetadataInfo md = rxe_metadata(cfg.offset, size);
  r.pages = md.pages;
  r.metadata_bytes = md.bytes;
  r.metadata_order = md.order;
  r.mode = cfg.mode;
  return r;
}

SizeResult Engine::run_size(std::uint64_t size) {
  SizeResult r = planned_result(size, cfg_);
  r.passes = cfg_.passes;
  const std::uint64_t mis = cfg_.offset % kPageSize;
  SplitLayout layout = SplitLayout::make(size, mis, cfg_.split);
  r.mrs = layout.count();
  if (r.mrs > 1) {
    // Report the metadata of the largest MR: that is what a stock rxe must allocate.
    std::uint64_t biggest = 0;
    for (unsigned i = 0; i < r.mrs; ++i)
      biggest = std::max(biggest,
                         rxe_metadata(mis + layout.starts[i], layout.starts[i + 1] - layout.starts[i]).bytes);
    r.metadata_bytes = biggest;
    r.metadata_order = alloc_order(biggest);
  }

  // Allocate: the region starts `offset` bytes into the mapping's second page (the
  // first, and kGuardBytes after the region, are room for the READ guards).
  MappedBuffer buf(static_cast<std::size_t>(kPageSize + cfg_.offset + size + kGuardBytes));
  if (!buf) {
    DiagInput in = ctx_ ? ctx_() : DiagInput{};
    in.stage = Stage::Allocate;
    in.err = buf.error();
    in.size = size;
    in.offset = cfg_.offset;
    fail(r, in);
    return r;
  }
  {
    Progress pr(cfg_.progress, "populate " + format_size(size), 1);
    buf.populate();
  }
  unsigned char* base = buf.data() + kPageSize + cfg_.offset;

  // Register, timed.
  std::vector<std::unique_ptr<MemoryRegion>> mrs;
  auto t0 = std::chrono::steady_clock::now();
  for (unsigned i = 0; i < layout.count(); ++i) {
    auto rr = dev_.reg_mr(base + layout.starts[i], layout.starts[i + 1] - layout.starts[i]);
    if (!rr.mr) {
      r.reg_seconds = since(t0);
      r.reg_errno = rr.err;
      DiagInput in = ctx_ ? ctx_() : DiagInput{};
      in.stage = Stage::Register;
      in.err = rr.err;
      in.size = size;
      in.offset = cfg_.offset;
      in.split = layout.count();
      in.already_pinned = peer_.staging_size();
      fail(r, in);
      return r;
    }
    mrs.push_back(std::move(rr.mr));
  }
  r.reg_seconds = since(t0);
  r.registered = true;
  exercise(r, base, layout, mrs, buf.data(), buf.data() + buf.size());
  return r;
}

Engine::PassPlan Engine::pass_plan(std::uint64_t size, std::uint64_t slot, unsigned pass) const {
  PlanParams pp;
  pp.size = size;
  pp.misalign = cfg_.offset % kPageSize;
  pp.mode = cfg_.mode;
  // what a slot holds besides the guards (and the 0-63 bytes of sampled alignment)
  const std::uint64_t room = slot > 2 * kGuardBytes + 1 ? slot - 2 * kGuardBytes : 1;
  pp.msg_size = room;
  pp.max_transfer = std::min<std::uint64_t>(cfg_.sample_max, room - std::min<std::uint64_t>(64, room / 2));
  pp.seed = cfg_.seed;
  pp.pass = pass;
  PassPlan p;
  p.plan = make_plan(pp);
  std::uint64_t total = 0;
  for (const auto& t : p.plan) {
    p.upto.push_back(total);
    total += t.length;
  }
  p.upto.push_back(total);
  return p;
}

namespace {
// The READ guards of a loop: the bytes each side of a transfer's destination in the
// region (kGuardBytes, inside the room around it), copied before the transfer is posted
// and compared after it completed. Bytes that another transfer may legitimately write
// meanwhile (one within `slots` of it: in flight with it) are not compared.
class ReadGuards {
 public:
  ReadGuards(const std::vector<Transfer>& plan, unsigned slots, unsigned char* base, std::uint64_t before,
             std::uint64_t after_end)
      : plan_(plan), slots_(slots), base_(base), before_(before), after_end_(after_end), snaps_(slots) {}
  void snapshot(std::size_t i) {
    const Transfer& t = plan_[i];
    auto& s = snaps_[i % slots_];
    std::memcpy(s.data(), base_ + t.offset - head(t), head(t));
    std::memcpy(s.data() + kGuardBytes, base_ + t.offset + t.length, tail(t));
  }
  VerifyOutcome check(std::size_t i) const {
    const Transfer& t = plan_[i];
    const auto& s = snaps_[i % slots_];
    const std::uint64_t h = head(t), tl = tail(t), end = t.offset + t.length;
    // skip[k]: guard byte k (0..h-1 before the range, kGuardBytes + 0..tl-1 after) is
    // another in-flight transfer's to write.
    std::array<bool, 2 * kGuardBytes> skip{};
    const std::size_t lo = i + 1 > slots_ ? i + 1 - slots_ : 0, hi = std::min(plan_.size(), i + slots_);
    for (std::size_t j = lo; j < hi; ++j) {
      if (j == i) continue;
      const std::uint64_t a = plan_[j].offset, b = plan_[j].offset + plan_[j].length;
      // before the range: region [offset - h, offset) (offset + before_ >= h)
      for (std::uint64_t k = 0; k < h; ++k) {
        const std::uint64_t pos = t.offset + k;  // region coordinate + h
        if (pos >= a + h && pos < b + h) skip[k] = true;
      }
      for (std::uint64_t k = 0; k < tl; ++k)
        if (end + k >= a && end + k < b) skip[kGuardBytes + k] = true;
    }
    Mismatch m;
    std::uint64_t before = 0, after = 0;
    auto compare = [&](std::size_t k, const unsigned char* now, std::uint64_t region_pos) {
      if (skip[k] || *now == s[k]) return;
      if (m.bad_bytes++ == 0) {
        m.region_offset = region_pos;
        m.expected = s[k];
        m.actual = *now;
        m.first_bad_page = region_pos / 4096;
      }
      m.last_bad_offset = region_pos;
      ++(k < kGuardBytes ? before : after);
    };
    for (std::uint64_t k = 0; k < h; ++k)
      compare(k, base_ + t.offset - h + k, t.offset + k >= h ? t.offset + k - h : 0);
    for (std::uint64_t k = 0; k < tl; ++k) compare(kGuardBytes + k, base_ + end + k, end + k);
    VerifyOutcome v;
    if (m.bad_bytes == 0) return v;
    v.ok = false;
    v.mismatch = m;
    v.explanation = guard_explanation(before, after, t.offset, t.length);
    return v;
  }

 private:
  std::uint64_t head(const Transfer& t) const { return std::min(kGuardBytes, t.offset + before_); }
  std::uint64_t tail(const Transfer& t) const {
    return std::min(kGuardBytes, after_end_ - (t.offset + t.length));
  }
  const std::vector<Transfer>& plan_;
  const std::size_t slots_;
  unsigned char* const base_;
  const std::uint64_t before_, after_end_;
  std::vector<std::array<unsigned char, 2 * kGuardBytes>>
      snaps_;  // per staging slot: one per transfer in flight
};
}  // namespace

LoopResult Engine::run_loop(OpCode op, unsigned pass, std::uint64_t key, const PassPlan& p,
                            const Slots& slots, unsigned depth, const Region& region,
                            const std::vector<KeyCandidate>& seen) {
  const bool w = op == OpCode::Write;
  const auto& plan = p.plan;
  unsigned char* base = region.base;
  const std::uint64_t size = region.size;
  auto st_of = [&](std::size_t i) {
    const Transfer& t = plan[i];
    return (i % slots.count) * slots.bytes + kGuardBytes +
           (cfg_.mode == Mode::Full ? std::uint64_t{0} : t.offset % 64);
  };
  // Each transfer's own pattern key; the loops before this one and this one are where
  // a mismatch's explanation looks for stale bytes.
  auto key_of = [key](std::size_t i) { return transfer_key(key, i); };
  std::vector<KeyCandidate> cands = seen;
  cands.push_back({key, "pass " + std::to_string(pass + 1) + (w ? " write" : " read")});
  if (w) {
    // the peer's staging buffer all guard bytes before the loop's WRITEs land in it
    if (auto armed = peer_.arm_staging(); !armed) {
      LoopResult lr;
      lr.failure.kind = LoopFailure::Kind::Prepare;
      lr.failure.status_str = armed.error().summary;
      lr.failure.cause = armed.error().cause;
      return lr;
    }
  }
  ReadGuards guards(plan, w ? 1 : slots.count, base, region.before, region.after_end);
  Progress pr(cfg_.progress,
              "pass " + std::to_string(pass + 1) + (w ? " write " : " read  ") + format_size(size),
              p.upto.back());
  LoopSpec ls;
  ls.op = op;
  ls.count = plan.size();
  ls.depth = w ? depth : std::max(1u, std::min(depth, qp_.max_rd_atomic()));
  ls.slots = slots.count;
  ls.threaded = cfg_.overlap;
  ls.bytes = [&](std::size_t i) { return plan[i].length; };
  ls.overlaps = [&](std::size_t i, std::size_t j) {
    return plan[i].offset < plan[j].offset + plan[j].length &&
           plan[j].offset < plan[i].offset + plan[i].length;
  };
  ls.deadline = [&](std::uint64_t b) { return op_deadline(cfg_, b); };
  ls.wrs = [&](std::size_t i, std::vector<WorkRequest>& out) {
    return wrs_of(plan[i], peer_.staging_addr() + st_of(i), base, region.layout, region.mrs, out);
  };
  ls.prepare = [&](std::size_t i) -> Result<void> {
    const Transfer& t = plan[i];
    if (!w) {
      guards.snapshot(i);
      return peer_.fill(st_of(i), t.offset, t.length, key_of(i));
    }
    pattern_fill(base + t.offset, t.offset, t.length, key_of(i));
    peer_.arm_guards(st_of(i), t.length);
    return {};
  };
  ls.check = [&](std::size_t i) -> VerifyOutcome {
    const Transfer& t = plan[i];
    if (w) return peer_.verify(st_of(i), t.offset, t.length, key_of(i), cands, size);
    VerifyOutcome v;
    v.mismatch = pattern_verify(base + t.offset, t.offset, t.length, key_of(i));
    if (!v.mismatch) return guards.check(i);
    v.ok = false;
    v.explanation =
        explain_mismatch(base + t.offset, t.offset, t.length, *v.mismatch, key_of(i), cands, size);
    return v;
  };
  ls.progress = [&](std::size_t v) { pr.update(p.upto[v]); };
  return run_pipeline(qp_, ls);
}

void Engine::fail_mismatch(SizeResult& r, OpCode op, const LoopFailure& f, const Transfer& t) {
  const bool w = op == OpCode::Write;
  const std::uint64_t mis = cfg_.offset % kPageSize;
  const Mismatch& mm = *f.check.mismatch;
  MismatchReport m{mm.region_offset, (mis + mm.region_offset) / kPageSize,   mm.expected,        mm.actual,
                   mm.bad_bytes,     w ? Direction::Write : Direction::Read, f.check.explanation};
  r.mismatch = m;
  DiagInput in = ctx_ ? ctx_() : DiagInput{};
  in.stage = Stage::Verify;
  in.mismatch_text = std::string(w ? "RDMA WRITE of region [" : "RDMA READ into region [") +
                     std::to_string(t.offset) + ", +" + std::to_string(t.length) +
                     (w ? ") arrived wrong" : ") left wrong data") + ": first bad byte at region offset " +
                     std::to_string(m.offset) + " (page " + std::to_string(m.page) + "), " +
                     std::to_string(m.bad_bytes) + " bad bytes; " + m.explanation;
  fail(r, in);
}

namespace {
// A loop's figures added to its direction's and the size's.
void add_figures(SizeResult& r, LoopStats& st, const LoopResult& lr, const std::vector<std::uint64_t>& upto) {
  st.bytes += lr.bytes;
  st.seconds += lr.wire_seconds;
  st.wall_seconds += lr.wall_seconds;
  st.iterations += lr.wrs;
  st.transfers += lr.verified;
  st.peak_Bps = std::max(st.peak_Bps, lr.peak_Bps);
  r.transfers += lr.verified;
  r.verified_bytes += upto[lr.verified];
}
}  // namespace

bool Engine::exercise(SizeResult& r, unsigned char* base, const SplitLayout& layout,
                      const std::vector<std::unique_ptr<MemoryRegion>>& mrs, const unsigned char* lo,
                      const unsigned char* hi) {
  if (!lo || lo > base) lo = base;
  if (!hi || hi < base + r.size) hi = base + r.size;
  const Region region{base,
                      layout,
                      mrs,
                      r.size,
                      static_cast<std::uint64_t>(base - lo),
                      static_cast<std::uint64_t>(hi - base)};
  r.passes = cfg_.passes;
  // Staging: `slots` slots of `slot` bytes; transfer i uses slot i % slots.
  const std::uint64_t slot = std::min(staging_slot_bytes(cfg_), peer_.staging_size());
  const Slots slots{slot, static_cast<unsigned>(std::max<std::uint64_t>(1, peer_.staging_size() / slot))};
  const unsigned depth = std::max(1u, std::min(cfg_.tx_depth, qp_.max_send_wr()));
  std::vector<KeyCandidate> seen;
  const auto t_first = std::chrono::steady_clock::now();
  auto more = [&](unsigned pass) {
    if (pass < cfg_.passes) return true;
    if (cfg_.min_transfers && std::min(r.write.transfers, r.read.transfers) < cfg_.min_transfers) return true;
    return cfg_.duration > 0 && since(t_first) < cfg_.duration;
  };
  for (unsigned pass = 0; more(pass); ++pass) {
    const PassPlan p = pass_plan(r.size, slot, pass);
    for (OpCode op : {OpCode::Write, OpCode::Read}) {
      const bool w = op == OpCode::Write;
      const std::uint64_t key = pattern_key(cfg_.seed, pass, w ? Phase::Write : Phase::Read);
      LoopResult lr = run_loop(op, pass, key, p, slots, depth, region, seen);
      add_figures(r, w ? r.write : r.read, lr, p.upto);
      if (lr.ok()) {
        seen.push_back({key, "pass " + std::to_string(pass + 1) + (w ? " write" : " read")});
        continue;
      }
      const Transfer& t = p.plan[std::min(lr.failure.transfer, p.plan.size() - 1)];
      if (lr.failure.kind != LoopFailure::Kind::Check || !lr.failure.check.mismatch)
        fail_loop(r, op, lr.failure, t);
      else fail_mismatch(r, op, lr.failure, t);
      return false;
    }
  }
  r.passes = static_cast<unsigned>(seen.size() / 2);
  r.result = SizeOutcome::Pass;
  return true;
}

}  // namespace rxv
