// Peer: the side that owns the staging buffer a run's transfers go to and come from,
// fills it with the pattern and verifies it (LocalPeer in this process, core/local_peer.hpp;
// RemotePeer over the out-of-band connection, core/oob.hpp).
#pragma once
#include <cstdint>
#include <vector>

#include "base/result.hpp"
#include "core/pattern.hpp"
#include "core/pipeline.hpp"

namespace rxv {

class Peer {
 public:
  virtual ~Peer() = default;
  virtual std::uint64_t staging_addr() const = 0;
  virtual std::uint32_t staging_rkey() const = 0;
  virtual std::uint64_t staging_size() const = 0;
  // Fill staging[st_off, +len) with the pattern of region bytes [region_off, +len); an
  // error is the peer's or the connection's.
  virtual Result<void> fill(std::uint64_t st_off, std::uint64_t region_off, std::uint64_t len,
                            std::uint64_t key) = 0;
  // Before a WRITE lands in staging[st_off, +len): set the guard bytes around it
  // (kGuardBytes each side) so verify() can tell an overrun. A peer that cannot does
  // nothing and its verify() checks no guards (RemotePeer: it would cost a round trip
  // per transfer).
  virtual void arm_guards(std::uint64_t st_off, std::uint64_t len) {
    (void)st_off;
    (void)len;
  }
  // Before a WRITE loop: have the peer set its whole staging buffer to guard bytes (and
  // each verified range back to them), so its verify() checks every WRITE's guards
  // without a message per transfer (RemotePeer: one round trip a loop). Default: nothing.
  virtual Result<void> arm_staging() { return {}; }
  // True once the peer can no longer be trusted to answer in step (a call failed): the
  // run skips the sizes left.
  virtual bool broken() const { return false; }
  virtual VerifyOutcome verify(std::uint64_t st_off, std::uint64_t region_off, std::uint64_t len,
                               std::uint64_t key, const std::vector<KeyCandidate>& candidates,
                               std::uint64_t region_size) = 0;
};

}  // namespace rxv
