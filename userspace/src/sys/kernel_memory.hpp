#pragma once
#include <cstdint>
#include <string_view>

namespace rxv {

// Kernel memory figures, bytes. vmallocinfo = sum of the sizes in /proc/vmallocinfo
// (readable by root only; has_vmallocinfo false when it could not be read).
struct KernelMemory {
  std::uint64_t mem_free = 0, slab = 0, vmalloc_used = 0, vmallocinfo = 0;
  bool has_meminfo = false, has_vmallocinfo = false;
};
// Pure: from /proc/meminfo and /proc/vmallocinfo texts ("" = unknown).
KernelMemory parse_kernel_memory(std::string_view meminfo, std::string_view vmallocinfo);
KernelMemory read_kernel_memory();  // reads /proc

}  // namespace rxv
