// Size parsing and formatting: "512M", "1GiB", "1G+16", "4096".
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace rxv {

// Integers with optional binary suffix K/M/G/T (case-insensitive, optional "iB" or "B"),
// and sums "A+B". Rejects empty, negative, garbage and overflow with a usage error of one
// line. Zero is accepted here; callers decide whether 0 is meaningful.
Result<std::uint64_t> parse_size(std::string_view text);

// Comma separated list of sizes ("512M,1G"); the first bad one's error.
Result<std::vector<std::uint64_t>> parse_size_list(std::string_view text);

// Human readable binary size: "1 GiB", "1 GiB + 16 B", "640 MiB", "4097 B".
std::string format_size(std::uint64_t bytes);
// Compact form usable as input again: "1G", "1G+16", "640M".
std::string format_size_compact(std::uint64_t bytes);

}  // namespace rxv
