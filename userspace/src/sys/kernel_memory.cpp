#include "sys/kernel_memory.hpp"

#include <string>
#include <vector>

#include "base/number.hpp"
#include "sys/host.hpp"
#include "sys/procfs.hpp"

namespace rxv {

namespace {

std::vector<std::string_view> text_lines(std::string_view t) {
  std::vector<std::string_view> out;
  while (!t.empty()) {
    auto n = t.find('\n');
    out.push_back(t.substr(0, n));
    if (n == std::string_view::npos) break;
    t.remove_prefix(n + 1);
  }
  return out;
}

}  // namespace

KernelMemory parse_kernel_memory(std::string_view meminfo, std::string_view vmallocinfo) {
  KernelMemory k;
  bool free = false, slab = false, vm = false;
  for (auto line : text_lines(meminfo)) {
    auto w = split_ws(line);
    if (w.size() < 2) continue;
    auto n = parse_uint(w[1]);
    if (!n) continue;
    const std::uint64_t v = *n;
    std::uint64_t mul = (w.size() >= 3 && w[2] == "kB") ? 1024 : 1;
    if (w[0] == "MemFree:") {
      k.mem_free = v * mul;
      free = true;
    } else if (w[0] == "Slab:") {
      k.slab = v * mul;
      slab = true;
    } else if (w[0] == "VmallocUsed:") {
      k.vmalloc_used = v * mul;
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
