// Command line front end: run, serve, doctor, probe, churn.
#pragma once
#include <string>
#include <vector>

#include "host.hpp"
#include "verbs.hpp"

namespace rxv {

int cli_main(int argc, char** argv);

// Device choice (pure): the requested name must exist; otherwise the first rxe device.
// Returns the name, or "" with err and exit code (2 unknown name, 3 none).
std::string choose_device(const std::vector<IbDevice>& sysfs_devs,
                          const std::vector<std::string>& verbs_devs, const std::string& wanted,
                          std::string& err, int& code);

// -g/--gid-index against the device's GID table (non-zero entries from sysfs): false with
// err naming the valid indexes. An unreadable (empty) table is accepted.
bool check_gid_index(const IbDevice& dev, int index, std::string& err);

// The host part of --connect: a name or an IP address (IPv6 without brackets once split).
bool check_peer_host(const std::string& host, std::string& err);

}  // namespace rxv
