// What a command checks about the host's memory before it pins anything: the request
// against MemTotal and MemAvailable, and RLIMIT_MEMLOCK against what the run pins.
#pragma once
#include <cstdint>
#include <string>

#include <initializer_list>
#include "base/result.hpp"

#include "sys/host_env.hpp"

namespace rxv {

// Beyond MemTotal: usage error (2); beyond MemAvailable: not ready (3). Both unless force.
void check_ram(HostEnv& host, const std::string& what, std::uint64_t requested, std::uint64_t bytes,
               bool force);
std::uint64_t mem_total(HostEnv& host);
// `requested` plus `more` (offset, staging buffer, guard room), or a usage error (exit 2)
// naming `what` when the sum does not fit 64 bits (it would wrap to a small number).
std::uint64_t checked_total(const std::string& what, std::uint64_t requested,
                            std::initializer_list<std::uint64_t> more);

// What a run pins at once (bytes): the largest region over `split` MRs at `offset` and
// its staging buffer (at least 2 MiB, as doctor counts). memlock_preflight: a
// memlock error (exit 3) naming the current limit, that need (`what` says what it
// is) and the remedies, when RLIMIT_MEMLOCK is below it without CAP_IPC_LOCK.
std::uint64_t run_pinned_bytes(std::uint64_t offset, std::uint64_t largest, unsigned split,
                               std::uint64_t staging);
// The region part of run_pinned_bytes alone (a two-host client pins no staging buffer).
std::uint64_t region_pinned_bytes(std::uint64_t offset, std::uint64_t largest, unsigned split);
Result<void> memlock_preflight(HostEnv& host, std::uint64_t need, const std::string& what);

}  // namespace rxv
