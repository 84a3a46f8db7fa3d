// Helpers shared by the commands in app/: option checks, device choice, the diagnosis
// context and the loopback QP pair (run and churn set it up the same way).
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "app/app.hpp"
#include "diagnosis.hpp"
#include "engine.hpp"

namespace rxv {

[[noreturn]] void usage(const std::string& m);
// A size parse error, with what a size looks like unless the parser already said it.
[[noreturn]] void size_usage(const std::string& what, const std::string& err);
std::uint64_t need_size(const std::string& what, const std::string& text, bool allow_zero);
// --offset places the region inside its first page: 0 .. page size - 1.
std::uint64_t need_offset(const std::string& text);
// -g/--gid-index given on the command line must be an index, not the "default" sentinel.
void check_gid_option(bool given, int gid_index);
// Beyond MemTotal: usage error (2); beyond MemAvailable: not ready (3). Both unless force.
void check_ram(HostEnv& host, const std::string& what, std::uint64_t requested, std::uint64_t bytes,
               bool force);
std::uint64_t mem_total(HostEnv& host);
// A random odd seed unless one was given.
std::uint64_t seed_or_random(std::uint64_t seed);

void print_error(const std::string& cmd, const std::string& msg);

struct DeviceChoice {
  std::string name;
  int gid_index = -1;
  IbDevice info;
};
DeviceChoice resolve_device(Provider& prov, HostEnv& host, const std::string& wanted, int gid_opt,
                            std::string& err, int& code);

DiagContext make_diag_context(HostEnv& host, std::optional<bool> port_active, bool two_host,
                              const ModuleIdentity& module);

// An environment failure found while setting up (before any size ran).
struct SetupFailure {
  std::string cause, summary, remedy;
  int code = kExitNotReady;
};

// The outcome of a command that produced a report.
inline Outcome reported(int exit, nlohmann::json report, std::string text = "") {
  Outcome o;
  o.exit = exit;
  o.has_report = true;
  o.report = std::move(report);
  o.text = std::move(text);
  return o;
}

// A setup failure of run or churn: the error line on stderr, the report with its error
// (no text: the line said it), exit f.code.
template <class Report>
Outcome setup_failed(const char* cmd, const SetupFailure& f, Report& rep) {
  print_error(cmd, f.summary + (f.remedy.empty() ? "" : "; " + f.remedy));
  rep.error = Diagnosis{f.cause, f.summary, f.remedy};
  finalize(rep);
  return reported(f.code, to_json(rep));
}

// "port 1 of DEV is DOWN" with the remedy, or nullopt when the port is active.
std::optional<SetupFailure> port_down(const DeviceChoice& dc, const PortInfo& pi);

// Two QPs of one device connected to each other (loopback; also the rebuild after a
// failed size); "" or the error.
std::string connect_qp_pair(Device& dev, const QpParams& p, std::unique_ptr<QueuePair>& qa,
                            std::unique_ptr<QueuePair>& qb);

// The loopback setup of run and churn: the QP pair and the registered staging buffer.
struct Loopback {
  std::unique_ptr<QueuePair> qa, qb;
  std::unique_ptr<LocalPeer> peer;
};
// What a run pins at once (bytes): the largest region over `split` MRs at `offset` and
// its staging buffer (at least 2 MiB, as doctor counts). memlock_preflight: a
// memlock SetupFailure (exit 3) naming the current limit, that need (`what` says what it
// is) and the remedies, when RLIMIT_MEMLOCK is below it without CAP_IPC_LOCK.
std::uint64_t run_pinned_bytes(std::uint64_t offset, std::uint64_t largest, unsigned split,
                               std::uint64_t staging);
std::optional<SetupFailure> memlock_preflight(HostEnv& host, std::uint64_t need, const std::string& what);

// The device did not open: access to its /dev/infiniband/uverbs* node denied
// (`denied_node` names it, or err says EACCES/EPERM: device_access) or anything else
// (no_device), each with its remedy; exit 3. libibverbs' errno is no guide: with the node
// at mode 0600 ibv_open_device fails with ENOENT (its fallback to a node of its own).
SetupFailure open_failure(const std::string& device, const std::string& err,
                          const std::string& denied_node = "");
// The uverbs node of `device` (/sys/class/infiniband_verbs/uverbs*/ibdev) when this
// process may not open it for reading and writing, else "".
std::string uverbs_node_denied(const std::string& device);

// A staging buffer that does not register is a memlock problem (3) or a failure (1).
std::optional<SetupFailure> setup_loopback(Device& dev, const QpParams& p, std::uint64_t staging,
                                           const DiagContext& dctx, Loopback& lb);

}  // namespace rxv
