// libibverbs implementation of verbs.hpp.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "sys/verbs.hpp"

namespace rxv {
namespace {

template <auto Fn>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    if (p) Fn(p);
  }
};
using ContextPtr = std::unique_ptr<ibv_context, Deleter<ibv_close_device>>;
using PdPtr = std::unique_ptr<ibv_pd, Deleter<ibv_dealloc_pd>>;
using CqPtr = std::unique_ptr<ibv_cq, Deleter<ibv_destroy_cq>>;
using ChannelPtr = std::unique_ptr<ibv_comp_channel, Deleter<ibv_destroy_comp_channel>>;
using QpPtr = std::unique_ptr<ibv_qp, Deleter<ibv_destroy_qp>>;
using MrPtr = std::unique_ptr<ibv_mr, Deleter<ibv_dereg_mr>>;

struct DeviceListDeleter {
  void operator()(ibv_device** l) const {
    if (l) ibv_free_device_list(l);
  }
};
using DeviceListPtr = std::unique_ptr<ibv_device*, DeviceListDeleter>;

class IbvMr final : public MemoryRegion {
 public:
  explicit IbvMr(MrPtr mr) : mr_(std::move(mr)) {}
  std::uint32_t lkey() const override { return mr_->lkey; }
  std::uint32_t rkey() const override { return mr_->rkey; }

 private:
  MrPtr mr_;
};

class IbvDevice;

class IbvQp final : public QueuePair {
 public:
  // The QP, its CQ and completion channel, or the verbs call that failed.
  static Result<std::unique_ptr<QueuePair>> create(ibv_context* ctx, ibv_pd* pd, const QpParams& p,
                                                   const PortInfo& port, const DeviceCaps& caps) {
    std::unique_ptr<IbvQp> q(new IbvQp(ctx, p, port, caps));
    if (auto made = q->init(pd); !made) return std::move(made).error();
    return std::unique_ptr<QueuePair>(std::move(q));
  }
  ~IbvQp() override {
    // Destroy QP before CQ before channel (member order does it in reverse; be explicit).
    qp_.reset();
    cq_.reset();
    channel_.reset();
  }
  QpAddr local_addr() const override {
    QpAddr a;
    a.qpn = qp_->qp_num;
    a.psn = psn_;
    a.gid = gid_;
    return a;
  }

  Result<void> connect(const QpAddr& r) override {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (int e = ibv_modify_qp(qp_.get(), &a,
                              IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      return Error(std::string("ibv_modify_qp(INIT): ") + std::strerror(e), "", kExitNotReady, "unknown", e);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(port_.active_mtu);
    a.dest_qp_num = r.qpn;
    a.rq_psn = r.psn;
    a.max_dest_rd_atomic = static_cast<std::uint8_t>(std::clamp(caps_.max_qp_rd_atom, 1, 16));
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, r.gid.data(), 16);
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(params_.gid_index);
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    if (int e = ibv_modify_qp(qp_.get(), &a,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      return Error(std::string("ibv_modify_qp(RTR): ") + std::strerror(e), "", kExitNotReady, "unknown", e);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = static_cast<std::uint8_t>(params_.timeout);
    a.retry_cnt = static_cast<std::uint8_t>(params_.retry_cnt);
    a.rnr_retry = 7;
    a.sq_psn = psn_;
    rd_atomic_ = static_cast<unsigned>(std::clamp(caps_.max_qp_rd_atom, 1, 16));
    a.max_rd_atomic = static_cast<std::uint8_t>(rd_atomic_);
    if (int e = ibv_modify_qp(qp_.get(), &a,
                              IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
      return Error(std::string("ibv_modify_qp(RTS): ") + std::strerror(e), "", kExitNotReady, "unknown", e);
    return {};
  }

  Result<void> post(const WorkRequest& w) override {
    if (broken_) return Error("queue pair is in error state after an earlier failure");
    std::vector<ibv_sge> sl(w.sges.size());
    for (std::size_t i = 0; i < w.sges.size(); ++i) {
      sl[i].addr = w.sges[i].addr;
      sl[i].length = w.sges[i].length;
      sl[i].lkey = w.sges[i].lkey;
    }
    ibv_send_wr wr{};
    wr.wr_id = w.wr_id;
    wr.sg_list = sl.data();
    wr.num_sge = static_cast<int>(sl.size());
    wr.opcode = w.op == OpCode::Write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
    wr.send_flags = w.signaled ? IBV_SEND_SIGNALED : 0;
    wr.wr.rdma.remote_addr = w.raddr;
    wr.wr.rdma.rkey = w.rkey;
    ibv_send_wr* bad = nullptr;
    if (int e = ibv_post_send(qp_.get(), &wr, &bad)) {
      broken_ = true;
      return Error(std::string("ibv_post_send: ") + std::strerror(e), "", kExitFail, "unknown", e);
    }
    return {};
  }

  int poll(std::vector<Completion>& out, int max, std::chrono::milliseconds wait) override {
    auto reap = [&] {
      std::array<ibv_wc, 32> wcs{};
      int n = ibv_poll_cq(cq_.get(), std::clamp(max, 1, 32), wcs.data());
      for (int i = 0; i < n; ++i) {
        const ibv_wc& wc = wcs[static_cast<std::size_t>(i)];
        Completion c{wc.wr_id, wc.status, ""};
        if (c.status != IBV_WC_SUCCESS) {
          c.status_str = ibv_wc_status_str(wc.status);
          broken_ = true;
        }
        out.push_back(std::move(c));
      }
      return n;
    };
    int n = waiter_.wait(reap, std::chrono::steady_clock::now() + wait);
    if (n < 0) broken_ = true;
    return n;
  }

  void drain() override {
    // Flush the QP so every outstanding WR completes before its buffers go away.
    broken_ = true;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ibv_modify_qp(qp_.get(), &a, IBV_QP_STATE);
    auto drain_end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    auto quiet_since = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() < drain_end) {
      std::array<ibv_wc, 32> wcs{};
      int n = ibv_poll_cq(cq_.get(), 32, wcs.data());
      if (n < 0) break;
      auto now = std::chrono::steady_clock::now();
      if (n > 0) quiet_since = now;
      else if (now - quiet_since > std::chrono::milliseconds(200)) break;
      else ::poll(nullptr, 0, 5);
    }
  }

  unsigned max_send_wr() const override { return send_wr_; }
  unsigned max_rd_atomic() const override { return rd_atomic_; }

  bool broken() const override { return broken_; }

 private:
  IbvQp(ibv_context* ctx, QpParams p, PortInfo port, const DeviceCaps& caps)
      : ctx_(ctx), params_(p), port_(std::move(port)), caps_(caps), waiter_(params_.wait, waiter_hooks()) {}
  // The completion channel, the CQ, the QP and its GID; a failure names the verbs call.
  Result<void> init(ibv_pd* pd) {
    auto failed = [](const std::string& call) {
      const int e = errno;
      return Error(call + ": " + std::strerror(e), "", kExitNotReady, "unknown", e);
    };
    channel_.reset(ibv_create_comp_channel(ctx_));
    if (!channel_) return failed("ibv_create_comp_channel");
    int fl = fcntl(channel_->fd, F_GETFL);
    fcntl(channel_->fd, F_SETFL, fl | O_NONBLOCK);
    send_wr_ = std::clamp(params_.tx_depth, 1u, 8192u);
    cq_.reset(ibv_create_cq(ctx_, static_cast<int>(send_wr_ + 16), nullptr, channel_.get(), 0));
    if (!cq_) return failed("ibv_create_cq");
    ibv_qp_init_attr ia{};
    ia.send_cq = cq_.get();
    ia.recv_cq = cq_.get();
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = send_wr_;
    ia.cap.max_recv_wr = 1;
    ia.cap.max_send_sge = static_cast<std::uint32_t>(std::clamp(caps_.max_sge, 1, 32));
    ia.cap.max_recv_sge = 1;
    qp_.reset(ibv_create_qp(pd, &ia));
    if (!qp_) return failed("ibv_create_qp");
    std::random_device rd;
    psn_ = rd() & 0xffffff;
    ibv_gid gid{};
    if (ibv_query_gid(ctx_, 1, params_.gid_index, &gid))
      return failed("ibv_query_gid(index " + std::to_string(params_.gid_index) + ")");
    std::memcpy(gid_.data(), gid.raw, 16);
    return {};
  }

  // The completion waiter's system side: arm the CQ, sleep on its channel.
  CompletionWaiter::Hooks waiter_hooks() {
    CompletionWaiter::Hooks h;
    h.arm = [this] { return ibv_req_notify_cq(cq_.get(), 0) == 0; };
    h.sleep = [this](std::chrono::milliseconds max) {
      pollfd pfd{channel_->fd, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(max.count())) <= 0) return false;
      ibv_cq* ev_cq = nullptr;
      void* ev_ctx = nullptr;
      if (ibv_get_cq_event(channel_.get(), &ev_cq, &ev_ctx) != 0) return false;
      ibv_ack_cq_events(ev_cq, 1);
      return true;
    };
    return h;
  }

  ibv_context* ctx_;
  QpParams params_;
  PortInfo port_;
  DeviceCaps caps_;
  CompletionWaiter waiter_;
  ChannelPtr channel_;
  CqPtr cq_;
  QpPtr qp_;
  std::uint32_t psn_ = 0;
  std::array<std::uint8_t, 16> gid_{};
  bool broken_ = false;
  unsigned send_wr_ = 128;
  unsigned rd_atomic_ = 1;
};

class IbvDevice final : public Device {
 public:
  IbvDevice(std::string name, ContextPtr ctx, PdPtr pd)
      : name_(std::move(name)), ctx_(std::move(ctx)), pd_(std::move(pd)) {}
  ~IbvDevice() override {
    pd_.reset();
    ctx_.reset();
  }
  std::string name() const override { return name_; }
  PortInfo port() override {
    PortInfo p;
    ibv_port_attr a{};
    if (ibv_query_port(ctx_.get(), 1, &a)) {
      p.state_str = "query failed";
      return p;
    }
    p.state = a.state;
    p.active = a.state == IBV_PORT_ACTIVE;
    p.active_mtu = a.active_mtu;
    p.max_msg_sz = a.max_msg_sz;
    p.state_str = ibv_port_state_str(a.state);
    return p;
  }
  DeviceCaps caps() override {
    DeviceCaps c;
    ibv_device_attr a{};
    if (ibv_query_device(ctx_.get(), &a) == 0) {
      c.max_mr_size = a.max_mr_size;
      c.max_sge = a.max_sge;
      c.max_qp_rd_atom = std::min(a.max_qp_rd_atom, a.max_qp_init_rd_atom);
    }
    return c;
  }
  RegResult reg_mr(void* addr, std::size_t len) override {
    RegResult r;
    errno = 0;
    MrPtr mr(ibv_reg_mr(pd_.get(), addr, len,
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ));
    if (!mr) {
      r.err = errno ? errno : ENOMEM;
      return r;
    }
    r.mr = std::make_unique<IbvMr>(std::move(mr));
    return r;
  }
  Result<std::unique_ptr<QueuePair>> create_qp(const QpParams& p) override {
    return IbvQp::create(ctx_.get(), pd_.get(), p, port(), caps());
  }

 private:
  std::string name_;
  ContextPtr ctx_;
  PdPtr pd_;
};

class IbvProvider final : public Provider {
 public:
  std::vector<std::string> list_devices() override {
    std::vector<std::string> out;
    int n = 0;
    DeviceListPtr l(ibv_get_device_list(&n));
    if (!l) return out;
    for (int i = 0; i < n; ++i) out.emplace_back(ibv_get_device_name(l.get()[i]));
    return out;
  }
  Result<std::unique_ptr<Device>> open(const std::string& name) override {
    // the errno travels in the Error: the cause is decided from it (open_failure)
    auto failed = [](const std::string& what, int e) {
      return Error(what + (e ? std::string(": ") + std::strerror(e) : std::string()), "", kExitNotReady,
                   "unknown", e);
    };
    int n = 0;
    DeviceListPtr l(ibv_get_device_list(&n));
    if (!l) return failed("ibv_get_device_list", errno);
    for (int i = 0; i < n; ++i) {
      if (name != ibv_get_device_name(l.get()[i])) continue;
      ContextPtr ctx(ibv_open_device(l.get()[i]));
      if (!ctx) return failed("cannot open " + name, errno);
      PdPtr pd(ibv_alloc_pd(ctx.get()));
      if (!pd) return failed("ibv_alloc_pd on " + name, errno);
      return std::unique_ptr<Device>(std::make_unique<IbvDevice>(name, std::move(ctx), std::move(pd)));
    }
    return Error("no RDMA device named '" + name + "'", "", kExitNotReady, "unknown", ENODEV);
  }
};

}  // namespace

std::unique_ptr<Provider> make_ibv_provider() { return std::make_unique<IbvProvider>(); }

}  // namespace rxv
