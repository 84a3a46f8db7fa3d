// `rxe-verify run`'s option checks (app/run_options.hpp).
#include "app/run_options.hpp"

#include <algorithm>
#include <charconv>

#include "app/common.hpp"
#include "app/options.hpp"
#include "app/preflight.hpp"
#include "base/size.hpp"
#include "core/plan.hpp"
#include "core/progress.hpp"
#include "sys/oob_transport.hpp"

namespace rxv {

Result<std::chrono::microseconds> parse_spin_us(const std::string& text) {
  const std::string max = std::to_string(kMaxSpin.count());
  // digits only: a sign, a unit or a space is not a number of microseconds
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    return usage_error("'" + text +
                       "' is not a number of microseconds; use a whole number of microseconds from 0 to " +
                       max + " (e.g. --spin 200)");
  std::uint64_t us = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), us);
  // out of range for 64 bits is beyond the longest spin too
  if (ec != std::errc{} || end != text.data() + text.size() ||
      us > static_cast<std::uint64_t>(kMaxSpin.count()))
    return usage_error(text + " us is beyond the longest spin, " + max + " us (1 s); use at most --spin " +
                       max + ", or --busy-poll to spin without a bound");
  return std::chrono::microseconds(static_cast<std::chrono::microseconds::rep>(us));
}

RunOptions validate_run_options(const RunCommandConfig& o, HostEnv& host) {
  RunOptions r;
  std::vector<std::uint64_t>& sizes = r.sizes;
  RunConfig& cfg = r.cfg;
  for (const auto& s : o.sizes) {
    auto l = parse_size_list(s);
    if (!l) size_usage("--size", l.error().summary);
    for (auto v : *l) {
      if (v == 0) usage("--size: size must be greater than 0");
      sizes.push_back(v);
    }
  }
  if (sizes.empty()) sizes.push_back(1ull << 30);
  check_gid_option(o.gid_given, o.gid_index);
  cfg.offset = need_offset(o.offset);
  if (o.mode == "sampled") cfg.mode = Mode::Sampled;
  else if (o.mode == "full") cfg.mode = Mode::Full;
  else usage("--mode: '" + o.mode + "' is not a mode; use sampled or full");
  cfg.msg_size = need_size("--msg-size", o.msg_size, false);
  if (cfg.msg_size > kMaxMsgSize)
    usage("--msg-size: " + format_size(cfg.msg_size) + " exceeds the 2 GiB rxe max_msg_sz; use at most 2G");
  if (o.split == 0) usage("--split: must be at least 1");
  cfg.passes = o.passes ? o.passes : (cfg.mode == Mode::Full ? 1 : 2);
  cfg.seed = seed_or_random(o.seed);
  cfg.split = o.split;
  cfg.op_timeout = o.timeout;
  if (o.tx_depth < 1 || o.tx_depth > 8192) usage("--tx-depth: must be 1 to 8192 work requests");
  cfg.tx_depth = o.tx_depth;
  if (o.busy_poll && o.no_spin)
    usage(
        "--busy-poll and --no-spin: pick one (spin only, or sleep at once; neither: spin "
        "briefly, then sleep)");
  const bool spin_given = o.spin_option.has_value();
  if (spin_given && o.busy_poll)
    usage(
        "--spin and --busy-poll: pick one (--busy-poll spins without a bound; --spin USEC "
        "spins that long, then sleeps)");
  if (spin_given && o.no_spin)
    usage("--spin and --no-spin: pick one (--no-spin sleeps at once, as --spin 0 does)");
  r.wait.mode = o.busy_poll ? WaitMode::BusyPoll : o.no_spin ? WaitMode::Event : WaitMode::Adaptive;
  r.wait.spin = o.spin;
  if (spin_given) {
    auto spin = parse_spin_us(*o.spin_option);
    if (!spin) usage("--spin: " + spin.error().summary);
    r.wait.spin = *spin;
  }
  if (o.iters == 0 || o.iters < -1 || o.iters > (1ll << 40)) usage("--iters: must be at least 1 transfer");
  if (o.iters > 0) cfg.min_transfers = static_cast<std::uint64_t>(o.iters);
  if (!(o.duration >= 0 && o.duration <= 7 * 86400.0)) usage("--duration: must be 0 to 604800 seconds");
  cfg.duration = o.duration;
  if (o.timeout < 0) usage("--timeout: must not be negative");
  cfg.two_host = !o.connect.empty();
  cfg.progress = !o.no_progress && !o.json && stderr_is_tty();
  // the region's mapping (a page before it, guard bytes after it), the staging buffer
  for (auto s : sizes)
    check_ram(host, "--size", s,
              checked_total("--size", s, {cfg.offset, staging_bytes_for(cfg), kPageSize + kGuardBytes}),
              o.force);
  if (cfg.two_host) {
    auto hp = parse_host_port(o.connect);
    if (!hp) usage("--connect: " + hp.error().summary);
    if (auto named = check_peer_host(hp->host); !named) usage("--connect: " + named.error().summary);
    r.peer_host = hp->host;
    r.port = hp->port;
  }
  return r;
}

}  // namespace rxv
