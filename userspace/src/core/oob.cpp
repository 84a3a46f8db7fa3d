// Out-of-band protocol: the messages' fields, the hello reply and RemotePeer (the client side).
#include "core/oob.hpp"

#include <cstdio>
#include <string>
#include <string_view>

#include "base/cause.hpp"
#include "base/number.hpp"

namespace rxv {
using nlohmann::json;

namespace {
std::string hex(const std::array<std::uint8_t, 16>& g) {
  std::array<char, 40> b{};
  for (std::size_t i = 0; i < g.size(); ++i) std::snprintf(b.data() + 2 * i, 3, "%02x", g[i]);
  return {b.data(), 32};
}
}  // namespace

json qp_to_json(const QpAddr& a) { return {{"qpn", a.qpn}, {"psn", a.psn}, {"gid", hex(a.gid)}}; }

std::optional<QpAddr> qp_from_json(const json& j) {
  if (!j.is_object() || !j.contains("qpn") || !j.contains("psn") || !j.contains("gid") ||
      !j["qpn"].is_number_unsigned() || !j["psn"].is_number_unsigned() || !j["gid"].is_string() ||
      j["qpn"].get<std::uint64_t>() > 0xffffffu || j["psn"].get<std::uint64_t>() > 0xffffffu)
    return std::nullopt;  // QPNs and PSNs are 24-bit
  QpAddr a;
  a.qpn = j["qpn"].get<std::uint32_t>();
  a.psn = j["psn"].get<std::uint32_t>();
  std::string g = j["gid"].get<std::string>();
  if (g.size() != 32) return std::nullopt;
  for (std::size_t i = 0; i < 16; ++i) {
    // two hex digits a byte (parse_uint takes no sign or space: strtoul took "-1", " f", "+f")
    auto byte = parse_uint<std::uint8_t>(std::string_view(g).substr(2 * i, 2), 16);
    if (!byte) return std::nullopt;
    a.gid[i] = *byte;
  }
  return a;
}

std::optional<std::uint64_t> u64_field(const json& m, const char* key, std::uint64_t def) {
  auto it = m.find(key);
  if (it == m.end()) return def;
  if (!it->is_number_unsigned()) return std::nullopt;  // negative, fractional, huge, text
  return it->get<std::uint64_t>();
}
std::optional<std::string> str_field(const json& m, const char* key, const std::string& def) {
  auto it = m.find(key);
  if (it == m.end()) return def;
  if (!it->is_string()) return std::nullopt;
  return it->get<std::string>();
}
namespace {
bool bool_field(const json& m, const char* key) {
  auto it = m.find(key);
  return it != m.end() && it->is_boolean() && it->get<bool>();
}
// A peer's error text, cut to one line of sane length.
std::string peer_text(const json& m, const char* key, const std::string& def) {
  std::string t = str_field(m, key, def).value_or(def);
  for (char& c : t)
    if (c == '\n' || c == '\r') c = ' ';
  return shorten_utf8(t, 400);
}
}  // namespace

Result<ServerHello> parse_hello_reply(const json& r) {
  if (!bool_field(r, "ok")) {
    // the server names a cause it knows for sure (its memlock limit, its port)
    const std::string c = str_field(r, "cause", "").value_or("");
    const bool known = c == cause::kMemlock || c == cause::kDeviceDown || c == cause::kOutOfMemory;
    return Error("server refused: " + peer_text(r, "error", "?"), "", kExitFail, known ? c : cause::kUnknown);
  }
  if (auto v = u64_field(r, "version", 1); !v || *v < static_cast<std::uint64_t>(kProtocolVersion))
    return Error("the server speaks protocol version " + (v ? std::to_string(*v) : std::string("?")) +
                 ", this run needs " + std::to_string(kProtocolVersion) +
                 " (request ids): install the same rxe-verify on both hosts");
  auto q = r.find("qp");
  auto st = r.find("staging");
  std::optional<QpAddr> qa;
  if (q != r.end()) qa = qp_from_json(*q);
  if (!qa || st == r.end() || !st->is_object()) return Error("malformed server answer");
  auto addr = u64_field(*st, "addr", 0), rkey = u64_field(*st, "rkey", 0), size = u64_field(*st, "size", 0);
  if (!addr || !rkey || !size || *rkey > 0xffffffffu || *size == 0)
    return Error("malformed server answer (staging buffer)");
  ServerHello h;
  h.qp = *qa;
  h.staging_addr = *addr;
  h.staging_rkey = static_cast<std::uint32_t>(*rkey);
  h.staging_size = *size;
  return h;
}

Result<json> RemotePeer::call(json req) {
  if (ended_)
    return Error("the session with the server ended earlier: " + ended_->summary, "", kExitFail,
                 ended_->cause);
  const std::uint64_t id = next_id_++;
  const std::string what = "request " + std::to_string(id) + " (" + req.value("op", std::string("?")) + ")";
  req["id"] = id;
  auto end = [this](std::string summary, const char* c) {
    ended_ = Error(std::move(summary), "", kExitFail, c);
    return *ended_;
  };
  if (auto sent = s_.send(req); !sent) return end(sent.error().summary, cause::kNetwork);
  auto r = s_.recv(timeout_);
  if (!r) {
    if (timed_out(r.error()))
      return end("the server did not answer " + what + " within " +
                     std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout_).count()) +
                     " s",
                 cause::kPeerTimeout);
    return end(r.error().summary, cause::kNetwork);
  }
  auto rid = r->find("id");
  if (rid == r->end() || !rid->is_number_unsigned() || rid->get<std::uint64_t>() != id)
    return end("reply out of step: " + what + " was answered by " +
                   (rid == r->end() ? std::string("a reply without an id")
                                    : "the reply to request " + shorten_utf8(rid->dump(), 24)) +
                   " (a reply lost, repeated or late)",
               cause::kPeerOutOfStep);
  return r;
}

Result<void> RemotePeer::fill(std::uint64_t st, std::uint64_t off, std::uint64_t len, std::uint64_t key) {
  auto r = call({{"op", "fill"}, {"st", st}, {"off", off}, {"len", len}, {"key", key}});
  if (!r) return std::move(r).error();
  if (!bool_field(*r, "ok")) {
    ended_ = Error(peer_text(*r, "error", "peer refused fill"));
    return *ended_;
  }
  return {};
}

Result<void> RemotePeer::arm_staging() {
  auto r = call({{"op", "arm"}});
  if (!r) return std::move(r).error();
  if (!bool_field(*r, "ok")) {
    ended_ = Error(peer_text(*r, "error", "peer refused arm"));
    return *ended_;
  }
  return {};
}

void RemotePeer::bye() {
  if (ended_) return;
  (void)call({{"op", "bye"}});  // awaited, not judged: the sizes' results are in
}

VerifyOutcome RemotePeer::verify(std::uint64_t st, std::uint64_t off, std::uint64_t len, std::uint64_t key,
                                 const std::vector<KeyCandidate>& cands, std::uint64_t region_size) {
  VerifyOutcome v;
  json c = json::array();
  const std::size_t first = cands.size() > kMaxSentCandidates ? cands.size() - kMaxSentCandidates : 0;
  for (std::size_t i = first; i < cands.size(); ++i) c.push_back(json::array({cands[i].key, cands[i].label}));
  auto r = call({{"op", "verify"},
                 {"st", st},
                 {"off", off},
                 {"len", len},
                 {"key", key},
                 {"candidates", c},
                 {"region_size", region_size}});
  if (!r) {
    v.ok = false;
    v.error = r.error().summary;
    v.cause = r.error().cause;
    return v;
  }
  if (bool_field(*r, "ok")) return v;
  v.ok = false;
  auto mi = r->find("mismatch");
  if (mi != r->end() && mi->is_object()) {
    auto offset = u64_field(*mi, "offset", 0), exp = u64_field(*mi, "expected", 0),
         act = u64_field(*mi, "actual", 0), bad = u64_field(*mi, "bad_bytes", 0);
    if (!offset || !exp || !act || !bad || *exp > 255 || *act > 255) {
      v.error = "malformed mismatch report from the server";
      ended_ = Error(v.error);
      return v;
    }
    Mismatch mm;
    mm.region_offset = *offset;
    mm.expected = static_cast<std::uint8_t>(*exp);
    mm.actual = static_cast<std::uint8_t>(*act);
    mm.bad_bytes = *bad;
    mm.first_bad_page = mm.region_offset / 4096;
    v.mismatch = mm;
    v.explanation = peer_text(*r, "explanation", "");
  } else {
    v.error = peer_text(*r, "error", "peer verify failed");
    ended_ = Error(v.error);
  }
  return v;
}

}  // namespace rxv
