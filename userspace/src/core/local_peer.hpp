// LocalPeer: a Peer whose staging buffer is in this process, registered on the device.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/mapped_buffer.hpp"
#include "core/peer.hpp"
#include "sys/verbs.hpp"

namespace rxv {

// Staging buffer in this process (loopback, and the server side of a two-host run).
class LocalPeer final : public Peer {
 public:
  // A run stops at its first mismatch; a peer explains this many and answers the rest
  // without the search (on `serve` a client could otherwise ask for one search after
  // another: explain_mismatch costs up to ~10 ms).
  static constexpr unsigned kMaxExplained = 8;
  // What arm_guards() writes around a WRITE's destination.
  static constexpr unsigned char kGuardByte = 0xA5;
  // Registers `size` bytes on dev; check ok()/error().
  LocalPeer(Device& dev, std::uint64_t size);
  bool ok() const { return mr_ != nullptr; }
  int reg_errno() const { return err_; }
  std::uint64_t staging_addr() const override;
  std::uint32_t staging_rkey() const override;
  std::uint64_t staging_size() const override { return buf_.size(); }
  Result<void> fill(std::uint64_t st_off, std::uint64_t region_off, std::uint64_t len,
                    std::uint64_t key) override;
  void arm_guards(std::uint64_t st_off, std::uint64_t len) override;
  // The server's arming (`serve`, op "arm"): the whole staging buffer set to guard bytes,
  // and from now on each verified range set back to them after its check, so a WRITE
  // into a reused slot lands among guards too. A fill (READ loop) ends it until the next.
  void arm_all();
  // The data check, then (once arm_guards was used) the guards around the range.
  VerifyOutcome verify(std::uint64_t st_off, std::uint64_t region_off, std::uint64_t len, std::uint64_t key,
                       const std::vector<KeyCandidate>& candidates, std::uint64_t region_size) override;

 private:
  MappedBuffer buf_;
  std::unique_ptr<MemoryRegion> mr_;
  int err_ = 0;
  unsigned explained_ = 0;
  bool guarded_ = false;
  bool rearm_ = false;  // arm_all: verify sets its range back to guard bytes
};

}  // namespace rxv
