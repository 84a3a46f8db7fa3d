// `rxe-verify serve`'s server loop: one client session (serve_session) and the TCP
// loop over the core transport (run_server). Apart from serve_command (app/serve.cpp),
// so the fuzz target links the loop without the command's host environment.
#include "app/serve_loop.hpp"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/cause.hpp"
#include "core/local_peer.hpp"
#include "core/report.hpp"

namespace rxv {
using nlohmann::json;

namespace {

void say(const std::string& s) { std::fprintf(stderr, "rxe-verify serve: %s\n", s.c_str()); }

// The request's staging range [st, st + len) inside a buffer of `size` bytes, without
// overflow (st + len can wrap for a hostile client).
bool range_ok(std::uint64_t st, std::uint64_t len, std::uint64_t size) {
  return st <= size && len <= size - st;
}

}  // namespace

namespace {

// The client's end of a session: answers go out on it (an answer that cannot be sent
// shows as the next recv's error), each wait for a message is bounded by `to`.
struct Client {
  LineSocket& s;
  std::chrono::milliseconds to;
  json id;  // the request's id, echoed in its reply (null: none given)
  void reply(json j) {
    if (!id.is_null()) j["id"] = id;
    (void)s.send(j);
  }
  // A refusal: the client reads it, the session ends with it (with the cause, when this
  // side knows it for sure: its memlock limit, its port).
  Error refuse(const std::string& e, const std::string& c = "") {
    json r{{"ok", false}, {"error", e}};
    if (!c.empty()) r["cause"] = c;
    reply(r);
    return Error(e, "", kExitFail, c.empty() ? std::string(cause::kUnknown) : c);
  }
};

// The client's hello: its QP address and the staging size it asks for.
struct Hello {
  QpAddr qp;
  std::uint64_t staging = 0;
};
Result<Hello> read_hello(Client& c, const ServeOptions& o) {
  auto hello = c.s.recv(c.to);
  if (!hello) return closed_by_peer(hello.error()) ? hello.error() : c.refuse(hello.error().summary);
  auto op0 = str_field(*hello, "op", "");
  if (!op0 || *op0 != "hello") return c.refuse("first message is not hello");
  std::optional<QpAddr> rq;
  if (auto q = hello->find("qp"); q != hello->end()) rq = qp_from_json(*q);
  auto staging = u64_field(*hello, "staging", 0);
  if (!rq) return c.refuse("bad QP address in hello");
  if (!staging || *staging == 0 || *staging > o.max_staging)
    return c.refuse("bad staging size (1 to " + std::to_string(o.max_staging) + " bytes)");
  return Hello{*rq, *staging};
}

void answer_verify(Client& c, LocalPeer& peer, const json& m, std::uint64_t st, std::uint64_t off,
                   std::uint64_t len, std::uint64_t key) {
  std::vector<KeyCandidate> cands;
  if (auto ci = m.find("candidates"); ci != m.end() && ci->is_array())
    for (const auto& x : *ci)
      if (x.is_array() && x.size() == 2 && x[0].is_number_unsigned() && x[1].is_string() &&
          cands.size() < kMaxCandidates)
        cands.push_back({x[0].get<std::uint64_t>(), x[1].get<std::string>()});
  auto rs = u64_field(m, "region_size", len + off);
  if (!rs) {
    c.reply({{"ok", false}, {"error", "bad field 'region_size' (a non-negative integer)"}});
    return;
  }
  auto v = peer.verify(st, off, len, key, cands, *rs);
  if (v.ok) {
    c.reply({{"ok", true}});
  } else if (v.mismatch) {
    c.reply({{"ok", false},
             {"mismatch",
              {{"offset", v.mismatch->region_offset},
               {"expected", v.mismatch->expected},
               {"actual", v.mismatch->actual},
               {"bad_bytes", v.mismatch->bad_bytes}}},
             {"explanation", v.explanation}});
  } else {
    c.reply({{"ok", false}, {"error", v.error}});
  }
}

// One request after the hello, answered; true when it was bye (the session's clean end).
bool answer(Client& c, LocalPeer& peer, const json& m) {
  auto op = str_field(m, "op", "");
  auto st = u64_field(m, "st", 0), off = u64_field(m, "off", 0), len = u64_field(m, "len", 0),
       key = u64_field(m, "key", 0);
  if (!op) {
    c.reply({{"ok", false}, {"error", "bad field 'op' (a string)"}});
    return false;
  }
  if (*op == "bye") {
    c.reply({{"ok", true}});
    return true;
  }
  if (*op == "arm") {
    peer.arm_all();
    c.reply({{"ok", true}});
    return false;
  }
  if (*op != "fill" && *op != "verify") {
    std::string shown = shorten_utf8(*op, 40);
    c.reply({{"ok", false}, {"error", "unknown op '" + shown + "'"}});
    return false;
  }
  if (!st || !off || !len || !key) {
    c.reply({{"ok", false},
             {"error", "bad field in " + *op +
                           ": st, off, len and key are "
                           "non-negative integers"}});
    return false;
  }
  if (!range_ok(*st, *len, peer.staging_size())) {
    c.reply({{"ok", false}, {"error", "staging range out of bounds"}});
    return false;
  }
  if (*op == "fill") {
    auto filled = peer.fill(*st, *off, *len, *key);
    c.reply(filled ? json{{"ok", true}} : json{{"ok", false}, {"error", filled.error().summary}});
    return false;
  }
  answer_verify(c, peer, m, *st, *off, *len, *key);
  return false;
}

}  // namespace

Result<void> serve_session(Provider& prov, const ServeOptions& o, LineSocket& s) {
  // a silent client holds the (one-client-at-a-time) server for at most this long, also
  // with --timeout 0 (which only means: wait for a client forever)
  double idle = o.timeout > 0 ? o.timeout : kDefaultIdleSeconds;
  Client c{s, std::chrono::milliseconds(static_cast<long long>(idle * 1000)), nullptr};
  auto hello = read_hello(c, o);
  if (!hello) return std::move(hello).error();
  if (o.memlock) {
    // the staging buffer is pinned here: this host's limit, not the client's, decides
    if (auto pins = o.memlock(hello->staging); !pins)
      return c.refuse(pins.error().line(), pins.error().cause);
  }
  auto opened = prov.open(o.device);
  if (!opened) return c.refuse(opened.error().summary);
  std::unique_ptr<Device> dev = std::move(*opened);
  if (!dev->port().active)
    return c.refuse("port 1 of " + o.device + " is not ACTIVE on the server", cause::kDeviceDown);
  QpParams qpp;
  qpp.gid_index = o.gid_index;
  auto created = dev->create_qp(qpp);
  if (!created) return c.refuse(created.error().summary);
  std::unique_ptr<QueuePair> qp = std::move(*created);
  LocalPeer peer(*dev, hello->staging);
  if (!peer.ok())
    return c.refuse("server cannot register its " + std::to_string(hello->staging) +
                    "-byte staging buffer: " + std::strerror(peer.reg_errno()));
  if (auto connected = qp->connect(hello->qp); !connected) return c.refuse(connected.error().summary);
  c.reply({{"ok", true},
           {"version", kProtocolVersion},
           {"qp", qp_to_json(qp->local_addr())},
           {"staging",
            {{"addr", peer.staging_addr()}, {"rkey", peer.staging_rkey()}, {"size", peer.staging_size()}}},
           {"device", o.device},
           {"module", o.module_flavor}});
  if (!o.quiet) say("client connected; serving " + o.device);
  while (true) {
    auto m = s.recv(c.to);
    c.id = nullptr;
    if (!m) return closed_by_peer(m.error()) ? Result<void>{} : c.refuse(m.error().summary);
    if (auto id = m->find("id"); id != m->end() && id->is_number_unsigned()) c.id = *id;
    if (answer(c, peer, *m)) return {};
  }
}

int run_server(Provider& prov, const ServeOptions& o) {
  auto listener = tcp_listen(o.bind, o.port);
  if (!listener) {
    const Error& e = listener.error();
    say("error: " + e.summary + (e.remedy.empty() ? "" : " (" + e.remedy + ")"));
    return e.exit;
  }
  say("listening on TCP port " + std::to_string(o.port) + " (device " + o.device + ", gid index " +
      std::to_string(o.gid_index) + ")" + (o.forever ? "" : "; exits after one client"));
  int wait = o.timeout > 0 ? static_cast<int>(o.timeout * 1000) : -1;
  while (true) {
    auto client = tcp_accept(*listener, wait);
    if (!client) {
      say("no client within " + std::to_string(static_cast<long long>(o.timeout)) +
          " s; giving up (use --timeout 0 to wait forever)");
      return kExitNotReady;
    }
    auto session = serve_session(prov, o, *client);
    if (!session) say("session ended: " + session.error().summary);
    else say("client finished");
    if (!o.forever) return session ? kExitPass : kExitFail;
  }
}

}  // namespace rxv
