// Narrow verbs interface. The engine talks only to these abstract classes so unit tests
// can substitute fakes that inject failures (reg_mr ENOMEM, IBV_WC_RETRY_EXC_ERR,
// timeouts, corrupted or short transfers). The libibverbs implementation is in
// sys/verbs_ibv.cpp; every verbs object there is owned by RAII wrappers. A call that can fail
// returns a Result (base/result.hpp) whose error is the one-line reason.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "sys/completion_wait.hpp"

namespace rxv {

struct PortInfo {
  bool active = false;
  int state = 0;       // enum ibv_port_state
  int active_mtu = 3;  // enum ibv_mtu (3 = 1024)
  std::uint32_t max_msg_sz = 0;
  std::string state_str;
};

struct DeviceCaps {
  std::uint64_t max_mr_size = 0;
  int max_sge = 1;
  int max_qp_rd_atom = 1;
};

struct QpAddr {
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;
  std::array<std::uint8_t, 16> gid{};
};

struct Sge {
  std::uint64_t addr = 0;
  std::uint32_t length = 0;
  std::uint32_t lkey = 0;
};

enum class OpCode { Write, Read };

// One RDMA WRITE/READ work request. The engine numbers them 1, 2, 3, ... (wr_id) per
// queue pair; unsignalled requests complete silently (a later signalled completion
// implies them, RC send queues complete in order) unless they fail.
struct WorkRequest {
  std::uint64_t wr_id = 0;
  OpCode op = OpCode::Write;
  std::vector<Sge> sges;
  std::uint64_t raddr = 0;
  std::uint32_t rkey = 0;
  bool signaled = true;
};

struct Completion {
  std::uint64_t wr_id = 0;
  int status = 0;          // enum ibv_wc_status, 0 = success
  std::string status_str;  // ibv_wc_status_str()
};

class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  virtual std::uint32_t lkey() const = 0;
  virtual std::uint32_t rkey() const = 0;
};

struct RegResult {
  std::unique_ptr<MemoryRegion> mr;
  int err = 0;  // errno when mr == nullptr
};

struct QpParams {
  int gid_index = 0;
  int timeout = 19;         // 4.096 us * 2^19 ~ 2.1 s per try
  int retry_cnt = 7;        // 8 tries ~ 17 s before IBV_WC_RETRY_EXC_ERR
  unsigned tx_depth = 128;  // max_send_wr (and the CQ is sized for it)
  // How poll() waits once the CQ is empty (completion_wait.hpp): spin for a bounded
  // time, then sleep on the completion channel (default); spin only; or sleep at once.
  WaitPolicy wait;
};

class QueuePair {
 public:
  virtual ~QueuePair() = default;
  virtual QpAddr local_addr() const = 0;
  // INIT -> RTR -> RTS towards `remote`; an error names the transition that failed.
  virtual Result<void> connect(const QpAddr& remote) = 0;
  // Post one work request; on an error the QP is broken().
  virtual Result<void> post(const WorkRequest& wr) = 0;
  // Append up to `max` completions to `out`, waiting at most `wait` for the first one
  // (0 = do not wait). Returns how many were appended, -1 when polling failed. A failed
  // completion breaks the QP (broken() == true).
  virtual int poll(std::vector<Completion>& out, int max, std::chrono::milliseconds wait) = 0;
  // Move the QP to the error state and collect the flushed completions of everything
  // still in flight (bounded wait), so the buffers can be released. broken() afterwards.
  virtual void drain() = 0;
  // Send queue depth the QP was created with, and the RDMA READs the connected QP may
  // have in flight (negotiated max_rd_atomic).
  virtual unsigned max_send_wr() const = 0;
  virtual unsigned max_rd_atomic() const = 0;
  virtual bool broken() const = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  virtual PortInfo port() = 0;
  virtual DeviceCaps caps() = 0;
  virtual RegResult reg_mr(void* addr, std::size_t len) = 0;
  // An RC QP with its own CQ and completion channel, or the verbs call that failed (exit 3).
  virtual Result<std::unique_ptr<QueuePair>> create_qp(const QpParams& p) = 0;
};

class Provider {
 public:
  virtual ~Provider() = default;
  virtual std::vector<std::string> list_devices() = 0;
  // The device opened with a protection domain, or why not (exit 3): libibverbs has no
  // device list, no device of that name, or it would not open.
  virtual Result<std::unique_ptr<Device>> open(const std::string& name) = 0;
};

std::unique_ptr<Provider> make_ibv_provider();

}  // namespace rxv
