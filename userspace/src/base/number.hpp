// Whole-string unsigned numbers, read with std::from_chars: digits of `base` only (no
// sign, spaces or 0x prefix), the whole string, in range for T. Every number parsed from
// text in rxe-verify (/proc files, GIDs, the peer's hex, option values) goes through it
// or through std::from_chars directly.
#pragma once
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>

namespace rxv {

template <class T = std::uint64_t>
std::optional<T> parse_uint(std::string_view s, int base = 10) {
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace rxv
