// Helpers shared by the commands in app/: option checks, device choice, the diagnosis
// context and the loopback QP pair (run and churn set it up the same way). A check that
// can fail returns a Result; its Error is what the command reports (an environment
// failure found while setting up, before any size ran: summary, remedy, exit code and the
// diagnosis cause a report records).
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
[[noreturn]] void size_usage(const std::string& what, const std::string& why);
// A usage error (exit 2) is thrown: the command cannot run with that option.
void throw_if_usage(const Error& e);
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
// The device (choose_device) and its GID index: -g checked against its table (a usage
// error), else the RoCE v2 one (none: exit 3, cause no_device).
Result<DeviceChoice> resolve_device(Provider& prov, HostEnv& host, const std::string& wanted, int gid_opt);

DiagContext make_diag_context(HostEnv& host, std::optional<bool> port_active, bool two_host,
                              const ModuleIdentity& module);

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
// (no text: the line said it), exit e.exit.
template <class Report>
Outcome setup_failed(const char* cmd, const Error& e, Report& rep) {
  print_error(cmd, e.line());
  rep.error = Diagnosis{e.cause, e.summary, e.remedy};
  finalize(rep);
  return reported(e.exit, to_json(rep));
}

// The port is active, or "port 1 of DEV is DOWN" with the remedy (exit 3, device_down).
Result<void> check_port_active(const DeviceChoice& dc, const PortInfo& pi);

// Two QPs of one device connected to each other (loopback; also the rebuild after a
// failed size), or the verbs error.
struct QpPair {
  std::unique_ptr<QueuePair> qa, qb;
};
Result<QpPair> connect_qp_pair(Device& dev, const QpParams& p);

// The loopback setup of run and churn: the QP pair and the registered staging buffer.
struct Loopback {
  std::unique_ptr<QueuePair> qa, qb;
  std::unique_ptr<LocalPeer> peer;
};
// What a run pins at once (bytes): the largest region over `split` MRs at `offset` and
// its staging buffer (at least 2 MiB, as doctor counts). memlock_preflight: a
// memlock error (exit 3) naming the current limit, that need (`what` says what it
// is) and the remedies, when RLIMIT_MEMLOCK is below it without CAP_IPC_LOCK.
std::uint64_t run_pinned_bytes(std::uint64_t offset, std::uint64_t largest, unsigned split,
                               std::uint64_t staging);
Result<void> memlock_preflight(HostEnv& host, std::uint64_t need, const std::string& what);

// The device did not open (Provider::open's error): access to its
// /dev/infiniband/uverbs* node denied (`denied_node` names it, or the error says
// EACCES/EPERM: device_access) or anything else (no_device), each with its remedy; exit
// 3. libibverbs' errno is no guide: with the node at mode 0600 ibv_open_device fails with
// ENOENT (its fallback to a node of its own).
Error open_failure(const std::string& device, const Error& open_error, const std::string& denied_node = "");
// The uverbs node of `device` (/sys/class/infiniband_verbs/uverbs*/ibdev) when this
// process may not open it for reading and writing, else "".
std::string uverbs_node_denied(const std::string& device);

// The QP pair and the staging buffer; a QP that cannot be set up is exit 3, a staging
// buffer that does not register a memlock problem (3) or a failure (1).
Result<Loopback> setup_loopback(Device& dev, const QpParams& p, std::uint64_t staging,
                                const DiagContext& dctx);

}  // namespace rxv
