#include "core/mapped_buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace rxv {

MappedBuffer::MappedBuffer(std::size_t len) : len_(len) {
  if (len == 0) return;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    err_ = errno;
    len_ = 0;
    return;
  }
  p_ = p;
}
MappedBuffer::~MappedBuffer() {
  if (p_) munmap(p_, len_);
}
MappedBuffer::MappedBuffer(MappedBuffer&& o) noexcept : p_(o.p_), len_(o.len_), err_(o.err_) {
  o.p_ = nullptr;
  o.len_ = 0;
}
MappedBuffer& MappedBuffer::operator=(MappedBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) munmap(p_, len_);
    p_ = o.p_;
    len_ = o.len_;
    err_ = o.err_;
    o.p_ = nullptr;
    o.len_ = 0;
  }
  return *this;
}
void MappedBuffer::populate() {
  if (!p_) return;
  if (madvise(p_, len_, MADV_POPULATE_WRITE) == 0) return;
  auto* c = static_cast<volatile unsigned char*>(p_);
  for (std::size_t i = 0; i < len_; i += 4096) c[i] = 0;
}

}  // namespace rxv
