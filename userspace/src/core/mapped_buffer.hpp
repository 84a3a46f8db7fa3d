// MappedBuffer: an anonymous private mapping owned by RAII (the region under test, a
// peer's staging buffer, probe's regions).
#pragma once
#include <cstddef>

namespace rxv {

class MappedBuffer {
 public:
  MappedBuffer() = default;
  explicit MappedBuffer(std::size_t len);
  ~MappedBuffer();
  MappedBuffer(MappedBuffer&& o) noexcept;
  MappedBuffer& operator=(MappedBuffer&& o) noexcept;
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;
  unsigned char* data() const { return static_cast<unsigned char*>(p_); }
  std::size_t size() const { return len_; }
  explicit operator bool() const { return p_ != nullptr; }
  int error() const { return err_; }
  // Fault every page in (MADV_POPULATE_WRITE, else touching each page).
  void populate();

 private:
  void* p_ = nullptr;
  std::size_t len_ = 0;
  int err_ = 0;
};

}  // namespace rxv
