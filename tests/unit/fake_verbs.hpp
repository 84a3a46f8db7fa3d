// In-process fake of the verbs interface: RDMA WRITE/READ are memcpy between the local
// scatter list and the remote address (valid in loopback, where both are in this
// process). Strict like rxe: every SGE must lie inside a live MR of its lkey (else the
// WR completes with IBV_WC_LOC_PROT_ERR), the remote range inside a live MR of its rkey
// (else IBV_WC_REM_ACCESS_ERR), at most max_sge SGEs (else the post fails, EINVAL) and
// at most max_msg_sz bytes (else IBV_WC_LOC_LEN_ERR). MRs of every fake device are in
// one process-wide table, so a client's rkey check finds the server's staging MR in a
// two-host test. Failures are injected through FakeControl, data faults through
// FakeControl::fault.
#pragma once
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "sys/verbs.hpp"

namespace rxv::testing {

// ibv_wc_status values the fake completes with (enum ibv_wc_status).
inline constexpr int kWcLocLenErr = 1, kWcLocProtErr = 4, kWcRemAccessErr = 10, kWcRetryExcErr = 12;

// What goes wrong with one executed work request (FakeControl::fault). `amount` is the
// fault's size in bytes (0 = the default noted).
enum class FaultKind {
  None,
  Drop,       // never executes, never completes (lost: the engine's deadline must notice)
  Truncate,   // only the first `amount` bytes (default half) arrive; completes successfully
  Shift,      // the payload lands `amount` bytes (default 8) late in its destination, its tail cut
  Duplicate,  // the previous WR of the same opcode is delivered again into this one's destination
  Corrupt,    // byte `amount` of the payload arrives with bits flipped
  NoData,     // completes successfully, nothing written
  Overrun,    // delivered, then `amount` bytes (default 16) after the destination's end changed
  Delay,      // executes and completes `amount` ms (default 1000) late, data intact
  Reorder,    // its data lands `amount` ms (default 200) after later WRs executed and
              // completed: a later completion (which on RC implies this one) comes first
  PortDown,   // the port goes down (FakeDevice::port() says so from now) and the WR fails
              // with IBV_WC_RETRY_EXC_ERR, as rxe's does when its netdev goes down
};
struct Fault {
  FaultKind kind = FaultKind::None;
  std::uint64_t amount = 0;
};

// Every MR of every fake device: what the strict checks look keys up in.
class FakeMrTable {
 public:
  struct Rec {
    const void* dev = nullptr;
    std::uint64_t addr = 0, len = 0;
    std::uint32_t lkey = 0, rkey = 0;
    bool live = false;
  };
  static FakeMrTable& get() {
    static FakeMrTable t;
    return t;
  }
  // A new MR; returns its index (lkey/rkey in rec are assigned here, unique per process).
  std::size_t add(const void* dev, std::uint64_t addr, std::uint64_t len, std::uint32_t lkey) {
    std::lock_guard<std::mutex> l(m_);
    Rec r{dev, addr, len, lkey, 0x40000000u + next_++, true};
    recs_.push_back(r);
    return recs_.size() - 1;
  }
  std::uint32_t rkey(std::size_t i) {
    std::lock_guard<std::mutex> l(m_);
    return recs_[i].rkey;
  }
  void remove(std::size_t i) {
    std::lock_guard<std::mutex> l(m_);
    recs_[i].live = false;
  }
  // True when [addr, addr+len) is inside a live MR of device `dev` with this lkey
  // (dev == nullptr: a live MR of any device with this rkey).
  bool covers(const void* dev, std::uint32_t key, std::uint64_t addr, std::uint64_t len) {
    std::lock_guard<std::mutex> l(m_);
    for (const auto& r : recs_) {
      if (!r.live || (dev ? r.lkey != key || r.dev != dev : r.rkey != key)) continue;
      if (addr >= r.addr && len <= r.len && addr - r.addr <= r.len - len) return true;
    }
    return false;
  }

 private:
  std::mutex m_;
  std::vector<Rec> recs_;
  std::uint32_t next_ = 1;
};

struct FakeControl {
  std::function<int(std::size_t len)> reg_errno;  // non-zero => reg_mr fails
  int fail_op_at = -1;                            // index of the work request that fails (in execution order)
  int fail_status = 12;                           // IBV_WC_RETRY_EXC_ERR
  bool fail_timeout = false;                      // that WR and everything after it never completes
  int corrupt_op_at = -1;                         // flip a byte in the destination of that op
  std::uint64_t corrupt_at = 0;                   // byte index inside the op's payload
  int short_op_at = -1;                           // copy only half of that op
  // Asked for every work request about to execute (op: its index in execution order):
  // the data fault to inject, if any (FaultKind).
  std::function<Fault(const WorkRequest&, int op)> fault;
  unsigned faults = 0;     // faults injected
  unsigned prot_errs = 0;  // completions with a key/bounds error (LOC_PROT, REM_ACCESS, LOC_LEN)
  int max_sge = 32;
  std::uint64_t max_mr_size = ~0ull;  // the device cap (rxe: no limit)
  int ops = 0;
  int regs = 0;
  std::size_t max_sges_seen = 0;
  bool port_active = true;
  // non-empty: Provider::open, Device::create_qp or QueuePair::connect fails with it (exit 3)
  std::string open_error, create_qp_error, connect_error;
  // non-zero: ibv_open_device, ibv_alloc_pd or ibv_create_qp fails with this errno, its
  // Error worded as sys/verbs_ibv.cpp words it and carrying the errno (Error::err)
  int open_errno = 0, alloc_pd_errno = 0, create_qp_errno = 0;
  // Completion behaviour and what the engine did.
  unsigned complete_per_poll = 0;        // WRs executed per poll() call, 0 = all queued
  bool reverse_batches = false;          // return each poll's completions newest first
  std::chrono::milliseconds latency{0};  // a WR executes no sooner than this after its post
  unsigned rd_atomic = 16;               // negotiated max_rd_atomic
  WaitPolicy created_wait;               // the QpParams::wait of the last QP created
  unsigned created_depth = 0, max_in_flight = 0, max_reads_in_flight = 0, max_batch = 0;
  unsigned posted = 0, signaled = 0, polls = 0, drains = 0, flushed = 0, overcommits = 0;
};

class FakeMr final : public MemoryRegion {
 public:
  FakeMr(const void* dev, void* addr, std::size_t len, std::uint32_t k)
      : k_(k), idx_(FakeMrTable::get().add(dev, reinterpret_cast<std::uint64_t>(addr), len, k)) {}
  ~FakeMr() override { FakeMrTable::get().remove(idx_); }
  FakeMr(const FakeMr&) = delete;
  FakeMr& operator=(const FakeMr&) = delete;
  std::uint32_t lkey() const override { return k_; }
  std::uint32_t rkey() const override { return FakeMrTable::get().rkey(idx_); }

 private:
  std::uint32_t k_;
  std::size_t idx_;
};

// Posted WRs wait in a queue and are executed (memcpy) when poll() runs, up to
// complete_per_poll of them per call; completions of signalled (or failed) WRs are
// returned, reversed within a batch when reverse_batches is set. The send queue is
// max_send_wr deep and a slot frees only when a later signalled completion was reaped
// (as on hardware): a post beyond that fails, which catches an engine that
// over-commits the queue or forgets to signal.
class FakeQp final : public QueuePair {
 public:
  FakeQp(FakeControl& c, unsigned depth, const void* dev) : c_(c), depth_(depth), dev_(dev) {}
  QpAddr local_addr() const override { return QpAddr{7, 1, {}}; }
  Result<void> connect(const QpAddr&) override {
    if (!c_.connect_error.empty()) return Error(c_.connect_error, "", kExitNotReady);
    return {};
  }
  Result<void> post(const WorkRequest& w) override {
    if (broken_) return Error("broken");
    if (w.sges.size() > static_cast<std::size_t>(std::max(1, c_.max_sge)))
      return Error("ibv_post_send: Invalid argument (" + std::to_string(w.sges.size()) + " SGEs, max_sge " +
                   std::to_string(c_.max_sge) + ")");
    if (queue_.size() + unreaped_ >= depth_) {
      ++c_.overcommits;
      broken_ = true;
      return Error("ibv_post_send: Cannot allocate memory (send queue full)");
    }
    c_.max_sges_seen = std::max(c_.max_sges_seen, w.sges.size());
    if (w.op == OpCode::Read) {
      ++reads_out_;
      c_.max_reads_in_flight = std::max(c_.max_reads_in_flight, reads_out_);
    }
    queue_.push_back(w);
    queued_at_.push_back(std::chrono::steady_clock::now());
    c_.max_in_flight = std::max<unsigned>(c_.max_in_flight, static_cast<unsigned>(queue_.size()));
    if (w.signaled) ++c_.signaled;
    ++c_.posted;
    return {};
  }
  int poll(std::vector<Completion>& out, int max, std::chrono::milliseconds) override {
    ++c_.polls;
    std::vector<Completion> batch;
    unsigned budget = c_.complete_per_poll ? c_.complete_per_poll : ~0u;
    while (!deferred_.empty() && std::chrono::steady_clock::now() >= deferred_.front().second) {
      const WorkRequest w = deferred_.front().first;  // Reorder: its data lands now
      deferred_.erase(deferred_.begin());
      if (check_access(w) == 0) execute(w, -1, Fault{});
      if (w.signaled) batch.push_back({w.wr_id, 0, ""});
    }
    while (!queue_.empty() && budget > 0 && static_cast<int>(batch.size()) < max) {
      if (held_) break;  // timed out: nothing completes any more
      const auto now = std::chrono::steady_clock::now();
      if (now - queued_at_.front() < c_.latency || now < delayed_until_) break;  // still on the wire
      WorkRequest w = queue_.front();
      int idx = c_.ops;
      Fault f = c_.fault ? c_.fault(w, idx) : Fault{};
      if (f.kind == FaultKind::Delay) {
        ++c_.faults;
        delayed_until_ = now + std::chrono::milliseconds(f.amount ? f.amount : 1000);
        break;
      }
      if (f.kind == FaultKind::Reorder) {
        ++c_.faults;
        deferred_.push_back({w, now + std::chrono::milliseconds(f.amount ? f.amount : 200)});
        queue_.erase(queue_.begin());
        queued_at_.erase(queued_at_.begin());
        ++c_.ops;
        if (w.op == OpCode::Read) --reads_out_;
        continue;
      }
      if ((idx == c_.fail_op_at && c_.fail_timeout) || f.kind == FaultKind::Drop) {
        if (f.kind == FaultKind::Drop) ++c_.faults;
        held_ = true;
        break;
      }
      queue_.erase(queue_.begin());
      queued_at_.erase(queued_at_.begin());
      ++c_.ops;
      --budget;
      if (w.op == OpCode::Read) --reads_out_;
      if (f.kind == FaultKind::PortDown) {
        ++c_.faults;
        c_.port_active = false;
        broken_ = true;
        batch.push_back({w.wr_id, kWcRetryExcErr, "transport retry counter exceeded"});
        unreaped_ = 0;
        break;
      }
      if (idx == c_.fail_op_at) {
        broken_ = true;
        batch.push_back({w.wr_id, c_.fail_status, "transport retry counter exceeded"});
        unreaped_ = 0;
        break;
      }
      if (int st = check_access(w); st != 0) {
        ++c_.prot_errs;
        broken_ = true;
        batch.push_back({w.wr_id, st,
                         st == kWcRemAccessErr ? "remote access error"
                         : st == kWcLocLenErr  ? "local length error"
                                               : "local protection error"});
        unreaped_ = 0;
        break;
      }
      execute(w, idx, f);
      if (w.signaled) {
        batch.push_back({w.wr_id, 0, ""});
        unreaped_ = 0;
      } else {
        ++unreaped_;
      }
    }
    if (c_.reverse_batches) std::reverse(batch.begin(), batch.end());
    c_.max_batch = std::max<unsigned>(c_.max_batch, static_cast<unsigned>(batch.size()));
    for (auto& b : batch) out.push_back(b);
    return static_cast<int>(batch.size());
  }
  void drain() override {
    broken_ = true;
    ++c_.drains;
    c_.flushed += static_cast<unsigned>(queue_.size());
    queue_.clear();
    queued_at_.clear();
    deferred_.clear();
    unreaped_ = 0;
  }
  unsigned max_send_wr() const override { return depth_; }
  unsigned max_rd_atomic() const override { return c_.rd_atomic; }
  bool broken() const override { return broken_; }

 private:
  // 0, or the status rxe completes the WR with: each SGE inside a live MR of its lkey on
  // this device, the remote range inside a live MR of its rkey, at most max_msg_sz bytes.
  int check_access(const WorkRequest& w) const {
    auto& t = FakeMrTable::get();
    std::uint64_t total = 0;
    for (const auto& s : w.sges) {
      if (!t.covers(dev_, s.lkey, s.addr, s.length)) return kWcLocProtErr;
      total += s.length;
    }
    if (total > 0x80000000ull) return kWcLocLenErr;
    if (!t.covers(nullptr, w.rkey, w.raddr, total)) return kWcRemAccessErr;
    return 0;
  }
  // The WR's destination (dst) or source (!dst) as pieces of memory, in payload order.
  using Piece = std::pair<unsigned char*, std::uint64_t>;
  static std::vector<Piece> pieces(const WorkRequest& w, std::uint64_t total, bool dst) {
    if ((w.op == OpCode::Write) == dst) return {{reinterpret_cast<unsigned char*>(w.raddr), total}};
    std::vector<Piece> v;
    for (const auto& s : w.sges) v.emplace_back(reinterpret_cast<unsigned char*>(s.addr), s.length);
    return v;
  }
  // Copy n bytes from `src` (pieces, from byte `from`) to `dst` (pieces, from byte `to`).
  static void copy(const std::vector<Piece>& src, std::uint64_t from, const std::vector<Piece>& dst,
                   std::uint64_t to, std::uint64_t n) {
    std::size_t si = 0, di = 0;
    auto seek = [](const std::vector<Piece>& v, std::size_t& i, std::uint64_t& off) {
      while (i < v.size() && off >= v[i].second) off -= v[i++].second;
    };
    seek(src, si, from);
    seek(dst, di, to);
    while (n > 0 && si < src.size() && di < dst.size()) {
      std::uint64_t k = std::min({n, src[si].second - from, dst[di].second - to});
      std::memmove(dst[di].first + to, src[si].first + from, k);
      n -= k;
      from += k;
      to += k;
      seek(src, si, from);
      seek(dst, di, to);
    }
  }
  void execute(const WorkRequest& w, int idx, const Fault& f) {
    std::uint64_t total = 0;
    for (const auto& s : w.sges) total += s.length;
    if (f.kind != FaultKind::None) ++c_.faults;
    const auto src = pieces(w, total, false), dst = pieces(w, total, true);
    auto& prev = prev_payload_[w.op == OpCode::Write];
    switch (f.kind) {
      case FaultKind::NoData:
        break;
      case FaultKind::Truncate:
        copy(src, 0, dst, 0, std::min(total, f.amount ? f.amount : total / 2));
        break;
      case FaultKind::Shift: {
        const std::uint64_t k = std::min<std::uint64_t>(total, f.amount ? f.amount : 8);
        copy(src, 0, dst, k, total - k);
        break;
      }
      case FaultKind::Duplicate:
        copy({{prev.data(), prev.size()}}, 0, dst, 0, std::min<std::uint64_t>(total, prev.size()));
        break;
      default:
        copy(src, 0, dst, 0, idx == c_.short_op_at ? total / 2 : total);
    }
    if (c_.fault) {  // the payload as sent now, for a later Duplicate
      prev.resize(total);
      copy(src, 0, {{prev.data(), total}}, 0, total);
    }
    if (f.kind == FaultKind::Corrupt && total) copy_flip(dst, std::min(f.amount, total - 1));
    if (f.kind == FaultKind::Overrun) {
      // Past the end of the destination: the remote range (WRITE) or the last SGE (READ).
      const Piece& last = dst.back();
      for (std::uint64_t i = 0; i < (f.amount ? f.amount : 16); ++i) last.first[last.second + i] ^= 0x5a;
    }
    if (idx == c_.corrupt_op_at && c_.corrupt_at < total) copy_flip(dst, c_.corrupt_at);
  }
  static void copy_flip(const std::vector<Piece>& dst, std::uint64_t i) {
    for (const auto& p : dst) {
      if (i < p.second) {
        p.first[i] ^= 0x5a;
        return;
      }
      i -= p.second;
    }
  }

  FakeControl& c_;
  unsigned depth_;
  const void* dev_;                             // the device whose MRs the lkeys must name
  std::vector<unsigned char> prev_payload_[2];  // [is write]: the last WR's payload
  std::vector<WorkRequest> queue_;
  std::vector<std::chrono::steady_clock::time_point> queued_at_;  // queue_'s post times
  std::chrono::steady_clock::time_point delayed_until_{};         // Delay: nothing executes before
  std::vector<std::pair<WorkRequest, std::chrono::steady_clock::time_point>> deferred_;  // Reorder
  unsigned unreaped_ = 0;  // executed unsignalled WRs still holding send queue slots
  unsigned reads_out_ = 0;
  bool held_ = false;
  bool broken_ = false;
};

class FakeDevice final : public Device {
 public:
  explicit FakeDevice(FakeControl& c) : c_(c) {}
  std::string name() const override { return "rxe0"; }
  PortInfo port() override {
    PortInfo p;
    p.active = c_.port_active;
    p.state = c_.port_active ? 4 : 1;
    p.max_msg_sz = 0x80000000u;
    p.state_str = c_.port_active ? "PORT_ACTIVE" : "PORT_DOWN";
    return p;
  }
  DeviceCaps caps() override {
    DeviceCaps d;
    d.max_sge = c_.max_sge;
    d.max_mr_size = c_.max_mr_size;
    return d;
  }
  RegResult reg_mr(void* addr, std::size_t len) override {
    RegResult r;
    ++c_.regs;
    if (c_.reg_errno) {
      if (int e = c_.reg_errno(len)) {
        r.err = e;
        return r;
      }
    }
    r.mr = std::make_unique<FakeMr>(this, addr, len, static_cast<std::uint32_t>(c_.regs));
    return r;
  }
  Result<std::unique_ptr<QueuePair>> create_qp(const QpParams& p) override {
    if (!c_.create_qp_error.empty()) return Error(c_.create_qp_error, "", kExitNotReady);
    if (int e = c_.create_qp_errno)
      return Error(std::string("ibv_create_qp: ") + std::strerror(e), "", kExitNotReady, "unknown", e);
    c_.created_depth = p.tx_depth;
    c_.created_wait = p.wait;
    return std::unique_ptr<QueuePair>(std::make_unique<FakeQp>(c_, p.tx_depth, this));
  }

 private:
  FakeControl& c_;
};

class FakeProvider final : public Provider {
 public:
  explicit FakeProvider(FakeControl& c) : c_(c) {}
  std::vector<std::string> list_devices() override { return {"rxe0"}; }
  Result<std::unique_ptr<Device>> open(const std::string& name) override {
    if (!c_.open_error.empty()) return Error(c_.open_error, "", kExitNotReady);
    if (int e = c_.open_errno)
      return Error("cannot open " + name + ": " + std::strerror(e), "", kExitNotReady, "unknown", e);
    if (int e = c_.alloc_pd_errno)
      return Error("ibv_alloc_pd on " + name + ": " + std::strerror(e), "", kExitNotReady, "unknown", e);
    return std::unique_ptr<Device>(std::make_unique<FakeDevice>(c_));
  }

 private:
  FakeControl& c_;
};

}  // namespace rxv::testing
