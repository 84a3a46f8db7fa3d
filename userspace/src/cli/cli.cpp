// The command line: CLI11 options into the commands' configs (app/app.hpp), the one
// command run, its outcome printed. The commands themselves live in app/.
#include "cli/cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "app/app.hpp"

namespace rxv {

namespace {

// Every command's options, as CLI11 fills them.
struct Options {
  RunCommandConfig run;
  std::string spin_text, connect_short;  // run's --spin and -c, as typed
  ServeCommandConfig serve;
  DoctorCommandConfig doctor;
  bool doctor_json = false;
  ProbeCommandConfig probe;
  ChurnCommandConfig churn;
};
// The subcommands, in the order of the help.
struct Commands {
  CLI::App *run, *serve, *doctor, *probe, *churn;
};

// Each command's subcommand: its options and their help, bound to its config (CLI11
// fills it as it parses). run's --spin and -c go to texts of their own (after_parse).
CLI::App* add_run(CLI::App& app, RunCommandConfig& ro, std::string& spin_text, std::string& connect_short) {
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
  run->add_option("-c", connect_short, "deprecated spelling of --connect")->group("");
  run->add_option("--timeout", ro.timeout,
                  "deadline per RDMA operation in seconds (default 30 s + 1 s per 4 MiB)");
  run->add_flag("--json", ro.json, "print the report as JSON");
  run->add_flag("--no-progress", ro.no_progress, "no progress bar");
  run->add_flag("--force", ro.force, "allow sizes beyond available memory");
  return run;
}

CLI::App* add_serve(CLI::App& app, ServeCommandConfig& so) {
  auto* serve = app.add_subcommand("serve", "serve one two-host run (staging buffer + responder QP)");
  serve->add_option("-d,--device", so.device, "RDMA device (default: first rxe device)");
  serve->add_option("-g,--gid-index", so.gid_index, "GID index (default: RoCE v2, IPv4-mapped preferred)");
  serve->add_option("-p,--port", so.port, "TCP port (default 47910)");
  serve->add_option("--bind", so.bind, "address to listen on (default: any)");
  serve->add_option("--timeout", so.timeout,
                    "seconds to wait for a client and between messages; 0 = forever (default 300)");
  serve->add_flag("--forever", so.forever, "keep serving clients instead of exiting after one");
  return serve;
}

CLI::App* add_doctor(CLI::App& app, DoctorCommandConfig& dco, bool& dj) {
  auto* doctor =
      app.add_subcommand("doctor", "check this host: module, devices, memlock, fragmentation, firewall");
  doctor->add_flag("--json", dj, "print JSON");
  doctor->add_option("-s,--size", dco.size, "region size the memlock check must allow (default 1G)");
  return doctor;
}

CLI::App* add_probe(CLI::App& app, ProbeCommandConfig& po) {
  auto* probe = app.add_subcommand("probe", "find the largest MR that registers (bisection)");
  probe->add_option("--max", po.max, "largest size to try (default min(4G, RAM/2))");
  probe->add_option("--min", po.min, "smallest size to try (default: the granularity)");
  probe->add_option("--granularity", po.granularity, "bisection step (default 64M)");
  probe->add_option("--budget", po.budget, "time budget in seconds (default 60)");
  probe->add_option("--offset", po.offset, "start the region this many bytes into a page");
  probe->add_option("-d,--device", po.device, "RDMA device (default: first rxe device)");
  probe->add_flag("--json", po.json, "print JSON");
  probe->add_flag("--force", po.force, "allow --max beyond available memory");
  return probe;
}

CLI::App* add_churn(CLI::App& app, ChurnCommandConfig& co) {
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
  return churn;
}

// What CLI11's parse left for the configs: which options were given, -c as --connect.
void after_parse(const Commands& c, Options& o) {
  RunCommandConfig& ro = o.run;
  ro.gid_given = c.run->count("--gid-index") > 0;
  if (c.run->count("--spin") > 0) ro.spin_option = o.spin_text;
  if (c.run->count("-c") > 0 && ro.connect.empty()) {
    ro.connect = o.connect_short;
    ro.connect_short = true;
  }
  o.serve.gid_given = c.serve->count("--gid-index") > 0;
}

// A command line CLI11 refused: one line naming the command (when one was recognised),
// what was wrong and where the help is; exit 2. A help request inside a subcommand: its
// help, exit 0.
int refused(const CLI::ParseError& e, CLI::App& app, const Commands& c, int argc, char** argv) {
  // Which subcommand was being parsed (for the message and a help hint)?
  std::string sub;
  for (auto* s : {c.run, c.serve, c.doctor, c.probe, c.churn})
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

// A command's outcome on stdout (its JSON report with --json, else its text); its exit code.
int show(const Outcome& out, bool json) {
  if (json) {
    // (replace: a text from the host or a peer that is not UTF-8 must not abort the report)
    if (out.has_report)
      std::cout << out.report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << out.text;
  }
  return out.exit;
}

// The one command parsed, run inside the command boundary (its exceptions stop there),
// its outcome printed.
int dispatch(const Commands& c, const Options& o) {
  auto guarded = [&](const char* cmd, auto&& command) {
    return run_guarded(cmd, [&] {
      auto host = make_system_host();
      auto prov = make_ibv_provider();
      return command(*prov, *host);
    });
  };
  if (c.run->parsed())
    return guarded("run",
                   [&](Provider& p, HostEnv& h) { return show(run_command(o.run, p, h), o.run.json); });
  if (c.serve->parsed())
    return guarded("serve",
                   [&](Provider& p, HostEnv& h) { return show(serve_command(o.serve, p, h), false); });
  if (c.doctor->parsed())
    return guarded("doctor",
                   [&](Provider&, HostEnv& h) { return show(doctor_command(o.doctor, h), o.doctor_json); });
  if (c.probe->parsed())
    return guarded("probe",
                   [&](Provider& p, HostEnv& h) { return show(probe_command(o.probe, p, h), o.probe.json); });
  if (c.churn->parsed())
    return guarded("churn",
                   [&](Provider& p, HostEnv& h) { return show(churn_command(o.churn, p, h), o.churn.json); });
  return kExitUsage;
}

}  // namespace

// Options into the configs (the add_* above), the one command run (dispatch).
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

  Options o;
  const Commands c{add_run(app, o.run, o.spin_text, o.connect_short), add_serve(app, o.serve),
                   add_doctor(app, o.doctor, o.doctor_json), add_probe(app, o.probe),
                   add_churn(app, o.churn)};
  try {
    app.parse(argc, argv);
    after_parse(c, o);
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
    return refused(e, app, c, argc, argv);
  }
  return dispatch(c, o);
}

}  // namespace rxv
