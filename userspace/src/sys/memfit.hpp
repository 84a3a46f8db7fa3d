// Does a region fit in this host's memory? Checked before anything is allocated or pinned
// (run, probe, churn), unless --force. Pure over the parsed /proc/meminfo.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "base/result.hpp"
#include "sys/procfs.hpp"

namespace rxv {

// what: the option ("--size"); requested: the size as asked; bytes: everything that will be
// pinned for it (region + offset + staging). It fits (or forced, or the memory is unknown),
// or an error of one line naming the figures and --force: beyond MemTotal a usage error
// (exit 2), beyond MemAvailable exit 3.
Result<void> check_memory_fit(const std::string& what, std::uint64_t requested, std::uint64_t bytes,
                              const std::optional<MemInfo>& mi, bool force);

}  // namespace rxv
