#include "core/loopback.hpp"

#include "base/cause.hpp"
#include "base/size.hpp"
#include "core/diagnosis.hpp"

namespace rxv {

Error qp_failure(const Error& e) {
  return Error(e.summary, e.remedy, kExitNotReady, errno_cause(SetupCall::QueuePair, e.err), e.err);
}

Result<QpPair> connect_qp_pair(Device& dev, const QpParams& p) {
  QpPair pair;
  for (auto* q : {&pair.qa, &pair.qb}) {
    auto created = dev.create_qp(p);
    if (!created) return std::move(created).error();
    *q = std::move(*created);
  }
  if (auto e = pair.qa->connect(pair.qb->local_addr()); !e) return std::move(e).error();
  if (auto e = pair.qb->connect(pair.qa->local_addr()); !e) return std::move(e).error();
  return pair;
}

Result<Loopback> setup_loopback(Device& dev, const QpParams& p, std::uint64_t staging,
                                const DiagContext& dctx) {
  auto pair = connect_qp_pair(dev, p);
  if (!pair) return qp_failure(pair.error());
  Loopback lb;
  lb.qa = std::move(pair->qa);
  lb.qb = std::move(pair->qb);
  lb.peer = std::make_unique<LocalPeer>(dev, staging);
  if (lb.peer->ok()) return lb;
  DiagInput in = dctx();
  in.stage = Stage::Register;
  in.err = lb.peer->reg_errno();
  in.size = staging;
  auto d = diagnose(in);
  return Error("cannot register the " + format_size(staging) + " staging buffer: " + d.summary, d.remedy,
               d.cause == cause::kMemlock ? kExitNotReady : kExitFail, d.cause);
}

}  // namespace rxv
