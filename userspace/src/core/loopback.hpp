// The loopback set-up of run and churn: two QPs of one device connected to each other
// and the registered staging buffer of the local peer.
#pragma once
#include <cstdint>
#include <memory>

#include "base/result.hpp"
#include "core/diagnosis.hpp"
#include "core/local_peer.hpp"
#include "sys/verbs.hpp"

namespace rxv {

// Two QPs of one device connected to each other (loopback; also the rebuild after a
// failed size), or the verbs error.
struct QpPair {
  std::unique_ptr<QueuePair> qa, qb;
};
Result<QpPair> connect_qp_pair(Device& dev, const QpParams& p);
// A QP that could not be created or connected (e: the verbs error, its errno in e.err):
// exit 3, the cause from errno_cause(SetupCall::QueuePair, e.err).
Error qp_failure(const Error& e);

struct Loopback {
  std::unique_ptr<QueuePair> qa, qb;
  std::unique_ptr<LocalPeer> peer;
};
// The QP pair and the staging buffer; a QP that cannot be set up is exit 3, a staging
// buffer that does not register a memlock problem (3) or a failure (1).
Result<Loopback> setup_loopback(Device& dev, const QpParams& p, std::uint64_t staging,
                                const DiagContext& dctx);

}  // namespace rxv
