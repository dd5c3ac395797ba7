// The allocator shim, for an AddressSanitizer build only (scripts/asan_shim.sh): native/shim.cpp
// unchanged, with its interposed functions renamed, behind uninstrumented entry points, and its
// glibc allocator calls sent to ASan's allocator.
//
// Why: the shim must come before libasan in the symbol search order (else ASan's malloc
// shadows it), so libasan initialises after the shim's malloc is already in use: libasan's
// own start-up (dlsym) calls malloc. Instrumented code run before ASan has mapped its shadow
// memory crashes. So each entry point here is built without instrumentation and, until ASan is
// up (this library's constructor), goes straight to glibc; after that it runs the shim's own,
// instrumented code, which allocates from ASan (redzones, quarantine): every block the program
// allocates, and the shim's sample buffer, is checked. Blocks from before that moment stay
// glibc's (ownership decides where a block goes back) and are not counted (a few KB; the
// footprint is off by at most that much, never the deltas between samples).
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

// The shim's calls to glibc's allocator, sent to ASan's (from the shim's own code only).
extern "C" {
void* __interceptor_malloc(size_t);
void __interceptor_free(void*);
void* __interceptor_calloc(size_t, size_t);
void* __interceptor_realloc(void*, size_t);
void* __interceptor_memalign(size_t, size_t);
void* __interceptor_valloc(size_t);
void* __interceptor_pvalloc(size_t);
int __sanitizer_get_ownership(const void*);
size_t __sanitizer_get_allocated_size(const void*);
void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

#define HIDDEN extern "C" __attribute__((visibility("hidden")))
HIDDEN void asan_free(void* p) {
  if (__sanitizer_get_ownership(p)) {
    __interceptor_free(p);
  } else {
    __libc_free(p);  // allocated before ASan was up
  }
}
HIDDEN void* asan_realloc(void* p, size_t n) {
  if (p && !__sanitizer_get_ownership(p)) return __libc_realloc(p, n);
  return __interceptor_realloc(p, n);
}
// glibc's, for blocks from before ASan was up (this library exports its own, below).
using UsableFn = size_t (*)(void*);
UsableFn glibc_usable_size = nullptr;
HIDDEN size_t asan_usable_size(void* p) {
  if (__sanitizer_get_ownership(p)) return __sanitizer_get_allocated_size(p);
  if (!glibc_usable_size) {
    glibc_usable_size = reinterpret_cast<UsableFn>(dlsym(RTLD_NEXT, "malloc_usable_size"));
  }
  return p && glibc_usable_size ? glibc_usable_size(p) : 0;
}

#define malloc_usable_size shim_malloc_usable_size
#define SHIM_LABEL(name)

#define malloc shim_malloc
#define free shim_free
#define calloc shim_calloc
#define realloc shim_realloc
#define reallocarray shim_reallocarray
#define posix_memalign shim_posix_memalign
#define aligned_alloc shim_aligned_alloc
#define memalign shim_memalign
#define valloc shim_valloc
#define pvalloc shim_pvalloc
#define memcpy shim_memcpy
#define memmove shim_memmove
#define mempcpy shim_mempcpy
#define wmemcpy shim_wmemcpy
#include "shim.cpp"
#undef malloc
#undef free
#undef calloc
#undef realloc
#undef reallocarray
#undef posix_memalign
#undef aligned_alloc
#undef memalign
#undef valloc
#undef pvalloc
#undef memcpy
#undef memmove
#undef mempcpy
#undef wmemcpy
#undef malloc_usable_size

#define ENTRY extern "C" __attribute__((visibility("default"), no_sanitize_address))

namespace {
int asan_up = 0;  // set once ASan (a dependency, so initialised first) and the shim are ready

// The shim's allocator calls go to ASan's allocator (blocks from before: back to glibc).
__attribute__((constructor(65535))) void mark_asan_up() {
  resolve_libc();  // the copy functions; then the allocator, replaced
  libc.next_malloc = __interceptor_malloc;
  libc.next_free = asan_free;
  libc.next_calloc = __interceptor_calloc;
  libc.next_realloc = asan_realloc;
  libc.next_memalign = __interceptor_memalign;
  libc.next_valloc = __interceptor_valloc;
  libc.next_pvalloc = __interceptor_pvalloc;
  libc.next_usable = asan_usable_size;
  asan_up = 1;
}

__attribute__((no_sanitize_address)) void* plain_copy(void* dst, const void* src, size_t n) {
  volatile unsigned char* d = static_cast<unsigned char*>(dst);
  const volatile unsigned char* s = static_cast<const unsigned char*>(src);
  if (d < s) {
    for (size_t i = 0; i < n; i++) d[i] = s[i];
  } else {
    for (size_t i = n; i > 0; i--) d[i - 1] = s[i - 1];
  }
  return dst;
}
}  // namespace

ENTRY void* malloc(size_t n) __THROW {
  return asan_up ? shim_malloc(n) : __libc_malloc(n);
}
ENTRY void free(void* p) __THROW {
  if (asan_up) {
    shim_free(p);
  } else {
    __libc_free(p);
  }
}
ENTRY void* calloc(size_t k, size_t n) __THROW {
  return asan_up ? shim_calloc(k, n) : __libc_calloc(k, n);
}
ENTRY void* realloc(void* p, size_t n) __THROW {
  return asan_up ? shim_realloc(p, n) : __libc_realloc(p, n);
}
ENTRY void* reallocarray(void* p, size_t k, size_t n) __THROW {
  return shim_reallocarray(p, k, n);  // only ever called after start-up
}
ENTRY int posix_memalign(void** out, size_t alignment, size_t n) __THROW {
  return shim_posix_memalign(out, alignment, n);
}
ENTRY void* aligned_alloc(size_t alignment, size_t n) __THROW {
  return asan_up ? shim_aligned_alloc(alignment, n) : __libc_memalign(alignment, n);
}
ENTRY void* memalign(size_t alignment, size_t n) __THROW {
  return asan_up ? shim_memalign(alignment, n) : __libc_memalign(alignment, n);
}
ENTRY void* valloc(size_t n) __THROW { return shim_valloc(n); }
ENTRY void* pvalloc(size_t n) __THROW { return shim_pvalloc(n); }
// The program's blocks are ASan's: their usable size is ASan's too (glibc's would read garbage).
ENTRY size_t malloc_usable_size(void* p) __THROW { return asan_up ? asan_usable_size(p) : 0; }
ENTRY void* memcpy(void* dst, const void* src, size_t n) __THROW {
  return asan_up ? shim_memcpy(dst, src, n) : plain_copy(dst, src, n);
}
ENTRY void* memmove(void* dst, const void* src, size_t n) __THROW {
  return asan_up ? shim_memmove(dst, src, n) : plain_copy(dst, src, n);
}
ENTRY void* mempcpy(void* dst, const void* src, size_t n) __THROW {
  return asan_up ? shim_mempcpy(dst, src, n) : static_cast<char*>(plain_copy(dst, src, n)) + n;
}
ENTRY wchar_t* wmemcpy(wchar_t* dst, const wchar_t* src, size_t n) __THROW {
  if (!asan_up) return static_cast<wchar_t*>(plain_copy(dst, src, n * sizeof(wchar_t)));
  return shim_wmemcpy(dst, src, n);
}
extern "C" void* entry_memcpy_chk(void*, const void*, size_t, size_t) __asm__("__memcpy_chk");
extern "C" void* entry_memmove_chk(void*, const void*, size_t, size_t) __asm__("__memmove_chk");
extern "C" void* entry_mempcpy_chk(void*, const void*, size_t, size_t) __asm__("__mempcpy_chk");
extern "C" wchar_t* entry_wmemcpy_chk(wchar_t*, const wchar_t*, size_t, size_t) __asm__(
    "__wmemcpy_chk");
ENTRY void* entry_memcpy_chk(void* dst, const void* src, size_t n, size_t len) {
  return asan_up ? shim_memcpy_chk(dst, src, n, len) : plain_copy(dst, src, n);
}
ENTRY void* entry_memmove_chk(void* dst, const void* src, size_t n, size_t len) {
  return asan_up ? shim_memmove_chk(dst, src, n, len) : plain_copy(dst, src, n);
}
ENTRY void* entry_mempcpy_chk(void* dst, const void* src, size_t n, size_t len) {
  if (!asan_up) return static_cast<char*>(plain_copy(dst, src, n)) + n;
  return shim_mempcpy_chk(dst, src, n, len);
}
ENTRY wchar_t* entry_wmemcpy_chk(wchar_t* dst, const wchar_t* src, size_t n, size_t len) {
  if (!asan_up) return static_cast<wchar_t*>(plain_copy(dst, src, n * sizeof(wchar_t)));
  return shim_wmemcpy_chk(dst, src, n, len);
}
