// A std::vector whose data starts on a 64-byte boundary: RopeTable's cos/sin rows and the RoPE
// kernels' per-thread cos/sin scratch (below the public rope_kernels.h, so the kernels need not
// include it).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace posenc {

// std::allocator with 64-byte alignment: cos/sin rows that never straddle a cache line.
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(std::size_t n) {
    void* p = ::operator new(n * sizeof(T), std::align_val_t{64});
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{64}); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const CacheLineAllocator<U>&) const { return false; }
};
template <typename T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace posenc
