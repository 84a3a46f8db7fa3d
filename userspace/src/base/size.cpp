#include "base/size.hpp"

#include <cctype>
#include <charconv>
#include <limits>
#include <system_error>

namespace rxv {
namespace {

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

Result<std::uint64_t> parse_term(std::string_view raw) {
  std::string t = trim(raw);
  if (t.empty()) return usage_error("empty size");
  if (t[0] == '-') return usage_error("negative size '" + t + "'");
  if (!std::isdigit(static_cast<unsigned char>(t[0])))
    return usage_error("size '" + t + "' does not start with a number");
  // the leading digits; the rest is the suffix
  std::uint64_t v = 0;
  auto [digits_end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec == std::errc::result_out_of_range) return usage_error("size '" + t + "' is too large");
  const auto i = static_cast<std::size_t>(digits_end - t.data());
  std::string suf = t.substr(i);
  for (auto& c : suf) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  unsigned shift = 0;
  std::string rest;
  if (!suf.empty()) {
    switch (suf[0]) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      case 'B':
        shift = 0;
        break;
      default:
        return usage_error("size '" + t + "' has an unknown suffix '" + t.substr(i) +
                           "' (use K, M, G or T, optionally followed by iB)");
    }
    rest = suf.substr(1);
    bool ok = suf[0] == 'B' ? rest.empty() : (rest.empty() || rest == "B" || rest == "IB");
    if (!ok)
      return usage_error("size '" + t + "' has an unknown suffix '" + t.substr(i) +
                         "' (use K, M, G or T, optionally followed by iB)");
  }
  if (shift && v > (std::numeric_limits<std::uint64_t>::max() >> shift))
    return usage_error("size '" + t + "' is too large");
  return v << shift;
}

}  // namespace

Result<std::uint64_t> parse_size(std::string_view text) {
  std::uint64_t sum = 0;
  std::size_t start = 0;
  if (trim(text).empty()) return usage_error("empty size");
  while (true) {
    std::size_t plus = text.find('+', start);
    std::string_view part =
        text.substr(start, plus == std::string_view::npos ? std::string_view::npos : plus - start);
    auto p = parse_term(part);
    if (!p) return std::move(p).error();
    if (*p > std::numeric_limits<std::uint64_t>::max() - sum)
      return usage_error("size '" + std::string(text) + "' is too large");
    sum += *p;
    if (plus == std::string_view::npos) break;
    start = plus + 1;
  }
  return sum;
}

Result<std::vector<std::uint64_t>> parse_size_list(std::string_view text) {
  std::vector<std::uint64_t> values;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = text.find(',', start);
    std::string_view part =
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    auto p = parse_size(part);
    if (!p) return std::move(p).error();
    values.push_back(*p);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return values;
}

namespace {
const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
const char* const kShort[] = {"", "K", "M", "G", "T"};

// Largest unit that divides into a whole count; returns (count, unit index, remainder).
void split_size(std::uint64_t b, std::uint64_t& count, int& unit, std::uint64_t& rem) {
  unit = 0;
  for (int u = 4; u >= 1; --u) {
    std::uint64_t m = std::uint64_t{1} << (10 * u);
    if (b >= m) {
      unit = u;
      break;
    }
  }
  std::uint64_t m = std::uint64_t{1} << (10 * unit);
  count = b / m;
  rem = b % m;
}
}  // namespace

std::string format_size(std::uint64_t bytes) {
  std::uint64_t count, rem;
  int unit;
  split_size(bytes, count, unit, rem);
  if (rem == 0) return std::to_string(count) + " " + kUnits[unit];
  // Exact remainder below 1 KiB is shown as "+ N B" (e.g. 1 GiB + 16 B).
  if (rem < 1024) return std::to_string(count) + " " + kUnits[unit] + " + " + std::to_string(rem) + " B";
  // Otherwise one decimal.
  double v = static_cast<double>(bytes) / static_cast<double>(std::uint64_t{1} << (10 * unit));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[unit]);
  return buf;
}

std::string format_size_compact(std::uint64_t bytes) {
  std::uint64_t count, rem;
  int unit;
  split_size(bytes, count, unit, rem);
  std::string s = std::to_string(count) + kShort[unit];
  if (rem == 0) return s;
  return s + "+" + format_size_compact(rem);
}

}  // namespace rxv
