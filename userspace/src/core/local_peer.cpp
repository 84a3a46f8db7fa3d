#include "core/local_peer.hpp"

#include <cerrno>
#include <string>

namespace rxv {

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
std::uint64_t LocalPeer::staging_addr() const { return reinterpret_cast<std::uint64_t>(buf_.data()); }
std::uint32_t LocalPeer::staging_rkey() const { return mr_ ? mr_->rkey() : 0; }
Result<void> LocalPeer::fill(std::uint64_t st_off, std::uint64_t region_off, std::uint64_t len,
                             std::uint64_t key) {
  if (st_off + len > buf_.size()) return Error("staging range out of bounds");
  pattern_fill(buf_.data() + st_off, region_off, len, key);
  return {};
}
VerifyOutcome LocalPeer::verify(std::uint64_t st_off, std::uint64_t region_off, std::uint64_t len,
                                std::uint64_t key, const std::vector<KeyCandidate>& candidates,
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
    if (explained_ < kMaxExplained) {
      ++explained_;
      v.explanation =
          explain_mismatch(buf_.data() + st_off, region_off, len, *v.mismatch, key, candidates, region_size);
    } else {
      v.explanation =
          "not explained (this peer explained its first " + std::to_string(kMaxExplained) + " mismatches)";
    }
  }
  return v;
}

}  // namespace rxv
