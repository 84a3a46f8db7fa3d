#include "sys/kernel_memory.hpp"

#include <string>
#include <vector>

#include "base/number.hpp"
#include "sys/host.hpp"
#include "sys/procfs.hpp"

namespace rxv {

KernelMemory parse_kernel_memory(std::string_view meminfo, std::string_view vmallocinfo) {
  KernelMemory k;
  bool free = false, slab = false, vm = false;
  for (const auto& f : parse_meminfo_fields(meminfo)) {
    if (f.name == "MemFree") {
      k.mem_free = f.bytes;
      free = true;
    } else if (f.name == "Slab") {
      k.slab = f.bytes;
      slab = true;
    } else if (f.name == "VmallocUsed") {
      k.vmalloc_used = f.bytes;
      vm = true;
    }
  }
  k.has_meminfo = free && slab && vm;
  // "0xffffc90000000000-0xffffc90000005000   20480 func+0x1e/0x30 pages=4 vmalloc".
  // Areas already vfree()d but not yet purged (vmap frees lazily, up to 32 MiB x log2
  // CPUs) are listed as "... unpurged vm_area": not in use, so not counted.
  bool any = false;
  for (auto line : text_lines(vmallocinfo)) {
    auto w = split_ws(line);
    if (w.size() < 2 || w[0].rfind("0x", 0) != 0) continue;
    any = true;
    if (line.find("unpurged") != std::string_view::npos) continue;
    auto n = parse_uint(w[1]);
    if (!n) continue;
    const std::uint64_t v = *n;
    k.vmallocinfo += v;
  }
  k.has_vmallocinfo = any;
  return k;
}

KernelMemory read_kernel_memory() {
  return parse_kernel_memory(read_file("/proc/meminfo").value_or(""),
                             read_file("/proc/vmallocinfo").value_or(""));
}

}  // namespace rxv
