// Host arrays that a device copies to and from every step (the parameters the pulls fill, the
// gradient buffer): page-aligned and a whole number of pages long, so that pinning one
// (Network::PinHostMemory, which page-locks whole pages) never takes in, or collides with the
// pinning of, memory next to it.
#ifndef R2SP_COMMON_HOST_ARRAY_H_
#define R2SP_COMMON_HOST_ARRAY_H_

#include <unistd.h>

#include <cstddef>
#include <new>
#include <vector>

namespace r2sp {

template <typename T>
struct PageAlignedAllocator {
  using value_type = T;
  PageAlignedAllocator() = default;
  template <typename U>
  PageAlignedAllocator(const PageAlignedAllocator<U>&) {}  // NOLINT: allocators convert

  static size_t Page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
  T* allocate(size_t n) {
    const size_t page = Page();
    const size_t bytes = (n * sizeof(T) + page - 1) / page * page;
    return static_cast<T*>(::operator new(bytes, std::align_val_t(page)));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(Page())); }
  template <typename U>
  bool operator==(const PageAlignedAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const PageAlignedAllocator<U>&) const { return false; }
};

using HostArray = std::vector<float, PageAlignedAllocator<float>>;

}  // namespace r2sp

#endif  // R2SP_COMMON_HOST_ARRAY_H_
