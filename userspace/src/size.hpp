// Size parsing and formatting: "512M", "1GiB", "1G+16", "4096".
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rxv {

struct SizeParse {
  std::optional<std::uint64_t> value;  // set on success
  std::string error;                   // one-line reason on failure
};

// Integers with optional binary suffix K/M/G/T (case-insensitive, optional "iB" or "B"),
// and sums "A+B". Rejects empty, negative, garbage and overflow. Zero is accepted here;
// callers decide whether 0 is meaningful.
SizeParse parse_size(std::string_view text);

// Comma separated list of sizes ("512M,1G").
struct SizeListParse {
  std::vector<std::uint64_t> values;
  std::string error;
  bool ok() const { return error.empty(); }
};
SizeListParse parse_size_list(std::string_view text);

// Human readable binary size: "1 GiB", "1 GiB + 16 B", "640 MiB", "4097 B".
std::string format_size(std::uint64_t bytes);
// Compact form usable as input again: "1G", "1G+16", "640M".
std::string format_size_compact(std::uint64_t bytes);

}  // namespace rxv
