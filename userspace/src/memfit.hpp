// Does a region fit in this host's memory? Checked before anything is allocated or pinned
// (run, probe, churn), unless --force. Pure over the parsed /proc/meminfo.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "procfs.hpp"

namespace rxv {

struct MemFit {
  int code = 0;       // 0 fits (or forced / unknown), 2 beyond MemTotal, 3 beyond MemAvailable
  std::string error;  // one line naming the figures and --force
};

// what: the option ("--size"); requested: the size as asked; bytes: everything that will be
// pinned for it (region + offset + staging).
MemFit check_memory_fit(const std::string& what, std::uint64_t requested, std::uint64_t bytes,
                        const std::optional<MemInfo>& mi, bool force);

}  // namespace rxv
