#include "app/preflight.hpp"

#include <algorithm>

#include "app/options.hpp"
#include "base/cause.hpp"
#include "base/size.hpp"
#include "core/diagnosis.hpp"
#include "core/plan.hpp"
#include "sys/memfit.hpp"
#include "sys/procfs.hpp"

namespace rxv {

std::uint64_t mem_total(HostEnv& host) {
  auto mi = parse_meminfo(host.read("/proc/meminfo").value_or(""));
  return mi ? mi->total : 0;
}

void check_ram(HostEnv& host, const std::string& what, std::uint64_t requested, std::uint64_t bytes,
               bool force) {
  auto fits =
      check_memory_fit(what, requested, bytes, parse_meminfo(host.read("/proc/meminfo").value_or("")), force);
  if (fits) return;
  throw_if_usage(fits.error());
  throw NotReadyError(fits.error().summary);
}

std::uint64_t checked_total(const std::string& what, std::uint64_t requested,
                            std::initializer_list<std::uint64_t> more) {
  std::uint64_t total = requested;
  for (std::uint64_t m : more)
    if (__builtin_add_overflow(total, m, &total))
      usage(what + ": " + format_size(requested) +
            " with the offset, the staging buffer and the guard bytes does not fit 64 bits; give a smaller "
            "size");
  return total;
}

std::uint64_t region_pinned_bytes(std::uint64_t offset, std::uint64_t largest, unsigned split) {
  // the largest region (each of its --split MRs may start mid-page: one more page each)
  return (span_pages(offset, largest) + (split > 1 ? split - 1 : 0)) * kPageSize;
}

std::uint64_t run_pinned_bytes(std::uint64_t offset, std::uint64_t largest, unsigned split,
                               std::uint64_t staging) {
  // plus the staging buffer, counted as at least the 2 MiB doctor allows
  return region_pinned_bytes(offset, largest, split) +
         std::max<std::uint64_t>(2ull << 20, span_pages(0, staging) * kPageSize);
}

Result<void> memlock_preflight(HostEnv& host, std::uint64_t need, const std::string& what) {
  HostSnapshot h = snapshot(host);
  if (memlock_allows(h.limits, h.cap_eff, need)) return {};
  auto ml = parse_memlock(h.limits);
  const std::string now = ml ? std::to_string(ml->soft / 1024) + " KiB" : std::string("?");
  return Error("RLIMIT_MEMLOCK is " + now + ", below the " + std::to_string((need + 1023) / 1024) +
                   " KiB this run pins (" + what + ") and the process lacks CAP_IPC_LOCK",
               memlock_remedy(need), kExitNotReady, cause::kMemlock);
}

}  // namespace rxv
