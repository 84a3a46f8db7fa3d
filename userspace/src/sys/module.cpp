#include "sys/module.hpp"

#include "sys/procfs.hpp"

namespace rxv {

std::string to_string(ModuleFlavor f) {
  switch (f) {
    case ModuleFlavor::Absent:
      return "absent";
    case ModuleFlavor::Stock:
      return "stock";
    case ModuleFlavor::RxeKvfix:
      return "rxe-kvfix";
    case ModuleFlavor::RxeKvfixUnpatched:
      return "rxe-kvfix-unpatched";
  }
  return "absent";
}

ModuleIdentity classify_module(bool loaded, const std::optional<std::string>& sysfs_version,
                               const std::string& modinfo_rxe_kvfix) {
  ModuleIdentity m;
  m.installed = trim(modinfo_rxe_kvfix);
  if (!loaded) {
    m.flavor = ModuleFlavor::Absent;
    return m;
  }
  m.version = sysfs_version ? trim(*sysfs_version) : "";
  m.flavor = m.version.find("rxe-kvfix") != std::string::npos ? ModuleFlavor::RxeKvfix : ModuleFlavor::Stock;
  // built by rxe-kvfix's test mode without the fix (RXE_KVFIX_UNPATCHED):
  // identifies as ours, behaves like stock
  if (m.flavor == ModuleFlavor::RxeKvfix && m.installed.find("series=unpatched") != std::string::npos)
    m.flavor = ModuleFlavor::RxeKvfixUnpatched;
  return m;
}

}  // namespace rxv
