// In-process fake of the verbs interface: RDMA WRITE/READ are memcpy between the local
// scatter list and the remote address (valid in loopback, where both are in this
// process). Failures are injected through FakeControl.
#pragma once
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>

#include "verbs.hpp"

namespace rxv::testing {

struct FakeControl {
  std::function<int(std::size_t len)> reg_errno;  // non-zero => reg_mr fails
  int fail_op_at = -1;     // index of the execute() call that fails
  int fail_status = 12;    // IBV_WC_RETRY_EXC_ERR
  bool fail_timeout = false;
  int corrupt_op_at = -1;  // flip a byte in the destination of that op
  std::uint64_t corrupt_at = 0;  // byte index inside the op's payload
  int short_op_at = -1;    // copy only half of that op
  int max_sge = 32;
  int ops = 0;
  int regs = 0;
  std::size_t max_sges_seen = 0;
  bool port_active = true;
};

class FakeMr final : public MemoryRegion {
 public:
  explicit FakeMr(std::uint32_t k) : k_(k) {}
  std::uint32_t lkey() const override { return k_; }
  std::uint32_t rkey() const override { return k_ + 1000; }

 private:
  std::uint32_t k_;
};

class FakeQp final : public QueuePair {
 public:
  explicit FakeQp(FakeControl& c) : c_(c) {}
  QpAddr local_addr() const override { return QpAddr{7, 1, {}}; }
  std::string connect(const QpAddr&) override { return ""; }
  OpResult execute(OpCode op, const std::vector<Sge>& sges, std::uint64_t raddr, std::uint32_t,
                   std::chrono::milliseconds) override {
    OpResult r;
    int idx = c_.ops++;
    c_.max_sges_seen = std::max(c_.max_sges_seen, sges.size());
    if (broken_) {
      r.status_str = "broken";
      return r;
    }
    if (idx == c_.fail_op_at) {
      broken_ = true;
      if (c_.fail_timeout) {
        r.timed_out = true;
        r.status_str = "no completion";
      } else {
        r.wc_status = c_.fail_status;
        r.status_str = "transport retry counter exceeded";
      }
      return r;
    }
    std::uint64_t total = 0;
    for (const auto& s : sges) total += s.length;
    std::uint64_t limit = idx == c_.short_op_at ? total / 2 : total;
    auto* remote = reinterpret_cast<unsigned char*>(raddr);
    std::uint64_t pos = 0;
    for (const auto& s : sges) {
      auto* local = reinterpret_cast<unsigned char*>(s.addr);
      std::uint64_t n = std::min<std::uint64_t>(s.length, limit > pos ? limit - pos : 0);
      if (op == OpCode::Write) std::memcpy(remote + pos, local, n);
      else std::memcpy(local, remote + pos, n);
      pos += s.length;
    }
    if (idx == c_.corrupt_op_at) {
      // Corrupt the destination byte.
      if (op == OpCode::Write) {
        remote[c_.corrupt_at] ^= 0x5a;
      } else {
        std::uint64_t p = 0;
        for (const auto& s : sges) {
          if (c_.corrupt_at < p + s.length) {
            reinterpret_cast<unsigned char*>(s.addr)[c_.corrupt_at - p] ^= 0x5a;
            break;
          }
          p += s.length;
        }
      }
    }
    r.ok = true;
    return r;
  }
  bool broken() const override { return broken_; }

 private:
  FakeControl& c_;
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
  std::unique_ptr<QueuePair> create_qp(const QpParams&, std::string&) override {
    return std::make_unique<FakeQp>(c_);
  }

 private:
  FakeControl& c_;
};

class FakeProvider final : public Provider {
 public:
  explicit FakeProvider(FakeControl& c) : c_(c) {}
  std::vector<std::string> list_devices() override { return {"rxe0"}; }
  std::unique_ptr<Device> open(const std::string&, std::string&) override {
    return std::make_unique<FakeDevice>(c_);
  }

 private:
  FakeControl& c_;
};

}  // namespace rxv::testing
