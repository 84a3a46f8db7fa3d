#include "core/diagnosis.hpp"

#include <cerrno>
#include <cstring>

#include "base/size.hpp"
#include "core/plan.hpp"
#include "sys/procfs.hpp"

namespace rxv {

bool memlock_allows(const std::string& limits_text, std::optional<std::uint64_t> cap_eff,
                    std::uint64_t bytes) {
  if (cap_eff && has_cap(*cap_eff, kCapIpcLock)) return true;
  auto ml = parse_memlock(limits_text);
  if (!ml) return true;  // cannot tell: do not block
  return ml->soft_unlimited || ml->soft >= bytes;
}

std::string memlock_remedy(std::uint64_t bytes) {
  std::uint64_t kib = (bytes + 1023) / 1024;
  return "raise RLIMIT_MEMLOCK to at least " + std::to_string(kib) +
         " KiB or unlimited: `ulimit -l unlimited` in the shell that runs the test (needs a "
         "hard limit that high); persistently add `<user> soft memlock unlimited` and "
         "`<user> hard memlock unlimited` to /etc/security/limits.conf (or a file in "
         "/etc/security/limits.d/) and log in again; for a systemd service set "
         "LimitMEMLOCK=infinity in the unit; or run with CAP_IPC_LOCK";
}

namespace {

struct ErrnoRow {
  SetupCall call;
  int err;
  const char* cause;
};
constexpr ErrnoRow kErrnoTable[] = {
    {SetupCall::OpenDevice, EACCES, cause::kDeviceAccess},
    {SetupCall::OpenDevice, EPERM, cause::kDeviceAccess},
    {SetupCall::OpenDevice, ENOMEM, cause::kOutOfMemory},
    {SetupCall::OpenDevice, ENODEV, cause::kNoDevice},
    {SetupCall::OpenDevice, ENXIO, cause::kNoDevice},
    {SetupCall::OpenDevice, ENOENT, cause::kNoDevice},
    {SetupCall::OpenDevice, ENOSYS, cause::kNoDevice},
    {SetupCall::QueuePair, EACCES, cause::kDeviceAccess},
    {SetupCall::QueuePair, EPERM, cause::kDeviceAccess},
    {SetupCall::QueuePair, ENOMEM, cause::kOutOfMemory},
    {SetupCall::QueuePair, ENODEV, cause::kNoDevice},
    {SetupCall::QueuePair, ENXIO, cause::kNoDevice},
    {SetupCall::RegisterMr, ENODEV, cause::kNoDevice},
    {SetupCall::RegisterMr, ENXIO, cause::kNoDevice},
};

}  // namespace

const char* errno_cause(SetupCall call, int err) {
  for (const auto& r : kErrnoTable)
    if (r.call == call && r.err == err) return r.cause;
  return call == SetupCall::OpenDevice ? cause::kNoDevice : cause::kUnknown;
}

namespace {

Diagnosis reg_diag(const DiagInput& in) {
  const std::uint64_t per = in.split > 1 ? (in.size + in.split - 1) / in.split : in.size;
  MetadataInfo md = rxe_metadata(in.offset, per);
  MetadataInfo whole = rxe_metadata(in.offset, in.size);
  const std::uint64_t pinned = whole.pages * kPageSize;
  std::string md_text = std::to_string(md.pages) + " pages x 16 B = " + format_size(md.bytes) +
                        " of physically contiguous rxe page metadata (buddy order " +
                        std::to_string(md.order) + ")";
  if (in.port_active && !*in.port_active)
    return {cause::kDeviceDown, "the rxe port is not ACTIVE",
            "bring the rxe device's netdev up (`ip link set <netdev> up`) and check "
            "`rdma link show`"};
  if (in.err == ENOMEM || in.err == EPERM || in.err == EAGAIN) {
    if (!memlock_allows(in.limits, in.cap_eff, pinned + in.already_pinned)) {
      auto ml = parse_memlock(in.limits);
      return {cause::kMemlock,
              "RLIMIT_MEMLOCK (" + (ml ? format_size(ml->soft) : std::string("?")) + ") is below the " +
                  format_size(pinned + in.already_pinned) +
                  " this registration pins, and the process lacks CAP_IPC_LOCK",
              memlock_remedy(pinned + in.already_pinned)};
    }
  }
  if (in.err == ENOMEM) {
    // A deterministic cause first: on a stock rdma_rxe an order above
    // MAX_PAGE_ORDER fails whatever the memory situation.
    if (in.module.flavor != ModuleFlavor::RxeKvfix && md.never_on_stock())
      return {cause::kRxeMetadataOrder,
              "the region needs " + md_text + "; order " + std::to_string(md.order) +
                  " > MAX_PAGE_ORDER (10) never succeeds on a stock rdma_rxe (it allocates "
                  "the array with kzalloc_objs()/kcalloc())",
              "load the fixed rdma_rxe (rxe-kvfix, kvcalloc/kvfree), or register at most "
              "1 GiB per MR (stock limit for order 10): split the buffer into several MRs "
              "(measure the cost with --split N)"};
    // The region itself is already allocated and resident (pre-faulted) when
    // ibv_reg_mr runs, so MemAvailable no longer counts it: what registration
    // still needs is the page metadata plus the umem scatter table (at most
    // 32 B per page).
    const std::uint64_t need = md.bytes + whole.pages * 32;
    if (auto mi = parse_meminfo(in.meminfo); mi && mi->available < need)
      return {cause::kOutOfMemory,
              "MemAvailable (" + format_size(mi->available) + ") is smaller than the " + format_size(need) +
                  " of kernel memory registering " + format_size(pinned) +
                  " needs (page metadata and scatter table)",
              "free memory (stop other workloads, drop caches) or test a smaller size"};
    if (in.module.flavor == ModuleFlavor::RxeKvfix)
      return {cause::kUnknown,
              "ENOMEM although the loaded rdma_rxe is rxe-kvfix (" + in.module.version +
                  "): its page metadata is allocated with kvcalloc(), so the metadata "
                  "allocation is not the cause",
              "check `dmesg` for allocation failures and /proc/meminfo; retry with a smaller "
              "size"};
    auto zones = parse_buddyinfo(in.buddyinfo);
    if (!zones.empty() && md.order > 0 && free_blocks_at_least(zones, md.order) == 0) {
      int lo = largest_free_order(zones);
      return {cause::kFragmentation,
              "the region needs " + md_text + "; /proc/buddyinfo has no free block of order " +
                  std::to_string(md.order) + " or higher (largest free order " + std::to_string(lo) +
                  ", enough for " + format_size(stock_mr_limit_for_order(lo)) +
                  "): memory is too fragmented for a stock rdma_rxe",
              "compact memory (`echo 1 > /proc/sys/vm/compact_memory`) and retry, use MRs "
              "of at most " +
                  format_size(stock_mr_limit_for_order(lo)) + " now, or load the fixed rdma_rxe (rxe-kvfix)"};
    }
    if (md.order > 3) {
      std::string now = zones.empty()
                            ? std::string("/proc/buddyinfo unreadable")
                            : std::to_string(free_blocks_at_least(zones, md.order)) +
                                  " free blocks of order >= " + std::to_string(md.order) + " exist now";
      return {cause::kUnknown,
              "ENOMEM on a stock rdma_rxe; the region needs " + md_text + " (" + now +
                  ", so fragmentation at the time of the call is possible but not shown)",
              "check `dmesg` for a page allocation failure in __alloc_mr_page_info; retry, "
              "or load the fixed rdma_rxe (rxe-kvfix)"};
    }
  }
  std::string e = in.err ? std::string(std::strerror(in.err)) : "unknown error";
  return {errno_cause(SetupCall::RegisterMr, in.err),
          "ibv_reg_mr failed: " + e + " (errno " + std::to_string(in.err) + ")",
          "check `dmesg` and the device state (`rdma link show`)"};
}

bool is_retry(int st) { return st == 12 /*RETRY_EXC*/ || st == 13 /*RNR_RETRY_EXC*/; }

Diagnosis transfer_diag(const DiagInput& in) {
  if (in.port_active && !*in.port_active)
    return {cause::kDeviceDown, "the rxe port is not ACTIVE",
            "bring the rxe device's netdev up (`ip link set <netdev> up`)"};
  bool timeout = in.stage == Stage::Timeout;
  std::string what =
      timeout ? std::string("no completion before the deadline")
              : "completion error " + in.wc_status_str + " (status " + std::to_string(in.wc_status) + ")";
  if (timeout || is_retry(in.wc_status)) {
    if (in.two_host) {
      std::string fw;
      if (in.firewall && in.firewall->verdict == FwVerdict::Drop)
        fw =
            "; this host's " + in.firewall->source + " input rules drop RoCEv2 (" + in.firewall->detail + ")";
      return {cause::kNetwork,
              what + ": RoCEv2 packets (UDP port 4791) do not get through between the hosts" + fw,
              "check the network path between the two rxe netdevs (addresses, routes, MTU) "
              "and make both hosts' firewalls accept UDP dport 4791, e.g. `nft insert rule "
              "inet filter input udp dport 4791 accept` or `iptables -I INPUT -p udp --dport "
              "4791 -j ACCEPT`; run `rxe-verify doctor` on both hosts"};
    }
    return {cause::kTransferError, what + " on a loopback connection",
            "check that the rxe netdev is up and has carrier, and `dmesg` for rxe errors"};
  }
  return {cause::kTransferError, what,
          "check `dmesg` for rxe errors; re-run with --json and report the output"};
}

}  // namespace

Diagnosis diagnose(const DiagInput& in) {
  switch (in.stage) {
    case Stage::Allocate:
      return {cause::kOutOfMemory,
              "cannot allocate and fault in a " + format_size(in.size + in.offset) + " buffer (errno " +
                  std::to_string(in.err) + ")",
              "free memory or test a smaller size"};
    case Stage::Register:
      return reg_diag(in);
    case Stage::Transfer:
    case Stage::Timeout:
      return transfer_diag(in);
    case Stage::Verify:
      return {cause::kDataCorruption, "data mismatch: " + in.mismatch_text,
              "the rxe page mapping returned wrong data: keep the --json output and `dmesg`, "
              "and report it together with the module version"};
  }
  return {cause::kUnknown, "unknown failure", ""};
}

SizeVerdict can_register(const ModuleIdentity& module, std::uint64_t size, int largest_free_order,
                         bool contiguous) {
  const MetadataInfo md = rxe_metadata(0, size);
  SizeVerdict v;
  v.order = md.order;
  const std::string need = format_size(size) + " needs " + std::to_string(md.pages) +
                           " pages x 16 B = " + format_size(md.bytes) + " of page array (buddy order " +
                           std::to_string(md.order) + ")";
  if (module.flavor == ModuleFlavor::Absent) {
    v.verdict = "unknown";
    v.why = "rdma_rxe is not loaded; " + need;
    return v;
  }
  if (module.flavor == ModuleFlavor::RxeKvfix || !contiguous) {
    v.verdict = "can";
    v.why = std::string("the loaded rdma_rxe ") +
            (contiguous ? "is rxe-kvfix: its page array may come from vmalloc"
                        : "of this kernel needs no contiguous page array (rxe-kvfix: not-needed)") +
            "; " + need;
    return v;
  }
  if (md.never_on_stock()) {
    v.verdict = "cannot";
    v.why = "the loaded rdma_rxe (" + to_string(module.flavor) + ") cannot register " + need +
            " > MAX_PAGE_ORDER (" + std::to_string(kMaxPageOrder) +
            "), which its contiguous allocation never gets; install rxe-kvfix";
    return v;
  }
  if (largest_free_order >= 0 && largest_free_order < md.order) {
    v.verdict = "not_now";
    v.why = "the loaded rdma_rxe needs one free block of order " + std::to_string(md.order) + " for " +
            format_size(size) + "; the largest free one now is order " + std::to_string(largest_free_order) +
            " (fragmentation)";
    return v;
  }
  v.verdict = "can";
  v.why = need + ", within MAX_PAGE_ORDER (" + std::to_string(kMaxPageOrder) + ")";
  return v;
}

}  // namespace rxv
