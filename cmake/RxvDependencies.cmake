# cmake/RxvDependencies.cmake: the libraries rxe-verify and its tests build against,
# found in one place before any target is declared. A missing one does not stop at
# the first: every missing one is collected, and the configure step ends with one line
# that names each and the package that provides it, per distribution:
#   rxe-verify: cannot build without CLI11, nlohmann_json; install them: Debian/Ubuntu:
#   apt install libcli11-dev nlohmann-json3-dev; Fedora: dnf install cli11-devel json-devel
# (tests/unit/configure-deps.sh checks that line.)

set(_rxv_missing_names "")
set(_rxv_missing_deb "")
set(_rxv_missing_rpm "")
# _rxv_need(FOUND NAME DEBIAN_PACKAGE FEDORA_PACKAGE)
macro(_rxv_need found name deb rpm)
  if(NOT ${found})
    list(APPEND _rxv_missing_names "${name}")
    list(APPEND _rxv_missing_deb "${deb}")
    list(APPEND _rxv_missing_rpm "${rpm}")
  endif()
endmacro()

find_package(nlohmann_json 3.11 QUIET)
_rxv_need(nlohmann_json_FOUND nlohmann_json nlohmann-json3-dev json-devel)
find_package(CLI11 2.1 QUIET)
_rxv_need(CLI11_FOUND CLI11 libcli11-dev cli11-devel)
find_library(IBVERBS_LIB ibverbs)
find_path(IBVERBS_INCLUDE infiniband/verbs.h)
if(IBVERBS_LIB AND IBVERBS_INCLUDE)
  set(_rxv_ibverbs_found TRUE)
endif()
_rxv_need(_rxv_ibverbs_found libibverbs libibverbs-dev rdma-core-devel)
find_package(Threads REQUIRED)
if(RXV_BUILD_TESTS)
  find_package(GTest QUIET)
  _rxv_need(GTest_FOUND "GoogleTest (for the unit tests: -DRXV_BUILD_TESTS=OFF builds without them)"
            "libgtest-dev libgmock-dev" "gtest-devel gmock-devel")
endif()

if(_rxv_missing_names)
  list(JOIN _rxv_missing_names ", " _names)
  list(JOIN _rxv_missing_deb " " _deb)
  list(JOIN _rxv_missing_rpm " " _rpm)
  # NOTICE prints the line as it is (FATAL_ERROR would wrap it), then the stop
  message(NOTICE "rxe-verify: cannot build without ${_names}; install them: "
                 "Debian/Ubuntu: apt install ${_deb}; Fedora: dnf install ${_rpm}")
  message(FATAL_ERROR "rxe-verify: missing libraries, named in the line above")
endif()
