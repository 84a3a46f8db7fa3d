// The one test source that holds paths of this checkout (see test_paths.hpp).
#include "test_paths.hpp"

namespace rxe_test {
const char* test_data_dir() { return RXV_PATH_TEST_DATA; }
const char* test_src_dir() { return RXV_PATH_TEST_SRC; }
const char* python3() { return RXV_PATH_PYTHON3; }
const char* schema_path() { return RXV_PATH_SCHEMA; }
const char* verify_bin() { return RXV_PATH_VERIFY_BIN; }
}  // namespace rxe_test
