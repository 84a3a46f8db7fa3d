// Pure parsers for /proc and sysfs text (unit-testable with recorded samples).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rxv {

struct BuddyZone {
  int node = 0;
  std::string zone;
  std::vector<std::uint64_t> free;  // free[k] = free blocks of order k
};
std::vector<BuddyZone> parse_buddyinfo(std::string_view text);
// Zones a GFP_KERNEL allocation may use (everything except ZONE_DMA).
bool zone_usable_for_kernel(const BuddyZone& z);
// Largest order with a free block in a usable zone; -1 when none / no data.
int largest_free_order(const std::vector<BuddyZone>& zones);
// Free blocks of order >= `order` in usable zones.
std::uint64_t free_blocks_at_least(const std::vector<BuddyZone>& zones, int order);

struct MemlockLimit {
  bool soft_unlimited = false, hard_unlimited = false;
  std::uint64_t soft = 0, hard = 0;  // bytes
};
std::optional<MemlockLimit> parse_memlock(std::string_view limits_text);

struct MemInfo {
  std::uint64_t total = 0, free = 0, available = 0;  // bytes
  bool has_available = false;
};
std::optional<MemInfo> parse_meminfo(std::string_view text);
// /proc/meminfo's "Name:   value [kB]" lines, in order, as the name without its ':' and
// the value in bytes; a line of another shape is skipped. parse_meminfo and
// parse_kernel_memory (sys/kernel_memory.hpp) both read it through this.
struct MeminfoField {
  std::string name;
  std::uint64_t bytes = 0;
};
std::vector<MeminfoField> parse_meminfo_fields(std::string_view text);

// CapEff from /proc/self/status.
std::optional<std::uint64_t> parse_cap_eff(std::string_view status_text);
inline constexpr int kCapIpcLock = 14;
inline bool has_cap(std::uint64_t caps, int cap) { return (caps >> cap) & 1u; }

// GID table entries of one port (from sysfs gids/<i> and gid_attrs/types/<i>).
struct GidEntry {
  int index = 0;
  std::string gid;   // "0000:0000:0000:0000:0000:ffff:0a00:0001"
  std::string type;  // "RoCE v2", "IB/RoCE v1"
  std::string ndev;
  bool is_zero() const;
  bool is_ipv4_mapped() const;
  bool is_link_local() const;
  std::string ipv4() const;  // dotted form when IPv4-mapped, else ""
};
// Prefer RoCE v2 + IPv4-mapped, then RoCE v2 global, then any RoCE v2. -1 if none.
int select_gid_index(const std::vector<GidEntry>& gids);

std::string trim(std::string_view s);
std::vector<std::string> split_ws(std::string_view s);
// The lines of a text without their '\n' (a last line without one included).
std::vector<std::string_view> text_lines(std::string_view t);

// What the rxe-kvfix DKMS build recorded for one kernel release: the key=value file
// kmod/rxe-kvfix-dkms-build writes (kmod/rxe-kvfix-lib.sh, rxe_kvfix_record).
inline constexpr const char* kKvfixStatusDir = "/var/lib/rxe-kvfix/status/";
struct KvfixBuildStatus {
  std::string state;    // built, not-needed, failed, deferred (kmod/rxe-kvfix-record.sh)
  std::string time;     // UTC, ISO 8601
  std::string version;  // the rxe-kvfix package version
  std::string message;  // one line: what happened and, when it failed, what to do
};
// nullopt when the text has no state= line
std::optional<KvfixBuildStatus> parse_kvfix_status(std::string_view text);

}  // namespace rxv
