// The one test source that holds paths of this checkout (see test_paths.hpp).
#include "test_paths.hpp"

namespace rxe_test {
const char* test_data_dir() { return RXE_PATH_TEST_DATA; }
const char* test_src_dir() { return RXE_PATH_TEST_SRC; }
const char* python3() { return RXE_PATH_PYTHON3; }
const char* schema_path() { return RXE_PATH_SCHEMA; }
const char* verify_bin() { return RXE_PATH_VERIFY_BIN; }
}  // namespace rxe_test
