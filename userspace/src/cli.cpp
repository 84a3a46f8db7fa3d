// The command line: CLI11 options into the commands' configs (app/app.hpp), the one
// command run, its outcome printed. The commands themselves live in app/.
#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "app/app.hpp"

namespace rxv {

int cli_main(int argc, char** argv) {
  CLI::App app{
      "rxe-verify: verify large memory registrations and RDMA data integrity on "
      "Soft-RoCE (rdma_rxe)",
      "rxe-verify"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("rxe-verify ") + kToolVersion);
  app.footer(
      "Exit status: 0 pass/ready, 1 fail, 2 usage error, 3 environment not ready, 4 skipped.\n"
      "See rxe-verify(1).");

  RunCommandConfig ro;
  auto* run = app.add_subcommand("run", "register regions and verify RDMA WRITE/READ data integrity");
  run->add_option("-s,--size", ro.sizes,
                  "region size(s): 512M, 1G, 2G, 1G+16; repeatable or comma list (default 1G)");
  run->add_option("--offset", ro.offset, "start the region this many bytes into a page (e.g. 16)");
  run->add_option("-m,--mode", ro.mode,
                  "sampled (default: first/last pages, page straddles, spread and random offsets) or full "
                  "(whole region both ways)");
  run->add_option("--msg-size", ro.msg_size, "full mode message/staging size (default 64M, at most 2G)");
  run->add_option("--passes", ro.passes, "passes per size (default 2 sampled, 1 full)");
  run->add_option("--seed", ro.seed, "pattern seed (default: random)");
  run->add_option("--split", ro.split, "register the region as N MRs (application-level workaround)");
  run->add_option("-d,--device", ro.device, "RDMA device (default: first rxe device)");
  run->add_option("-g,-x,--gid-index", ro.gid_index, "GID index (default: RoCE v2, IPv4-mapped preferred)");
  run->add_option("-t,--tx-depth", ro.tx_depth,
                  "work requests in flight (default 128, as perftest; READs also at most the QP's "
                  "max_rd_atomic). Staging memory = slots x slot, slot = msg-size (full) or "
                  "1 MiB + 64 (sampled), slots = min(tx-depth, max(2, 16 MiB / slot))");
  run->add_option("-n,--iters", ro.iters,
                  "at least this many transfers per direction (perftest's iterations): whole "
                  "passes over the region are repeated until they are reached");
  run->add_option("-D,--duration", ro.duration,
                  "timed run: whole passes are repeated until this many seconds went by per size");
  // Waiting for completions once the queue is empty: what each mode costs.
  const std::string spin_us = std::to_string(kDefaultSpin.count());
  run->add_flag("--busy-poll", ro.busy_poll,
                "wait for completions by polling the completion queue and never sleeping, as "
                "perftest does: no wake-up latency, but one CPU core busy for the whole run "
                "(default: poll for up to " +
                    spin_us +
                    " us, then sleep on the completion "
                    "channel: at most " +
                    spin_us +
                    " us of CPU per wait, a wake-up only when a "
                    "completion takes longer; --spin sets that bound). Not with --no-spin or --spin");
  run->add_flag("--no-spin", ro.no_spin,
                "sleep on the completion channel as soon as the queue is empty: no CPU spent "
                "polling, but a wake-up (system call and scheduler, tens of microseconds, more "
                "on an emulated host) for every wait. Not with --busy-poll or --spin");
  std::string spin_text;
  run->add_option("--spin", spin_text,
                  "the default waiting's spin: poll an empty completion queue for up to USEC "
                  "microseconds (default " +
                      spin_us +
                      "), then sleep on the completion channel. "
                      "Each wait costs at most USEC us of CPU, and a wake-up only when the completion "
                      "comes later: a longer spin spends more CPU for fewer wake-ups, 0 sleeps at once "
                      "(as --no-spin). 0 to " +
                      std::to_string(kMaxSpin.count()) + "; not with --busy-poll or --no-spin")
      ->type_name("USEC");
  run->add_flag("--report_gbits", ro.report_gbits,
                "print bandwidth in Gb/s instead of MiB/s (JSON keeps MB/s)");
  run->add_option("--connect", ro.connect,
                  "HOST[:PORT] of `rxe-verify serve` (two-host run; default port 47910)");
  std::string connect_short;
  run->add_option("-c", connect_short, "deprecated spelling of --connect")->group("");
  run->add_option("--timeout", ro.timeout,
                  "deadline per RDMA operation in seconds (default 30 s + 1 s per 4 MiB)");
  run->add_flag("--json", ro.json, "print the report as JSON");
  run->add_flag("--no-progress", ro.no_progress, "no progress bar");
  run->add_flag("--force", ro.force, "allow sizes beyond available memory");

  ServeCommandConfig so;
  auto* serve = app.add_subcommand("serve", "serve one two-host run (staging buffer + responder QP)");
  serve->add_option("-d,--device", so.device, "RDMA device (default: first rxe device)");
  serve->add_option("-g,--gid-index", so.gid_index, "GID index (default: RoCE v2, IPv4-mapped preferred)");
  serve->add_option("-p,--port", so.port, "TCP port (default 47910)");
  serve->add_option("--bind", so.bind, "address to listen on (default: any)");
  serve->add_option("--timeout", so.timeout,
                    "seconds to wait for a client and between messages; 0 = forever (default 300)");
  serve->add_flag("--forever", so.forever, "keep serving clients instead of exiting after one");

  bool dj = false;
  DoctorCommandConfig dco;
  auto* doctor =
      app.add_subcommand("doctor", "check this host: module, devices, memlock, fragmentation, firewall");
  doctor->add_flag("--json", dj, "print JSON");
  doctor->add_option("-s,--size", dco.size, "region size the memlock check must allow (default 1G)");

  ProbeCommandConfig po;
  auto* probe = app.add_subcommand("probe", "find the largest MR that registers (bisection)");
  probe->add_option("--max", po.max, "largest size to try (default min(4G, RAM/2))");
  probe->add_option("--min", po.min, "smallest size to try (default: the granularity)");
  probe->add_option("--granularity", po.granularity, "bisection step (default 64M)");
  probe->add_option("--budget", po.budget, "time budget in seconds (default 60)");
  probe->add_option("--offset", po.offset, "start the region this many bytes into a page");
  probe->add_option("-d,--device", po.device, "RDMA device (default: first rxe device)");
  probe->add_flag("--json", po.json, "print JSON");
  probe->add_flag("--force", po.force, "allow --max beyond available memory");

  ChurnCommandConfig co;
  auto* churn = app.add_subcommand(
      "churn", "register and deregister one region many times; time it and watch kernel memory");
  churn->add_option("-s,--size", co.size, "region size: 1G, 2G, 1G+16")->required();
  churn->add_option("--offset", co.offset, "start the region this many bytes into a page");
  churn->add_option("--count", co.count, "registrations (at least 1)")->required();
  churn->add_flag("--traffic", co.traffic,
                  "a short verified sampled WRITE/READ loop while each registration is live");
  churn->add_option("--seed", co.seed, "pattern seed for --traffic (default: random)");
  churn->add_option("-d,--device", co.device, "RDMA device (default: first rxe device)");
  churn->add_option("-g,--gid-index", co.gid_index,
                    "GID index for --traffic (default: RoCE v2, IPv4-mapped preferred)");
  churn->add_flag("--json", co.json, "print JSON (every iteration)");
  churn->add_flag("--force", co.force, "allow sizes beyond available memory");

  try {
    app.parse(argc, argv);
    ro.gid_given = run->count("--gid-index") > 0;
    if (run->count("--spin") > 0) ro.spin_option = spin_text;
    if (run->count("-c") > 0 && ro.connect.empty()) {
      ro.connect = connect_short;
      ro.connect_short = true;
    }
    so.gid_given = serve->count("--gid-index") > 0;
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::cout << "rxe-verify " << kToolVersion << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    // Which subcommand was being parsed (for the message and a help hint)?
    std::string sub;
    for (auto* s : {run, serve, doctor, probe, churn})
      if (s->parsed()) sub = s->get_name();
    if (e.get_name() == "CallForHelp") {
      std::cout << (sub.empty() ? app.help() : app.get_subcommand(sub)->help());
      return 0;
    }
    std::string msg = e.what();
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    if (sub.empty()) {
      // no subcommand recognised: say which word was wrong and what the commands are
      std::string first = argc > 1 ? argv[1] : "";
      msg = first.empty() || first[0] == '-'
                ? (first.empty() ? "a command is required" : msg) + "; use run, serve, doctor, probe or churn"
                : "unknown command '" + first + "'; use run, serve, doctor, probe or churn";
    }
    std::fprintf(stderr, "rxe-verify%s%s: error: %s (see 'rxe-verify %s--help')\n", sub.empty() ? "" : " ",
                 sub.c_str(), msg.c_str(), sub.empty() ? "" : (sub + " ").c_str());
    return kExitUsage;
  }
  // Options parsed: run the one command and print its outcome (JSON with --json).
  auto show = [](const Outcome& out, bool json) {
    if (json) {
      // (replace: a text from the host or a peer that is not UTF-8 must not abort the report)
      if (out.has_report)
        std::cout << out.report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::cout << out.text;
    }
    return out.exit;
  };
  // the one command parsed, run inside the command boundary (its exceptions stop there)
  auto guarded = [&](const char* cmd, auto&& command) {
    return run_guarded(cmd, [&] {
      auto host = make_system_host();
      auto prov = make_ibv_provider();
      return command(*prov, *host);
    });
  };
  if (run->parsed())
    return guarded("run", [&](Provider& p, HostEnv& h) { return show(run_command(ro, p, h), ro.json); });
  if (serve->parsed())
    return guarded("serve", [&](Provider& p, HostEnv& h) { return show(serve_command(so, p, h), false); });
  if (doctor->parsed())
    return guarded("doctor", [&](Provider&, HostEnv& h) { return show(doctor_command(dco, h), dj); });
  if (probe->parsed())
    return guarded("probe", [&](Provider& p, HostEnv& h) { return show(probe_command(po, p, h), po.json); });
  if (churn->parsed())
    return guarded("churn", [&](Provider& p, HostEnv& h) { return show(churn_command(co, p, h), co.json); });
  return kExitUsage;
}

}  // namespace rxv
