// The out-of-band code (oob*.cpp, app/serve_loop.cpp's serve_session) against a hostile or
// broken peer: what tests/fuzz/fuzz_oob found (each crashing input kept in
// tests/fuzz/regressions and replayed here), and the limits the server keeps
// (message size, idle time, staging size, field kinds, staging bounds): every bad request
// gets a one-line {"ok":false,"error":...} answer and the session stays well-formed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "../fuzz/oob_harness.hpp"
#include "test_paths.hpp"

using namespace rxv;
using nlohmann::json;

namespace {

const std::string kGid = "00112233445566778899aabbccddeeff";
std::string hello(std::uint64_t staging = 8192) {
  return json{{"op", "hello"},
              {"version", 1},
              {"qp", {{"qpn", 17}, {"psn", 5}, {"gid", kGid}}},
              {"staging", staging}}
             .dump() +
         "\n";
}

struct Session {
  std::string result;         // serve_session's return
  std::vector<json> replies;  // every line the server sent, parsed
  std::vector<std::string> raw;
};

Session run_session(const std::string& input, ServeOptions o = fuzz::fuzz_serve_options()) {
  Session out;
  fuzz::Fed f;
  EXPECT_TRUE(fuzz::feed(reinterpret_cast<const std::uint8_t*>(input.data()), input.size(), f));
  // a client that reads every answer: the server's end blocks as a real socket would
  fcntl(f.reader, F_SETFL, fcntl(f.reader, F_GETFL) & ~O_NONBLOCK);
  std::string all;
  std::thread reader([&] {
    char b[65536];
    ssize_t n;
    while ((n = ::read(f.writer, b, sizeof b)) > 0) all.append(b, static_cast<std::size_t>(n));
  });
  {
    LineSocket s(f.reader);
    rxv::testing::FakeControl c;
    rxv::testing::FakeProvider prov(c);
    auto r = serve_session(prov, o, s);
    out.result = r ? "" : r.error().summary;
  }  // the server end closes: the reader sees end-of-stream
  reader.join();
  std::size_t p = 0, nl;
  while ((nl = all.find('\n', p)) != std::string::npos) {
    out.raw.push_back(all.substr(p, nl - p));
    out.replies.push_back(json::parse(out.raw.back(), nullptr, false));
    EXPECT_FALSE(out.replies.back().is_discarded()) << out.raw.back();
    p = nl + 1;
  }
  EXPECT_EQ(p, all.size()) << "the server sent a partial line";
  return out;
}

std::string error_of(const json& j) {
  return j.is_object() && j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>() : "";
}

}  // namespace

// Every input in tests/fuzz/regressions once crashed fuzz_oob (its name says how); each
// must now run through the same harness without a sanitizer report.
TEST(OobHostile, FuzzRegressionsReplay) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(RXV_TEST_SRC) / ".." / "fuzz" / "regressions";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::string d((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(e.path().filename().string());
    fuzz::one_input(reinterpret_cast<const std::uint8_t*>(d.data()), d.size());
    ++n;
  }
  EXPECT_GT(n, 0);
}

// The first crash: a staging size past 2^64 parses as a double and was converted to
// uint64_t (UBSan: outside the range of representable values).
TEST(OobHostile, NumbersOfTheWrongKindAreRefusedNotConverted) {
  for (const char* staging : {"409184467440737095516156", "-1", "1.5", "\"8192\"", "null"}) {
    std::string h = hello();
    h.replace(h.find("8192"), 4, staging);
    auto s = run_session(h);
    ASSERT_EQ(s.replies.size(), 1u) << staging;
    EXPECT_FALSE(s.replies[0].value("ok", true));
    EXPECT_NE(error_of(s.replies[0]).find("bad staging size"), std::string::npos) << staging;
    EXPECT_NE(s.result.find("bad staging size"), std::string::npos);
  }
  auto s = run_session(hello() +
                       R"({"op":"fill","st":"0","off":0,"len":64,"key":1})"
                       "\n" +
                       R"({"op":7})"
                       "\n" +
                       R"({"op":"bye"})"
                       "\n");
  ASSERT_EQ(s.replies.size(), 4u);
  EXPECT_NE(error_of(s.replies[1]).find("bad field in fill"), std::string::npos);
  EXPECT_NE(error_of(s.replies[2]).find("bad field 'op'"), std::string::npos);
  EXPECT_TRUE(s.replies[3].value("ok", false));
  EXPECT_EQ(s.result, "");
}

// st + len wrapping around 2^64 passed LocalPeer's "st + len > size" check.
TEST(OobHostile, StagingRangeCannotWrap) {
  auto s = run_session(hello(4096) +
                       R"({"op":"fill","st":1,"off":0,"len":18446744073709551615,"key":1})"
                       "\n" +
                       R"({"op":"verify","st":4096,"off":0,"len":1,"key":1})"
                       "\n" +
                       R"({"op":"fill","st":0,"off":0,"len":4096,"key":1})"
                       "\n");
  ASSERT_EQ(s.replies.size(), 4u);
  EXPECT_EQ(error_of(s.replies[1]), "staging range out of bounds");
  EXPECT_EQ(error_of(s.replies[2]), "staging range out of bounds");
  EXPECT_TRUE(s.replies[3].value("ok", false));  // the session goes on
}

TEST(OobHostile, GarbageGetsOneLineAndEndsTheSession) {
  auto s = run_session(hello() + "\x01\xff not json at all\n" +
                       R"({"op":"bye"})"
                       "\n");
  ASSERT_EQ(s.replies.size(), 2u);
  EXPECT_EQ(error_of(s.replies[1]), "malformed message from peer");
  EXPECT_EQ(s.result, "malformed message from peer");
  auto g = run_session("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(g.replies.size(), 1u);
  EXPECT_EQ(error_of(g.replies[0]), "malformed message from peer");
}

TEST(OobHostile, UnknownOpIsAnsweredAndShortened) {
  auto s = run_session(hello() + json{{"op", std::string(5000, 'x')}}.dump() + "\n");
  ASSERT_EQ(s.replies.size(), 2u);
  EXPECT_LT(s.raw[1].size(), 200u);
  EXPECT_NE(error_of(s.replies[1]).find("unknown op"), std::string::npos);
  EXPECT_EQ(s.result, "");  // then the peer closed: a clean end
}

// Found by fuzz_oob (regressions/abort-utf8-cut-in-unknown-op): the op was cut at 40
// bytes inside a two-byte character; the JSON writer threw on the answer and the server
// aborted. Now the cut keeps whole characters.
TEST(OobHostile, UnknownOpIsShortenedAtACharacterBoundary) {
  std::string op = std::string(39, 'x') + "\xc3\xa9" + std::string(20, 'y');
  auto s = run_session(hello() + json{{"op", op}}.dump() + "\n");
  ASSERT_EQ(s.replies.size(), 2u);
  EXPECT_EQ(error_of(s.replies[1]), "unknown op '" + std::string(39, 'x') + "...'");
  EXPECT_EQ(s.result, "");
}

TEST(OobHostile, MidLineStopTimesOutWithOneLine) {
  // the client stays connected (Fed keeps its end open) but never ends the line
  ServeOptions o = fuzz::fuzz_serve_options();
  o.timeout = 0.3;
  std::string in = hello() + R"({"op":"fill","st":0,"off":0,"le)";
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_EQ(::write(sv[1], in.data(), in.size()), static_cast<ssize_t>(in.size()));
  std::string result;
  auto t0 = std::chrono::steady_clock::now();
  {
    LineSocket s(sv[0]);
    rxv::testing::FakeControl c;
    rxv::testing::FakeProvider prov(c);
    auto r = serve_session(prov, o, s);
    result = r ? "" : r.error().summary;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(result, "timed out waiting for the peer");
  LineSocket client(sv[1]);
  auto r1 = client.recv(std::chrono::seconds(1));
  auto r2 = client.recv(std::chrono::seconds(1));
  ASSERT_TRUE(r1 && r2);
  EXPECT_TRUE(r1->value("ok", false));
  EXPECT_EQ(error_of(*r2), "timed out waiting for the peer");
}

TEST(OobHostile, OversizedLineIsRefused) {
  std::string big = hello() + "{\"op\":\"" + std::string(kMaxMessageBytes + 10, 'a');
  auto s = run_session(big);
  ASSERT_EQ(s.replies.size(), 2u);
  EXPECT_NE(error_of(s.replies[1]).find("too long"), std::string::npos);
  EXPECT_NE(s.result.find("too long"), std::string::npos);
}

// Many complete messages in one read are not "too long": a flood of valid requests is
// answered one by one.
TEST(OobHostile, FloodOfValidRequestsIsServed) {
  std::string in = hello(4096);
  const int n = 30000;
  for (int i = 0; i < n; ++i)
    in += R"({"op":"fill","st":0,"off":0,"len":64,"key":1})"
          "\n";
  in += R"({"op":"bye"})"
        "\n";
  ASSERT_GT(in.size(), kMaxMessageBytes);  // more than one message may hold, all well-formed
  auto s = run_session(in);
  ASSERT_EQ(s.replies.size(), static_cast<std::size_t>(n + 2));
  for (const auto& r : s.replies) EXPECT_TRUE(r.value("ok", false)) << r.dump();
  EXPECT_EQ(s.result, "");
}

// A fuzzer timeout (regressions/timeout-region-size-pages): a mismatching
// verify with a region of 2^63 bytes searched 2^51 pages for a misplaced one. The search is
// bounded (test_pattern) and a session gets LocalPeer::kMaxExplained searches; the answers
// after those still report the mismatch.
TEST(OobHostile, MismatchExplanationsAreBoundedPerSession) {
  std::string in = hello(4096) + R"({"op":"fill","st":0,"off":0,"len":64,"key":1})" + "\n";
  const unsigned n = LocalPeer::kMaxExplained + 2;
  for (unsigned i = 0; i < n; ++i)
    in += R"({"op":"verify","st":0,"off":0,"len":64,"key":2,"region_size":9223372036854775808})"
          "\n";
  auto s = run_session(in);
  ASSERT_EQ(s.replies.size(), 2u + n);  // hello, fill, the verifies
  for (unsigned i = 0; i < n; ++i) {
    const json& r = s.replies[2 + i];
    SCOPED_TRACE(r.dump());
    EXPECT_FALSE(r.value("ok", true));
    ASSERT_TRUE(r.contains("mismatch"));
    EXPECT_EQ(r["mismatch"].value("offset", 1u), 0u);
    std::string why = r.value("explanation", "");
    if (i < LocalPeer::kMaxExplained)
      EXPECT_EQ(why.find("unrecognised data (searched pages 0-4194303 of 2251799813685248"), 0u);
    else EXPECT_EQ(why, "not explained (this peer explained its first 8 mismatches)");
  }
}

TEST(OobHostile, StagingSizeIsCapped) {
  auto s = run_session(hello((1 << 20) + 1));
  ASSERT_EQ(s.replies.size(), 1u);
  EXPECT_NE(error_of(s.replies[0]).find("bad staging size (1 to 1048576 bytes)"), std::string::npos);
}

TEST(OobHostile, ClientRejectsAMalformedServerHello) {
  // parsed from text, as it arrives: non-negative numbers are unsigned
  json good = json::parse(R"({"ok":true,"version":2,"qp":{"qpn":7,"psn":1,"gid":")" + kGid +
                          R"("},"staging":{"addr":4096,"rkey":3,"size":8192}})");
  auto h = parse_hello_reply(good);
  ASSERT_TRUE(h) << h.error().summary;
  EXPECT_EQ(h->staging_rkey, 3u);
  auto error_of_hello = [](const json& bad) {
    auto r = parse_hello_reply(bad);
    return r ? std::string("accepted") : r.error().summary;
  };
  json bad = good;
  bad["version"] = 1u;  // replies without request ids: refused, not trusted
  EXPECT_EQ(error_of_hello(bad),
            "the server speaks protocol version 1, this run needs 2 (request ids): install the same "
            "rxe-verify on both hosts");
  bad.erase("version");
  EXPECT_NE(error_of_hello(bad).find("protocol version 1,"), std::string::npos);
  bad = good;
  bad["staging"]["rkey"] = 1ull << 40;
  EXPECT_EQ(error_of_hello(bad), "malformed server answer (staging buffer)");
  bad = good;
  bad["staging"]["size"] = -5;
  EXPECT_EQ(error_of_hello(bad), "malformed server answer (staging buffer)");
  bad = good;
  bad["qp"]["gid"] = "-1112233445566778899aabbccddeeff";
  EXPECT_EQ(error_of_hello(bad), "malformed server answer");
  bad = good;
  bad["qp"]["qpn"] = 1ull << 24;
  EXPECT_EQ(error_of_hello(bad), "malformed server answer");
  bad = {{"ok", false}, {"error", "line one\nline two"}};
  EXPECT_EQ(error_of_hello(bad), "server refused: line one line two");
  bad = {{"ok", "yes"}};
  EXPECT_EQ(error_of_hello(bad), "server refused: ?");
}
