#include "core/churn.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "base/number.hpp"
#include "base/size.hpp"
#include "core/engine.hpp"
#include "core/plan.hpp"
#include "sys/host.hpp"
#include "sys/procfs.hpp"

namespace rxv {

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

SecondsStats summarize(std::vector<double> v) {
  SecondsStats s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  return s;
}

namespace {

// /proc/buddyinfo before an iteration: the free blocks of the metadata's order and above.
std::optional<BuddyBefore> read_buddy_before(const ChurnConfig& cfg, int order) {
  if (!cfg.read_buddyinfo) return std::nullopt;
  auto text = cfg.read_buddyinfo();
  if (!text) return std::nullopt;
  BuddyBefore b;
  b.order = order;
  b.zones = parse_buddyinfo(*text);
  b.free_blocks = free_blocks_at_least(b.zones, order);
  b.largest_free_order = largest_free_order(b.zones);
  if (b.zones.empty()) return std::nullopt;
  return b;
}

// Iteration i's traffic: a verified sampled WRITE/READ pass over the live registration
// `mr`, then its deregistration (timed into it.dereg_seconds).
struct Traffic {
  SizeResult r;
  bool ok = false;
};
Traffic traffic_on(Device& dev, QueuePair& qp, Peer& peer, const ChurnConfig& cfg, const DiagContext& ctx,
                   unsigned i, unsigned char* base, const SplitLayout& layout,
                   std::unique_ptr<MemoryRegion> mr, ChurnIteration& it) {
  RunConfig rc = cfg.run;
  rc.offset = cfg.offset;
  rc.split = 1;
  rc.seed = cfg.run.seed + i;  // new data every iteration: stale pages would show
  Engine eng(dev, qp, peer, rc, ctx);
  Traffic t;
  t.r = planned_result(cfg.size, rc);
  t.r.registered = true;
  t.r.reg_seconds = it.reg_seconds;
  std::vector<std::unique_ptr<MemoryRegion>> mrs;
  mrs.push_back(std::move(mr));
  t.ok = eng.exercise(t.r, base, layout, mrs);
  auto t0 = std::chrono::steady_clock::now();
  mrs.clear();
  it.dereg_seconds = since(t0);
  return t;
}

}  // namespace

ChurnReport run_churn(Device& dev, QueuePair* qp, Peer* peer, const ChurnConfig& cfg, const DiagContext& ctx,
                      const KmemReader& kmem) {
  ChurnReport rep;
  rep.size = cfg.size;
  rep.offset = cfg.offset;
  rep.count = cfg.count;
  rep.traffic = cfg.traffic;
  MetadataInfo md = rxe_metadata(cfg.offset, cfg.size);
  rep.pages = md.pages;
  rep.metadata_bytes = md.bytes;
  rep.metadata_order = md.order;
  auto diag = [&](Stage st, int err) {
    DiagInput in = ctx ? ctx() : DiagInput{};
    in.stage = st;
    in.err = err;
    in.size = cfg.size;
    in.offset = cfg.offset;
    in.already_pinned = cfg.traffic && peer ? peer->staging_size() : 0;
    return diagnose(in);
  };

  MappedBuffer buf(static_cast<std::size_t>(cfg.offset + cfg.size));
  if (!buf) {
    rep.failed_stage = "allocate";
    rep.failure = diag(Stage::Allocate, buf.error());
    return rep;
  }
  buf.populate();
  unsigned char* base = buf.data() + cfg.offset;
  SplitLayout layout = SplitLayout::make(cfg.size, cfg.offset % kPageSize, 1);
  if (kmem) rep.baseline = kmem();

  for (unsigned i = 1; i <= cfg.count; ++i) {
    ChurnIteration it;
    it.index = i;
    it.buddy_before = read_buddy_before(cfg, md.order);
    auto t0 = std::chrono::steady_clock::now();
    RegResult rr = dev.reg_mr(base, cfg.size);
    it.reg_seconds = since(t0);
    if (!rr.mr) {
      it.reg_errno = rr.err;
      rep.iterations.push_back(it);
      rep.failed_iteration = i;
      rep.failed_stage = "register";
      rep.failure = diag(Stage::Register, rr.err);
      break;
    }
    it.registered = true;
    if (i == 1 && kmem) rep.registered = kmem();
    bool traffic_ok = true;
    if (cfg.traffic && qp && peer) {
      Traffic t = traffic_on(dev, *qp, *peer, cfg, ctx, i, base, layout, std::move(rr.mr), it);
      traffic_ok = t.ok;
      if (!traffic_ok) {
        rep.failed_iteration = i;
        rep.failed_stage = "traffic";
        rep.failure = t.r.diagnosis;
      }
      it.traffic = std::move(t.r);
    } else {
      t0 = std::chrono::steady_clock::now();
      rr.mr.reset();
      it.dereg_seconds = since(t0);
    }
    rep.iterations.push_back(std::move(it));
    if (!traffic_ok) break;
  }
  if (kmem) rep.after = kmem();
  return rep;
}

int finalize(ChurnReport& r) {
  if (r.error) r.verdict = Verdict::NotReady;
  else if (r.failure) r.verdict = is_environment_cause(r.failure->cause) ? Verdict::NotReady : Verdict::Fail;
  else r.verdict = r.count > 0 && r.iterations.size() == r.count ? Verdict::Pass : Verdict::Fail;
  return exit_code(r.verdict);
}

nlohmann::json to_json(const KernelMemory& m) {
  using nlohmann::json;
  return {{"mem_free", m.has_meminfo ? json(m.mem_free) : json(nullptr)},
          {"slab", m.has_meminfo ? json(m.slab) : json(nullptr)},
          {"vmalloc_used", m.has_meminfo ? json(m.vmalloc_used) : json(nullptr)},
          {"vmallocinfo", m.has_vmallocinfo ? json(m.vmallocinfo) : json(nullptr)}};
}

namespace {
nlohmann::json delta_json(const std::optional<KernelMemory>& a, const std::optional<KernelMemory>& b) {
  using nlohmann::json;
  if (!a || !b) return nullptr;
  auto d = [](std::uint64_t x, std::uint64_t y) {
    return static_cast<std::int64_t>(y) - static_cast<std::int64_t>(x);
  };
  bool mi = a->has_meminfo && b->has_meminfo, vi = a->has_vmallocinfo && b->has_vmallocinfo;
  return {{"mem_free", mi ? json(d(a->mem_free, b->mem_free)) : json(nullptr)},
          {"slab", mi ? json(d(a->slab, b->slab)) : json(nullptr)},
          {"vmalloc_used", mi ? json(d(a->vmalloc_used, b->vmalloc_used)) : json(nullptr)},
          {"vmallocinfo", vi ? json(d(a->vmallocinfo, b->vmallocinfo)) : json(nullptr)}};
}
nlohmann::json stats_json(const SecondsStats& s) {
  if (!s.n) return nullptr;
  return {{"min", s.min}, {"median", s.median}, {"max", s.max}, {"n", s.n}};
}
}  // namespace

nlohmann::json to_json(const BuddyBefore& b) {
  nlohmann::json zones = nlohmann::json::array();
  for (const auto& z : b.zones) zones.push_back({{"node", z.node}, {"zone", z.zone}, {"free", z.free}});
  return {{"order", b.order},
          {"free_blocks", b.free_blocks},
          {"largest_free_order", b.largest_free_order},
          {"zones", zones}};
}

nlohmann::json to_json(const ChurnReport& r) {
  using nlohmann::json;
  json its = json::array();
  std::vector<double> reg, dereg;
  for (const auto& it : r.iterations) {
    json j = {{"index", it.index},
              {"registered", it.registered},
              {"reg_errno", it.reg_errno},
              {"reg_seconds", it.reg_seconds},
              {"dereg_seconds", it.registered ? json(it.dereg_seconds) : json(nullptr)},
              {"traffic", it.traffic ? to_json(*it.traffic) : json(nullptr)},
              {"buddyinfo_before", it.buddy_before ? to_json(*it.buddy_before) : json(nullptr)}};
    its.push_back(j);
    if (it.registered) {
      reg.push_back(it.reg_seconds);
      dereg.push_back(it.dereg_seconds);
    }
  }
  auto opt = [](const std::optional<KernelMemory>& m) { return m ? to_json(*m) : json(nullptr); };
  json j = json_envelope("churn");
  j.update({{"device", r.device.empty() ? json(nullptr) : json(r.device)},
            {"module", to_json(r.module)},
            {"kernel", r.kernel},
            {"size", r.size},
            {"size_text", format_size(r.size)},
            {"offset", r.offset},
            {"pages", r.pages},
            {"metadata_bytes", r.metadata_bytes},
            {"metadata_order", r.metadata_order},
            {"count", r.count},
            {"traffic", r.traffic},
            {"completed", std::count_if(r.iterations.begin(), r.iterations.end(),
                                        [&](const ChurnIteration& i) {
                                          return i.registered &&
                                                 (!i.traffic || i.traffic->result == SizeOutcome::Pass);
                                        })},
            {"reg_seconds", stats_json(summarize(reg))},
            {"dereg_seconds", stats_json(summarize(dereg))},
            {"iterations", its},
            {"kernel_memory",
             {{"baseline", opt(r.baseline)},
              {"registered", opt(r.registered)},
              {"after", opt(r.after)},
              {"registered_minus_baseline", delta_json(r.baseline, r.registered)},
              {"after_minus_baseline", delta_json(r.baseline, r.after)}}},
            {"failure", nullptr},
            {"error", r.error ? to_json(*r.error) : json(nullptr)},
            {"verdict", r.verdict}});
  if (r.failure)
    j["failure"] = {{"iteration", r.failed_iteration ? json(r.failed_iteration) : json(nullptr)},
                    {"stage", r.failed_stage},
                    {"diagnosis", to_json(*r.failure)}};
  return j;
}

std::string to_text(const ChurnReport& r) {
  std::ostringstream o;
  o << "rxe-verify " << kToolVersion << "  kernel " << r.kernel
    << "  module rdma_rxe: " << to_string(r.module.flavor);
  if (!r.module.version.empty()) o << " (" << r.module.version << ")";
  o << "\n";
  if (r.error) {
    o << "ERROR: " << r.error->summary << "\n  remedy: " << r.error->remedy
      << "\nverdict: " << to_string(r.verdict) << "\n";
    return o.str();
  }
  o << "churn " << format_size(r.size) << (r.offset ? " @+" + std::to_string(r.offset) : "") << " x "
    << r.count << " on " << r.device << (r.traffic ? " with traffic" : "") << "  (" << r.pages
    << " pages, metadata " << format_size(r.metadata_bytes) << ", order " << r.metadata_order << ")\n";
  std::vector<double> reg, dereg;
  std::uint64_t verified = 0;
  for (const auto& it : r.iterations) {
    if (!it.registered) continue;
    reg.push_back(it.reg_seconds);
    dereg.push_back(it.dereg_seconds);
    if (it.traffic) verified += it.traffic->verified_bytes;
  }
  auto line = [&](const char* what, const SecondsStats& s) {
    if (!s.n) return;
    o << what << "min " << format_seconds(s.min) << "  median " << format_seconds(s.median) << "  max "
      << format_seconds(s.max) << "  (" << s.n << ")\n";
  };
  line("register    ", summarize(reg));
  line("deregister  ", summarize(dereg));
  if (r.traffic) o << "traffic     " << format_size(verified) << " verified\n";
  if (r.baseline && r.baseline->has_meminfo) {
    char b[256];
    std::snprintf(b, sizeof b, "%-13s %14s %14s %14s %14s %14s\n", "kernel KiB", "baseline", "registered",
                  "delta", "after", "delta");
    o << b;
    auto row = [&](const char* name, auto get, bool have) {
      if (!have) return;
      auto kib = [](std::uint64_t v) { return static_cast<long long>(v / 1024); };
      long long base = kib(get(*r.baseline));
      std::string reg_s = "-", regd = "-", aft = "-", aftd = "-";
      if (r.registered) {
        reg_s = std::to_string(kib(get(*r.registered)));
        regd = std::to_string(kib(get(*r.registered)) - base);
      }
      if (r.after) {
        aft = std::to_string(kib(get(*r.after)));
        aftd = std::to_string(kib(get(*r.after)) - base);
      }
      std::snprintf(b, sizeof b, "%-13s %14lld %14s %14s %14s %14s\n", name, base, reg_s.c_str(),
                    regd.c_str(), aft.c_str(), aftd.c_str());
      o << b;
    };
    row(
        "MemFree", [](const KernelMemory& m) { return m.mem_free; }, true);
    row(
        "Slab", [](const KernelMemory& m) { return m.slab; }, true);
    row(
        "VmallocUsed", [](const KernelMemory& m) { return m.vmalloc_used; }, true);
    row(
        "vmallocinfo", [](const KernelMemory& m) { return m.vmallocinfo; }, r.baseline->has_vmallocinfo);
  }
  if (r.failure) {
    o << "FAILED at ";
    if (r.failed_iteration) o << "iteration " << r.failed_iteration << " of " << r.count << ", ";
    o << r.failed_stage << " [" << r.failure->cause << "]: " << r.failure->summary
      << "\n  remedy: " << r.failure->remedy << "\n";
  }
  o << "verdict: " << to_string(r.verdict) << "\n";
  return o.str();
}

}  // namespace rxv
