// `rxe-verify run`'s option checks (app/run_options.hpp).
#include "app/run_options.hpp"

#include "app/common.hpp"
#include "oob_transport.hpp"
#include "plan.hpp"
#include "progress.hpp"
#include "size.hpp"

namespace rxv {

RunOptions validate_run_options(const RunCommandConfig& o, HostEnv& host) {
  RunOptions r;
  std::vector<std::uint64_t>& sizes = r.sizes;
  RunConfig& cfg = r.cfg;
  for (const auto& s : o.sizes) {
    auto l = parse_size_list(s);
    if (!l.ok()) size_usage("--size", l.error);
    for (auto v : l.values) {
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
    usage("--busy-poll and --no-spin: pick one (spin only, or sleep at once; neither: spin "
          "briefly, then sleep)");
  r.wait.mode = o.busy_poll ? WaitMode::BusyPoll : o.no_spin ? WaitMode::Event : WaitMode::Adaptive;
  r.wait.spin = o.spin;
  if (o.iters == 0 || o.iters < -1 || o.iters > (1ll << 40)) usage("--iters: must be at least 1 transfer");
  if (o.iters > 0) cfg.min_transfers = static_cast<std::uint64_t>(o.iters);
  if (!(o.duration >= 0 && o.duration <= 7 * 86400.0)) usage("--duration: must be 0 to 604800 seconds");
  cfg.duration = o.duration;
  if (o.timeout < 0) usage("--timeout: must not be negative");
  cfg.two_host = !o.connect.empty();
  cfg.progress = !o.no_progress && !o.json && stderr_is_tty();
  for (auto s : sizes)
    check_ram(host, "--size", s, s + cfg.offset + staging_bytes_for(cfg), o.force);
  if (cfg.two_host) {
    std::string e;
    if (!parse_host_port(o.connect, r.peer_host, r.port, e) || !check_peer_host(r.peer_host, e))
      usage("--connect: " + e);
  }
  return r;
}

}  // namespace rxv
