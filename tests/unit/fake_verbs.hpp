// In-process fake of the verbs interface: RDMA WRITE/READ are memcpy between the local
// scatter list and the remote address (valid in loopback, where both are in this
// process). Failures are injected through FakeControl.
#pragma once
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "sys/verbs.hpp"

namespace rxv::testing {

struct FakeControl {
  std::function<int(std::size_t len)> reg_errno;  // non-zero => reg_mr fails
  int fail_op_at = -1;                            // index of the work request that fails (in execution order)
  int fail_status = 12;                           // IBV_WC_RETRY_EXC_ERR
  bool fail_timeout = false;                      // that WR and everything after it never completes
  int corrupt_op_at = -1;                         // flip a byte in the destination of that op
  std::uint64_t corrupt_at = 0;                   // byte index inside the op's payload
  int short_op_at = -1;                           // copy only half of that op
  int max_sge = 32;
  int ops = 0;
  int regs = 0;
  std::size_t max_sges_seen = 0;
  bool port_active = true;
  // non-empty: Provider::open, Device::create_qp or QueuePair::connect fails with it (exit 3)
  std::string open_error, create_qp_error, connect_error;
  // Completion behaviour and what the engine did.
  unsigned complete_per_poll = 0;  // WRs executed per poll() call, 0 = all queued
  bool reverse_batches = false;    // return each poll's completions newest first
  unsigned rd_atomic = 16;         // negotiated max_rd_atomic
  WaitPolicy created_wait;         // the QpParams::wait of the last QP created
  unsigned created_depth = 0, max_in_flight = 0, max_reads_in_flight = 0, max_batch = 0;
  unsigned posted = 0, signaled = 0, polls = 0, drains = 0, flushed = 0, overcommits = 0;
};

class FakeMr final : public MemoryRegion {
 public:
  explicit FakeMr(std::uint32_t k) : k_(k) {}
  std::uint32_t lkey() const override { return k_; }
  std::uint32_t rkey() const override { return k_ + 1000; }

 private:
  std::uint32_t k_;
};

// Posted WRs wait in a queue and are executed (memcpy) when poll() runs, up to
// complete_per_poll of them per call; completions of signalled (or failed) WRs are
// returned, reversed within a batch when reverse_batches is set. The send queue is
// max_send_wr deep and a slot frees only when a later signalled completion was reaped
// (as on hardware): a post beyond that fails, which catches an engine that
// over-commits the queue or forgets to signal.
class FakeQp final : public QueuePair {
 public:
  FakeQp(FakeControl& c, unsigned depth) : c_(c), depth_(depth) {}
  QpAddr local_addr() const override { return QpAddr{7, 1, {}}; }
  Result<void> connect(const QpAddr&) override {
    if (!c_.connect_error.empty()) return Error(c_.connect_error, "", kExitNotReady);
    return {};
  }
  Result<void> post(const WorkRequest& w) override {
    if (broken_) return Error("broken");
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
    c_.max_in_flight = std::max<unsigned>(c_.max_in_flight, static_cast<unsigned>(queue_.size()));
    if (w.signaled) ++c_.signaled;
    ++c_.posted;
    return {};
  }
  int poll(std::vector<Completion>& out, int max, std::chrono::milliseconds) override {
    ++c_.polls;
    std::vector<Completion> batch;
    unsigned budget = c_.complete_per_poll ? c_.complete_per_poll : ~0u;
    while (!queue_.empty() && budget > 0 && static_cast<int>(batch.size()) < max) {
      if (held_) break;  // timed out: nothing completes any more
      WorkRequest w = queue_.front();
      int idx = c_.ops;
      if (idx == c_.fail_op_at && c_.fail_timeout) {
        held_ = true;
        break;
      }
      queue_.erase(queue_.begin());
      ++c_.ops;
      --budget;
      if (w.op == OpCode::Read) --reads_out_;
      if (idx == c_.fail_op_at) {
        broken_ = true;
        batch.push_back({w.wr_id, c_.fail_status, "transport retry counter exceeded"});
        unreaped_ = 0;
        break;
      }
      execute(w, idx);
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
    unreaped_ = 0;
  }
  unsigned max_send_wr() const override { return depth_; }
  unsigned max_rd_atomic() const override { return c_.rd_atomic; }
  bool broken() const override { return broken_; }

 private:
  void execute(const WorkRequest& w, int idx) {
    std::uint64_t total = 0;
    for (const auto& s : w.sges) total += s.length;
    std::uint64_t limit = idx == c_.short_op_at ? total / 2 : total;
    auto* remote = reinterpret_cast<unsigned char*>(w.raddr);
    std::uint64_t pos = 0;
    for (const auto& s : w.sges) {
      auto* local = reinterpret_cast<unsigned char*>(s.addr);
      std::uint64_t n = std::min<std::uint64_t>(s.length, limit > pos ? limit - pos : 0);
      if (w.op == OpCode::Write) std::memcpy(remote + pos, local, n);
      else std::memcpy(local, remote + pos, n);
      pos += s.length;
    }
    if (idx != c_.corrupt_op_at) return;
    if (w.op == OpCode::Write) {
      remote[c_.corrupt_at] ^= 0x5a;
      return;
    }
    std::uint64_t p = 0;
    for (const auto& s : w.sges) {
      if (c_.corrupt_at < p + s.length) {
        reinterpret_cast<unsigned char*>(s.addr)[c_.corrupt_at - p] ^= 0x5a;
        break;
      }
      p += s.length;
    }
  }

  FakeControl& c_;
  unsigned depth_;
  std::vector<WorkRequest> queue_;
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
    d.max_mr_size = ~0ull;
    return d;
  }
  RegResult reg_mr(void*, std::size_t len) override {
    RegResult r;
    ++c_.regs;
    if (c_.reg_errno) {
      if (int e = c_.reg_errno(len)) {
        r.err = e;
        return r;
      }
    }
    r.mr = std::make_unique<FakeMr>(static_cast<std::uint32_t>(c_.regs));
    return r;
  }
  Result<std::unique_ptr<QueuePair>> create_qp(const QpParams& p) override {
    if (!c_.create_qp_error.empty()) return Error(c_.create_qp_error, "", kExitNotReady);
    c_.created_depth = p.tx_depth;
    c_.created_wait = p.wait;
    return std::unique_ptr<QueuePair>(std::make_unique<FakeQp>(c_, p.tx_depth));
  }

 private:
  FakeControl& c_;
};

class FakeProvider final : public Provider {
 public:
  explicit FakeProvider(FakeControl& c) : c_(c) {}
  std::vector<std::string> list_devices() override { return {"rxe0"}; }
  Result<std::unique_ptr<Device>> open(const std::string&) override {
    if (!c_.open_error.empty()) return Error(c_.open_error, "", kExitNotReady);
    return std::unique_ptr<Device>(std::make_unique<FakeDevice>(c_));
  }

 private:
  FakeControl& c_;
};

}  // namespace rxv::testing
