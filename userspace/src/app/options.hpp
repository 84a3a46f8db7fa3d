// The commands' option checks: each option text becomes a value here, once, on its way
// down to the layers below, or the command stops with a usage error (exit 2, a
// UsageError the command boundary catches).
#pragma once
#include <cstdint>
#include <string>

#include "base/result.hpp"

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
// The host part of --connect: a name or an IP address (IPv6 without brackets once split);
// a usage error whose summary follows "--connect: ".
Result<void> check_peer_host(const std::string& host);
// A random odd seed unless one was given.
std::uint64_t seed_or_random(std::uint64_t seed);

}  // namespace rxv
