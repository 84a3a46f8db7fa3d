// `rxe-verify probe`: find the largest MR that registers, by bisection between --min and
// --max within a time budget, and show the rxe metadata (pages x 16 B, its order) on
// either side of the boundary.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "app/common.hpp"
#include "engine.hpp"
#include "plan.hpp"
#include "procfs.hpp"
#include "size.hpp"

namespace rxv {
using nlohmann::json;

Outcome probe_command(const ProbeCommandConfig& o, Provider& prov, HostEnv& host) {
  std::uint64_t gran = need_size("--granularity", o.granularity, false);
  std::uint64_t total = mem_total(host);
  std::uint64_t max = o.max.empty() ? std::min<std::uint64_t>(4ull << 30, total / 2 / gran * gran)
                                    : need_size("--max", o.max, false);
  std::uint64_t min = o.min.empty() ? gran : need_size("--min", o.min, false);
  std::uint64_t offset = need_offset(o.offset);
  if (o.budget <= 0) usage("--budget: must be greater than 0 seconds");
  if (min > max)
    usage("--min " + format_size(min) + " is larger than --max " + format_size(max) +
          "; pass a --min no larger than --max");
  check_ram(host, "--max", max, max + offset, o.force);

  json j = json_envelope("probe");
  j["kernel"] = host.kernel();
  ModuleIdentity mod = host.module();
  j["module"] = to_json(mod);
  Outcome out;
  auto resolved = resolve_device(prov, host, o.device, 0);
  if (!resolved) {
    throw_if_usage(resolved.error());
    print_error("probe", resolved.error().line());
    out.exit = resolved.error().exit;
    return out;
  }
  const DeviceChoice& dc = *resolved;
  j["device"] = dc.name;
  auto opened = prov.open(dc.name);
  if (!opened) {
    print_error("probe", opened.error().summary +
                             "; load ib_uverbs and rdma_rxe and check that `rdma link show` lists " +
                             dc.name);
    out.exit = kExitNotReady;
    return out;
  }
  std::unique_ptr<Device> dev = std::move(*opened);
  MappedBuffer buf(static_cast<std::size_t>(max + offset));
  if (!buf) {
    print_error("probe", "cannot allocate " + format_size(max + offset) + ": " + std::strerror(buf.error()));
    out.exit = kExitNotReady;
    return out;
  }
  buf.populate();
  unsigned char* base = buf.data() + offset;
  DiagContext dctx = make_diag_context(host, dev->port().active, false, mod);
  auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  json attempts = json::array();
  std::optional<Diagnosis> fail_diag;
  bool env_stop = false;
  auto attempt = [&](std::uint64_t sz) {
    auto md = rxe_metadata(offset, sz);
    auto a0 = std::chrono::steady_clock::now();
    auto r = dev->reg_mr(base, sz);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - a0).count();
    bool ok = r.mr != nullptr;
    r.mr.reset();
    attempts.push_back({{"size", sz},
                        {"pages", md.pages},
                        {"metadata_bytes", md.bytes},
                        {"metadata_order", md.order},
                        {"registered", ok},
                        {"reg_errno", r.err},
                        {"reg_seconds", s}});
    if (!o.json)
      std::fprintf(
          stderr, "  %-12s pages %-8llu metadata %-10s order %-2d  %s\n", format_size(sz).c_str(),
          static_cast<unsigned long long>(md.pages), format_size(md.bytes).c_str(), md.order,
          ok ? ("ok " + format_seconds(s)).c_str() : ("FAILED errno " + std::to_string(r.err)).c_str());
    if (!ok) {
      DiagInput in = dctx();
      in.stage = Stage::Register;
      in.err = r.err;
      in.size = sz;
      in.offset = offset;
      auto d = diagnose(in);
      if (is_environment_cause(d.cause)) env_stop = true;
      fail_diag = d;
    }
    return ok;
  };
  std::optional<std::uint64_t> lo_ok, hi_fail;
  bool complete = false;
  if (attempt(max)) {
    lo_ok = max;
    complete = true;
  } else if (!env_stop) {
    hi_fail = max;
    std::optional<Diagnosis> max_diag = fail_diag;
    if (attempt(min)) {
      lo_ok = min;
      complete = true;
      while (*hi_fail - *lo_ok > gran) {
        if (elapsed() > o.budget) {
          complete = false;
          break;
        }
        std::uint64_t mid = (*lo_ok + (*hi_fail - *lo_ok) / 2) / gran * gran;
        if (mid <= *lo_ok) mid = *lo_ok + gran;
        if (mid >= *hi_fail) break;
        if (attempt(mid)) lo_ok = mid;
        else if (env_stop) break;
        else hi_fail = mid;
      }
    } else {
      hi_fail = min;
      complete = true;
    }
  }
  json pj = {{"max", max},
             {"min", min},
             {"granularity", gran},
             {"offset", offset},
             {"budget_seconds", o.budget},
             {"elapsed_seconds", elapsed()},
             {"attempts", attempts},
             {"complete", complete && !env_stop}};
  auto md_json = [&](std::optional<std::uint64_t> v) -> json {
    if (!v) return nullptr;
    auto md = rxe_metadata(offset, *v);
    return {{"size", *v}, {"pages", md.pages}, {"metadata_bytes", md.bytes}, {"metadata_order", md.order}};
  };
  pj["largest_ok"] = md_json(lo_ok);
  pj["smallest_fail"] = md_json(hi_fail);
  pj["diagnosis"] = fail_diag && hi_fail ? to_json(*fail_diag) : json(nullptr);
  auto zones = parse_buddyinfo(host.read("/proc/buddyinfo").value_or(""));
  int lf = largest_free_order(zones);
  pj["stock_rxe_max_mr_now"] = lf >= 0 ? json(stock_mr_limit_for_order(lf)) : json(nullptr);
  j["probe"] = pj;
  const Verdict verdict =
      env_stop ? Verdict::NotReady : (complete ? Verdict::Complete : Verdict::BudgetExhausted);
  j["verdict"] = verdict;
  std::ostringstream txt;
  {
    txt << "device " << dc.name << ", module rdma_rxe " << to_string(mod.flavor) << "\n";
    if (lo_ok && !hi_fail) txt << "every size up to --max " << format_size(max) << " registered\n";
    if (lo_ok && hi_fail) {
      auto a = rxe_metadata(offset, *lo_ok), b = rxe_metadata(offset, *hi_fail);
      txt << "boundary: " << format_size(*lo_ok) << " registers (" << a.pages
          << " pages x 16 B = " << format_size(a.bytes) << ", order " << a.order << "), "
          << format_size(*hi_fail) << " fails (" << b.pages << " pages x 16 B = " << format_size(b.bytes)
          << ", order " << b.order << ")"
          << (complete ? "" : " [budget exhausted: not narrowed to the granularity]") << "\n";
    }
    if (!lo_ok && hi_fail) txt << "even --min " << format_size(*hi_fail) << " fails\n";
    if (fail_diag && hi_fail)
      txt << "diagnosis [" << fail_diag->cause << "]: " << fail_diag->summary
          << "\n  remedy: " << fail_diag->remedy << "\n";
    if (lf >= 0)
      txt << "largest free block now: order " << lf << " => a stock rxe could register at most "
          << format_size(stock_mr_limit_for_order(lf)) << " per MR\n";
    txt << "verdict: " << to_string(verdict) << "\n";
  }
  return reported(exit_code(verdict), std::move(j), txt.str());
}

}  // namespace rxv
