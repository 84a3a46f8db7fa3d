#include "engine.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "progress.hpp"
#include "size.hpp"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace rxv {

MappedBuffer::MappedBuffer(std::size_t len) : len_(len) {
  if (len == 0) return;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    err_ = errno;
    len_ = 0;
    return;
  }
  p_ = p;
}
MappedBuffer::~MappedBuffer() {
  if (p_) munmap(p_, len_);
}
MappedBuffer::MappedBuffer(MappedBuffer&& o) noexcept : p_(o.p_), len_(o.len_), err_(o.err_) {
  o.p_ = nullptr;
  o.len_ = 0;
}
MappedBuffer& MappedBuffer::operator=(MappedBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) munmap(p_, len_);
    p_ = o.p_;
    len_ = o.len_;
    err_ = o.err_;
    o.p_ = nullptr;
    o.len_ = 0;
  }
  return *this;
}
void MappedBuffer::populate() {
  if (!p_) return;
  if (madvise(p_, len_, MADV_POPULATE_WRITE) == 0) return;
  auto* c = static_cast<volatile unsigned char*>(p_);
  for (std::size_t i = 0; i < len_; i += 4096) c[i] = 0;
}

LocalPeer::LocalPeer(Device& dev, std::uint64_t size) : buf_(size) {
  if (!buf_) {
    err_ = buf_.error() ? buf_.error() : ENOMEM;
    return;
  }
  buf_.populate();
  auto r = dev.reg_mr(buf_.data(), buf_.size());
  mr_ = std::move(r.mr);
  err_ = r.err;
}
std::uint64_t LocalPeer::staging_addr() const {
  return reinterpret_cast<std::uint64_t>(buf_.data());
}
std::uint32_t LocalPeer::staging_rkey() const { return mr_ ? mr_->rkey() : 0; }
std::string LocalPeer::fill(std::uint64_t st_off, std::uint64_t region_off, std::uint64_t len,
                            std::uint64_t key) {
  if (st_off + len > buf_.size()) return "staging range out of bounds";
  pattern_fill(buf_.data() + st_off, region_off, len, key);
  return "";
}
VerifyOutcome LocalPeer::verify(std::uint64_t st_off, std::uint64_t region_off,
                                std::uint64_t len, std::uint64_t key,
                                const std::vector<KeyCandidate>& candidates,
                                std::uint64_t region_size) {
  VerifyOutcome v;
  if (st_off + len > buf_.size()) {
    v.ok = false;
    v.error = "staging range out of bounds";
    return v;
  }
  v.mismatch = pattern_verify(buf_.data() + st_off, region_off, len, key);
  if (v.mismatch) {
    v.ok = false;
    v.explanation = explain_mismatch(buf_.data() + st_off, region_off, len, *v.mismatch, key,
                                     candidates, region_size);
  }
  return v;
}

std::uint64_t staging_bytes_for(const RunConfig& c) {
  std::uint64_t chunk = std::min<std::uint64_t>(c.msg_size, kMaxMsgSize);
  if (c.mode == Mode::Full) return chunk;
  return std::min<std::uint64_t>(c.sample_max, kMaxMsgSize) + 64;
}

std::chrono::milliseconds op_deadline(const RunConfig& c, std::uint64_t len) {
  if (c.op_timeout > 0) return std::chrono::milliseconds(static_cast<long long>(c.op_timeout * 1000));
  double s = 30.0 + static_cast<double>(len) / (4.0 * 1024 * 1024);
  return std::chrono::milliseconds(static_cast<long long>(s * 1000));
}

Engine::Engine(Device& dev, QueuePair& qp, Peer& peer, RunConfig cfg, DiagContext ctx)
    : dev_(dev), qp_(qp), peer_(peer), cfg_(cfg), ctx_(std::move(ctx)) {
  max_sge_ = std::clamp(dev_.caps().max_sge, 1, 32);
}

void Engine::fail(SizeResult& r, DiagInput in) {
  r.result = SizeOutcome::Fail;
  r.diagnosis = diagnose(in);
}

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

bool Engine::transfer(OpCode op, const Transfer& t, std::uint64_t st_off, SizeResult& r,
                      unsigned char* base, const SplitLayout& layout,
                      const std::vector<std::unique_ptr<MemoryRegion>>& mrs, LoopStats& stats) {
  // Scatter/gather list over T[t.offset, +t.length), cut at MR boundaries; at most
  // max_sge entries per work request (more pieces => several WRs).
  std::vector<Sge> pieces;
  std::uint64_t o = t.offset, end = t.offset + t.length;
  while (o < end) {
    unsigned m = layout.mr_of(o);
    std::uint64_t stop = std::min(end, layout.starts[m + 1]);
    pieces.push_back({reinterpret_cast<std::uint64_t>(base + o),
                      static_cast<std::uint32_t>(stop - o), mrs[m]->lkey()});
    o = stop;
  }
  std::uint64_t remote = peer_.staging_addr() + st_off;
  for (std::size_t i = 0; i < pieces.size(); i += static_cast<std::size_t>(max_sge_)) {
    std::vector<Sge> batch(pieces.begin() + static_cast<long>(i),
                           pieces.begin() + static_cast<long>(std::min(pieces.size(),
                                                                       i + static_cast<std::size_t>(max_sge_))));
    std::uint64_t blen = 0;
    for (const auto& s : batch) blen += s.length;
    auto t0 = std::chrono::steady_clock::now();
    OpResult res = qp_.execute(op, batch, remote, peer_.staging_rkey(), op_deadline(cfg_, blen));
    stats.seconds += since(t0);
    if (!res.ok) {
      DiagInput in = ctx_ ? ctx_() : DiagInput{};
      in.stage = res.timed_out ? Stage::Timeout : Stage::Transfer;
      in.size = r.size;
      in.offset = r.offset;
      in.wc_status = res.wc_status;
      in.wc_status_str = res.status_str;
      in.two_host = cfg_.two_host;
      fail(r, in);
      r.diagnosis->summary = std::string(op == OpCode::Write ? "RDMA WRITE" : "RDMA READ") +
                             " of " + std::to_string(blen) + " bytes at region offset " +
                             std::to_string(t.offset) + ": " + r.diagnosis->summary;
      return false;
    }
    remote += blen;
    stats.bytes += blen;
  }
  ++r.transfers;
  return true;
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
      biggest = std::max(biggest, rxe_metadata(mis + layout.starts[i], layout.starts[i + 1] - layout.starts[i]).bytes);
    r.metadata_bytes = biggest;
    r.metadata_order = alloc_order(biggest);
  }

  // Allocate: the region starts `offset` bytes into the mapping.
  MappedBuffer buf(static_cast<std::size_t>(cfg_.offset + size));
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
  unsigned char* base = buf.data() + cfg_.offset;

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
  exercise(r, base, layout, mrs);
  return r;
}

bool Engine::exercise(SizeResult& r, unsigned char* base, const SplitLayout& layout,
                      const std::vector<std::unique_ptr<MemoryRegion>>& mrs) {
  const std::uint64_t size = r.size;
  const std::uint64_t mis = cfg_.offset % kPageSize;
  r.passes = cfg_.passes;
  std::vector<KeyCandidate> seen;
  for (unsigned pass = 0; pass < cfg_.passes; ++pass) {
    PlanParams pp;
    pp.size = size;
    pp.misalign = mis;
    pp.mode = cfg_.mode;
    pp.msg_size = std::min<std::uint64_t>(cfg_.msg_size, peer_.staging_size());
    pp.max_transfer = std::min<std::uint64_t>(cfg_.sample_max, peer_.staging_size() - std::min<std::uint64_t>(64, peer_.staging_size() / 2));
    pp.seed = cfg_.seed;
    pp.pass = pass;
    auto plan = make_plan(pp);
    std::uint64_t total = 0;
    for (const auto& t : plan) total += t.length;
    const std::uint64_t kw = pattern_key(cfg_.seed, pass, Phase::Write);
    const std::uint64_t kr = pattern_key(cfg_.seed, pass, Phase::Read);
    auto st_of = [&](const Transfer& t) {
      return cfg_.mode == Mode::Full ? std::uint64_t{0} : t.offset % 64;
    };
    // WRITE loop.
    {
      Progress pr(cfg_.progress,
                  "pass " + std::to_string(pass + 1) + " write " + format_size(size), total);
      std::uint64_t done = 0;
      for (const auto& t : plan) {
        pattern_fill(base + t.offset, t.offset, t.length, kw);
        std::uint64_t st = st_of(t);
        if (!transfer(OpCode::Write, t, st, r, base, layout, mrs, r.write)) return false;
        VerifyOutcome v = peer_.verify(st, t.offset, t.length, kw, seen, size);
        if (!v.error.empty()) {
          r.result = SizeOutcome::Fail;
          r.diagnosis = Diagnosis{cause::kNetwork, "peer verification failed: " + v.error,
                                  "check the out-of-band TCP connection to the peer"};
          return false;
        }
        if (v.mismatch) {
          MismatchReport m{v.mismatch->region_offset, (mis + v.mismatch->region_offset) / kPageSize,
                           v.mismatch->expected, v.mismatch->actual, v.mismatch->bad_bytes,
                           Direction::Write, v.explanation};
          r.mismatch = m;
          DiagInput in = ctx_ ? ctx_() : DiagInput{};
          in.stage = Stage::Verify;
          in.mismatch_text = "RDMA WRITE of region [" + std::to_string(t.offset) + ", +" +
                             std::to_string(t.length) + ") arrived wrong: first bad byte at region offset " +
                             std::to_string(m.offset) + " (page " + std::to_string(m.page) + "), " +
                             std::to_string(m.bad_bytes) + " bad bytes; " + m.explanation;
          fail(r, in);
          return false;
        }
        r.verified_bytes += t.length;
        done += t.length;
        pr.update(done);
      }
    }
    seen.push_back({kw, "pass " + std::to_string(pass + 1) + " write"});
    // READ loop.
    {
      Progress pr(cfg_.progress,
                  "pass " + std::to_string(pass + 1) + " read  " + format_size(size), total);
      std::uint64_t done = 0;
      for (const auto& t : plan) {
        std::uint64_t st = st_of(t);
        if (auto e = peer_.fill(st, t.offset, t.length, kr); !e.empty()) {
          r.result = SizeOutcome::Fail;
          r.diagnosis = Diagnosis{cause::kNetwork, "peer fill failed: " + e,
                                  "check the out-of-band TCP connection to the peer"};
          return false;
        }
        if (!transfer(OpCode::Read, t, st, r, base, layout, mrs, r.read)) return false;
        auto mm = pattern_verify(base + t.offset, t.offset, t.length, kr);
        if (mm) {
          std::string ex = explain_mismatch(base + t.offset, t.offset, t.length, *mm, kr, seen, size);
          MismatchReport m{mm->region_offset, (mis + mm->region_offset) / kPageSize, mm->expected,
                           mm->actual, mm->bad_bytes, Direction::Read, ex};
          r.mismatch = m;
          DiagInput in = ctx_ ? ctx_() : DiagInput{};
          in.stage = Stage::Verify;
          in.mismatch_text = "RDMA READ into region [" + std::to_string(t.offset) + ", +" +
                             std::to_string(t.length) + ") left wrong data: first bad byte at region offset " +
                             std::to_string(m.offset) + " (page " + std::to_string(m.page) + "), " +
                             std::to_string(m.bad_bytes) + " bad bytes; " + ex;
          fail(r, in);
          return false;
        }
        r.verified_bytes += t.length;
        done += t.length;
        pr.update(done);
      }
    }
    seen.push_back({kr, "pass " + std::to_string(pass + 1) + " read"});
  }
  r.result = SizeOutcome::Pass;
  return true;
}

}  // namespace rxv
