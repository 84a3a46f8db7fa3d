// Runs the built rxe-verify binary with bad arguments: exit code 2 and one line on stderr.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "app/app.hpp"
#include "test_paths.hpp"

namespace {
struct Out {
  int code;
  std::string out, err;
};
Out run(const std::string& args) {
  std::string o = "/tmp/rxv-cli-out-" + std::to_string(getpid());
  std::string e = "/tmp/rxv-cli-err-" + std::to_string(getpid());
  std::string cmd = std::string(RXV_VERIFY_BIN) + " " + args + " >" + o + " 2>" + e + " </dev/null";
  int st = std::system(cmd.c_str());
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  Out r{WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(o), slurp(e)};
  unlink(o.c_str());
  unlink(e.c_str());
  return r;
}
int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}
}  // namespace

class CliBadArgs : public ::testing::TestWithParam<const char*> {};

TEST_P(CliBadArgs, ExitTwoWithOneLine) {
  auto r = run(GetParam());
  EXPECT_EQ(r.code, 2) << GetParam() << "\n" << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("error:"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate"), std::string::npos);
  EXPECT_TRUE(r.out.empty()) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Args, CliBadArgs,
    ::testing::Values("", "bogus", "run --size 0", "run --size -1G", "run --size 1X", "run --size 1G,,2G",
                      "run --size abc", "run --size 64T", "run --offset x", "run --mode turbo",
                      "run --msg-size 3G", "run --split 0", "run --passes x", "run --bogus",
                      "run --connect host:0", "run --connect :5", "run --device no-such-dev0 --size 1M",
                      "serve --port 70000", "serve --device no-such-dev0", "probe --budget 0",
                      "probe --granularity 0", "probe --min 2G --max 1G", "doctor --size 0",
                      "run --timeout -1", "run --offset 4096", "probe --offset 5000", "run --gid-index -2",
                      "serve --gid-index -1", "run --connect 'bad host'", "run --connect a:b:c",
                      "run --connect 'host;rm:47910'", "run --size 1M --busy-poll --no-spin",
                      "run --no-spin=maybe", "run --size 1M --spin fast", "run --size 1M --spin -1",
                      "run --size 1M --spin 2000000", "run --size 1M --spin",
                      "run --size 1M --spin 200 --busy-poll", "run --size 1M --spin 200 --no-spin"));

TEST(Cli, UnknownCommandIsNamed) {
  auto r = run("bogus");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown command 'bogus'; use run, serve, doctor, probe or churn"), std::string::npos)
      << r.err;
  auto n = run("");
  EXPECT_NE(n.err.find("a command is required"), std::string::npos) << n.err;
}

TEST(Cli, HelpForEverySubcommand) {
  for (const char* s : {"--help", "run --help", "serve --help", "doctor --help", "probe --help"}) {
    auto r = run(s);
    EXPECT_EQ(r.code, 0) << s;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << s;
  }
  auto v = run("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_NE(v.out.find("rxe-verify"), std::string::npos);
}

TEST(Cli, NoDeviceIsEnvironmentNotReady) {
  if (access("/sys/class/infiniband", F_OK) == 0) GTEST_SKIP() << "host has RDMA devices";
  auto r = run("run --size 1M");
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  auto j = run("run --size 1M --json");
  EXPECT_EQ(j.code, 3);
  EXPECT_NE(j.out.find("\"verdict\": \"not_ready\""), std::string::npos) << j.out;
}

TEST(Cli, DoctorJson) {
  auto r = run("doctor --json");
  EXPECT_TRUE(r.code == 0 || r.code == 3) << r.code;
  for (const char* k : {"\"kernel\"", "\"module\"", "\"devices\"", "\"memlock\"", "\"buddyinfo\"",
                        "\"firewall\"", "\"ready\""})
    EXPECT_NE(r.out.find(k), std::string::npos) << k;
}

TEST(Cli, RunHelpShowsPerftestFlags) {
  auto r = run("run --help");
  EXPECT_EQ(r.code, 0);
  for (const char* f : {"-t,--tx-depth", "-x", "--gid-index", "-n,--iters", "-D,--duration", "--report_gbits",
                        "--busy-poll", "--no-spin", "--spin USEC", "--connect", "slots = min(tx-depth"})
    EXPECT_NE(r.out.find(f), std::string::npos) << f << " missing from:\n" << r.out;
  // what each way of waiting for completions costs, with the default spin's value
  const std::string spin = "up to " + std::to_string(rxv::kDefaultSpin.count()) + " us";
  for (const std::string& cost : {spin, std::string("one CPU core busy"), std::string("a wake-up")})
    EXPECT_NE(r.out.find(cost), std::string::npos) << cost << " missing from:\n" << r.out;
  for (const std::string& cost :
       {std::string("up to USEC microseconds (default ") + std::to_string(rxv::kDefaultSpin.count()) + ")",
        std::string("fewer wake-ups"), std::string("0 sleeps at once")})
    EXPECT_NE(r.out.find(cost), std::string::npos) << cost << " missing from:\n" << r.out;
  auto both = run("run --size 1M --busy-poll --no-spin");
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("--busy-poll and --no-spin: pick one"), std::string::npos) << both.err;
  // --spin: its value checked before anything is opened; each other mode rejected by name
  for (const auto& [args, line] :
       {std::pair<const char*, const char*>{
            "--spin 20x",
            "rxe-verify run: error: --spin: '20x' is not a number of microseconds; use a whole number"},
        {"--spin 1000001", "rxe-verify run: error: --spin: 1000001 us is beyond the longest spin"},
        {"--spin 50 --busy-poll", "rxe-verify run: error: --spin and --busy-poll: pick one"},
        {"--no-spin --spin 0", "rxe-verify run: error: --spin and --no-spin: pick one"}}) {
    auto s = run(std::string("run --size 1M ") + args);
    EXPECT_EQ(s.code, 2) << args;
    EXPECT_EQ(s.err.rfind(line, 0), 0u) << args << ": " << s.err;
  }
  // -c is hidden (deprecated), still parsed: a bad value gets the --connect error.
  auto c = run("run -s 1M -c peer:0");
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("--connect: bad port"), std::string::npos) << c.err;
}
