#include "sys/memfit.hpp"

#include "base/size.hpp"

namespace rxv {

Result<void> check_memory_fit(const std::string& what, std::uint64_t requested, std::uint64_t bytes,
                              const std::optional<MemInfo>& mi, bool force) {
  if (force || !mi || mi->total == 0) return {};
  std::string what_s = what + " " + format_size(requested) +
                       (bytes != requested ? " (" + format_size(bytes) + " to pin)" : "");
  if (bytes > mi->total)
    return usage_error(what_s + " exceeds this host's memory: " + format_size(mi->total) +
                       " (MemTotal); use a smaller size, or --force to try anyway");
  if (bytes > mi->available)
    return Error(what_s + " exceeds the memory available now: " + format_size(mi->available) +
                     " (MemAvailable) of " + format_size(mi->total) +
                     "; free memory, use a smaller size, or --force to try anyway",
                 "", kExitNotReady);
  return {};
}

}  // namespace rxv
