#include "core/local_peer.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/run_config.hpp"

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
  guarded_ = rearm_ = false;  // staging now holds READ sources, not guards
  pattern_fill(buf_.data() + st_off, region_off, len, key);
  return {};
}
void LocalPeer::arm_guards(std::uint64_t st, std::uint64_t len) {
  if (st > buf_.size() || len > buf_.size() - st) return;
  guarded_ = true;
  const std::uint64_t head = std::min(st, kGuardBytes), tail = std::min(buf_.size() - st - len, kGuardBytes);
  std::memset(buf_.data() + st - head, kGuardByte, head);
  std::memset(buf_.data() + st + len, kGuardByte, tail);
}

void LocalPeer::arm_all() {
  std::memset(buf_.data(), kGuardByte, buf_.size());
  guarded_ = rearm_ = true;
}

namespace {
// The guards of staging[st, +len) (armed by arm_guards) as a finding in region
// coordinates (the transfer is region [region_off, +len)), or ok.
VerifyOutcome check_guards(const unsigned char* staging, std::uint64_t staging_size, std::uint64_t st,
                           std::uint64_t region_off, std::uint64_t len) {
  VerifyOutcome v;
  const std::uint64_t head = std::min(st, kGuardBytes), tail = std::min(staging_size - st - len, kGuardBytes);
  Mismatch m;
  std::uint64_t before = 0, after = 0;
  auto note = [&](std::uint64_t region_pos, unsigned char actual) {
    if (m.bad_bytes++ == 0) {
      m.region_offset = region_pos;
      m.expected = LocalPeer::kGuardByte;
      m.actual = actual;
      m.first_bad_page = region_pos / 4096;
    }
    m.last_bad_offset = region_pos;
  };
  for (std::uint64_t k = 0; k < head; ++k)
    if (unsigned char a = staging[st - head + k]; a != LocalPeer::kGuardByte) {
      ++before;
      note(region_off >= head - k ? region_off - (head - k) : 0, a);
    }
  for (std::uint64_t k = 0; k < tail; ++k)
    if (unsigned char a = staging[st + len + k]; a != LocalPeer::kGuardByte) {
      ++after;
      note(region_off + len + k, a);
    }
  if (m.bad_bytes == 0) return v;
  v.ok = false;
  v.mismatch = m;
  v.explanation = guard_explanation(before, after, region_off, len);
  return v;
}
}  // namespace

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
  // after the check (whatever it found): the range back to guard bytes for the next WRITE
  // into this slot (arm_all)
  struct Rearm {
    LocalPeer* p;
    unsigned char* at;
    std::uint64_t n;
    ~Rearm() {
      if (p->rearm_) std::memset(at, kGuardByte, n);
    }
  } rearm{this, buf_.data() + st_off, len};
  if (v.mismatch) {
    v.ok = false;
    if (rearm_ && std::all_of(buf_.data() + st_off, buf_.data() + st_off + len,
                              [](unsigned char b) { return b == kGuardByte; })) {
      v.explanation =
          "no bytes arrived: the range holds the guard bytes (0xA5) it was armed with before the WRITE";
    } else if (explained_ < kMaxExplained) {
      ++explained_;
      v.explanation =
          explain_mismatch(buf_.data() + st_off, region_off, len, *v.mismatch, key, candidates, region_size);
    } else {
      v.explanation =
          "not explained (this peer explained its first " + std::to_string(kMaxExplained) + " mismatches)";
    }
    return v;
  }
  if (guarded_) return check_guards(buf_.data(), buf_.size(), st_off, region_off, len);
  return v;
}

}  // namespace rxv
