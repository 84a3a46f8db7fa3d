// verbs_ibv.cpp's error paths that need no RDMA device: opening a device libibverbs does
// not have is an error (exit 3) naming the verbs call or the device, as before the one
// error channel (the bad-input table's rv-gid-ok-device-absent reaches it).
#include <gtest/gtest.h>

#include "sys/verbs.hpp"

using namespace rxv;

TEST(VerbsIbv, OpeningAnAbsentDeviceSaysWhy) {
  auto prov = make_ibv_provider();
  auto dev = prov->open("rxv-no-such-device0");
  ASSERT_FALSE(dev);
  const std::string& s = dev.error().summary;
  // without ib_uverbs libibverbs has no device list at all; with it, no such device
  const bool no_list = s.rfind("ibv_get_device_list: ", 0) == 0;
  EXPECT_TRUE(no_list || s == "no RDMA device named 'rxv-no-such-device0'") << s;
  EXPECT_EQ(dev.error().exit, kExitNotReady);
  EXPECT_EQ(dev.error().remedy, "");
}
