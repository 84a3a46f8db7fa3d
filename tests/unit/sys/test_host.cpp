#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "app/app.hpp"
#include "app/device.hpp"
#include "sys/host.hpp"

using namespace rxv;
namespace fs = std::filesystem;

namespace {
void put(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << s;
}
struct FakeSys {
  fs::path root;
  FakeSys() {
    root = fs::temp_directory_path() / ("rxv-sys-" + std::to_string(getpid()));
    fs::remove_all(root);
    auto ib = root / "class/infiniband";
    // A hardware device first, then an rxe device named unusually (has "parent").
    put(ib / "mlx5_0/ports/1/state", "4: ACTIVE\n");
    put(ib / "soft0/parent", "eth1\n");
    put(ib / "soft0/ports/1/state", "4: ACTIVE\n");
    auto p = ib / "soft0/ports/1";
    put(p / "gids/0", "fe80:0000:0000:0000:5054:00ff:fe12:3456\n");
    put(p / "gid_attrs/types/0", "IB/RoCE v1\n");
    put(p / "gids/1", "fe80:0000:0000:0000:5054:00ff:fe12:3456\n");
    put(p / "gid_attrs/types/1", "RoCE v2\n");
    put(p / "gids/2", "0000:0000:0000:0000:0000:ffff:c0a8:0102\n");
    put(p / "gid_attrs/types/2", "IB/RoCE v1\n");
    put(p / "gids/3", "0000:0000:0000:0000:0000:ffff:c0a8:0102\n");
    put(p / "gid_attrs/types/3", "RoCE v2\n");
    put(p / "gid_attrs/ndevs/3", "eth1\n");
    put(p / "gids/4", "0000:0000:0000:0000:0000:0000:0000:0000\n");
    put(ib / "rxe1/ports/1/state", "1: DOWN\n");
  }
  ~FakeSys() { fs::remove_all(root); }
};
}  // namespace

TEST(Host, ListsDevicesAndGidsFromSysfs) {
  FakeSys s;
  auto d = list_ib_devices(s.root.string());
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].name, "mlx5_0");
  EXPECT_FALSE(d[0].rxe);
  EXPECT_EQ(d[2].name, "soft0");
  EXPECT_TRUE(d[2].rxe);
  EXPECT_EQ(d[2].netdev, "eth1");
  EXPECT_TRUE(d[2].port_active);
  ASSERT_EQ(d[2].gids.size(), 4u);  // zero GID skipped
  EXPECT_EQ(select_gid_index(d[2].gids), 3);
  EXPECT_EQ(d[2].gids[3].ipv4(), "192.168.1.2");
  EXPECT_TRUE(d[1].rxe);  // rxe1 by name
  EXPECT_FALSE(d[1].port_active);
}

TEST(Host, ChooseDevice) {
  FakeSys s;
  auto d = list_ib_devices(s.root.string());
  EXPECT_EQ(choose_device(d, {"mlx5_0", "rxe1", "soft0"}, "").value(), "rxe1");
  EXPECT_EQ(choose_device(d, {"mlx5_0", "soft0"}, "").value(), "soft0");
  EXPECT_EQ(choose_device(d, {"mlx5_0"}, "mlx5_0").value(), "mlx5_0");
  auto unknown = choose_device(d, {"mlx5_0"}, "nope");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().exit, 2);
  EXPECT_NE(unknown.error().summary.find("unknown device 'nope'"), std::string::npos);
  auto none = choose_device({}, {}, "");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().exit, 3);
  EXPECT_NE(none.error().summary.find("no rxe device"), std::string::npos);
}

TEST(Host, RunCommand) {
  auto r = run_command({"sh", "-c", "echo hi; exit 3"});
  EXPECT_TRUE(r.ran);
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(r.out, "hi\n");
  EXPECT_FALSE(run_command({"definitely-not-a-command-rxv"}).ran);
  auto t = run_command({"sleep", "5"}, 1);
  EXPECT_EQ(t.status, -1);
}

TEST(Host, ModuleAbsentWithoutSysfs) {
  FakeSys s;
  EXPECT_EQ(probe_module(s.root.string()).flavor, ModuleFlavor::Absent);
  put(s.root / "module/rdma_rxe/version", "9.9.9-rxe-kvfix\n");
  EXPECT_EQ(probe_module(s.root.string()).flavor, ModuleFlavor::RxeKvfix);
}
