// `rxe-verify run`'s option checks in one place: validate_run_options() checks every
// option of RunCommandConfig and turns them into what the run uses, before anything is
// opened or pinned. run_command calls it once, first.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "app/app.hpp"
#include "core/run_config.hpp"
#include "sys/oob_transport.hpp"

namespace rxv {

struct RunOptions {
  std::vector<std::uint64_t> sizes;   // --size, in order (default: 1 GiB)
  RunConfig cfg;                      // everything else the engine reads
  std::string peer_host;              // --connect's host (two-host runs), else ""
  std::uint16_t port = kDefaultPort;  // --connect's port
  WaitPolicy wait;                    // --busy-poll, --no-spin, or adaptive (default; --spin)
};

// --spin's value: a whole number of microseconds, 0 to kMaxSpin (digits only: no sign,
// unit or spaces). A usage error's summary is the rest of the line after "--spin: ".
Result<std::chrono::microseconds> parse_spin_us(const std::string& text);

// A bad option value throws UsageError; a size beyond this host's memory throws
// UsageError (beyond MemTotal) or NotReadyError (beyond MemAvailable) unless --force.
// The checks run in the order of the messages a user may meet first: sizes, gid index,
// offset, mode, msg-size, split, tx-depth, waiting mode, iters, duration, timeout, memory, connect.
RunOptions validate_run_options(const RunCommandConfig& o, HostEnv& host);

}  // namespace rxv
