// The allocator shim, preloaded with LD_PRELOAD. It knows nothing of Python.
//
// - malloc & co. forward to glibc's exported __libc_* entry points (no dlsym bootstrap) and
//   count every block's malloc_usable_size: footprint = bytes allocated - bytes freed, exact
//   and symmetric because the same size function is used both ways. Counting runs from process
//   start so that frees of blocks allocated before arming keep the footprint right.
// - Nothing is sampled until the extension arms the shim. Then, when the footprint moves by a
//   threshold since the last sample (or passes the next leak high-water step), a sample goes
//   into a buffer that only grows (no sample is lost) and the thread raises a signal so that
//   Python's handler drains the buffer at its next bytecode boundary.
// - Memory that never reaches malloc can be counted through the arena wrappers (the extension
//   wraps Python's object arenas with them), and allocator wrappers can mark bytes as Python's.
// - memcpy/memmove count bytes per thread; every copy_step bytes make a copy sample.
// - A thread-local guard keeps the rare sampling path from re-entering itself.
// Hot paths (malloc, free, memcpy) take no lock and make no system call.
// malloc_usable_size is not interposed: blocks are glibc's own, without added headers, so
// glibc's malloc_usable_size is already right for them.
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

#include "shim_api.h"

#define EXPORT extern "C" __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

extern "C" {
void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void* __libc_valloc(size_t);
void* __libc_pvalloc(size_t);
}

namespace {

constexpr int64_t kNever = INT64_MAX;
constexpr auto relaxed = std::memory_order_relaxed;

struct ThreadState {
  int guard;          // inside the sampling path
  int python;         // inside Python's allocator (set by the python_* wrappers)
  int resolving;      // looking up the real memcpy/memmove
  uint32_t copy_epoch;
  int64_t copied;     // bytes copied since this thread's last copy sample
};
__thread ThreadState tls __attribute__((tls_model("initial-exec")));

// Counters read on every allocation, on one cache line.
struct alignas(64) Counters {
  std::atomic<int64_t> allocated{0};  // cumulative, since process start
  std::atomic<int64_t> freed{0};
  std::atomic<int64_t> python{0};
  std::atomic<int> armed{0};
  std::atomic<int64_t> threshold{kNever};
  std::atomic<int64_t> last_footprint{0};  // at the last grow/shrink sample (or arm)
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> leak_next{kNever};  // footprint that sets the next leak high-water mark
  std::atomic<int64_t> copy_step{kNever};
};
Counters g;

// The rare path.
std::atomic<int> g_lock{0};
std::atomic<int> g_in_flight{0};  // threads between the armed check and their raise()
std::atomic<int> g_tracked{0};    // live tracked allocations (free() looks only when > 0)
std::atomic<uint32_t> g_epoch{0};
std::atomic<int64_t> g_dropped{0};
std::atomic<void (*)(ShimWhere*)> g_capture{nullptr};
std::atomic<int> g_signum{0};
std::atomic<void*> g_handler{nullptr};
int64_t g_leak_step = kNever;
int64_t g_last_allocated = 0, g_last_freed = 0, g_last_python = 0;
ShimSample* g_buf = nullptr;
size_t g_len = 0, g_cap = 0;

// Leak tracking: the allocations that set high-water marks, in a fixed table of groups of four
// slots (one cache line). free() hashes once and compares four pointers, only while non-empty.
constexpr int kSlots = 1024;
constexpr int kGroup = 4;
constexpr int32_t kMaxTracked = 1 << 16;
struct Slot {
  std::atomic<uintptr_t> ptr;
  int32_t id;
};
alignas(64) Slot g_slots[kSlots];
std::atomic<uint8_t> g_freed_flags[kMaxTracked];
int32_t g_next_id = 0;

using CopyFn = void* (*)(void*, const void*, size_t);
std::atomic<CopyFn> g_memcpy{nullptr};
std::atomic<CopyFn> g_memmove{nullptr};

void lock() {
  while (g_lock.exchange(1, std::memory_order_acquire)) {
    while (g_lock.load(relaxed)) sched_yield();
  }
}
void unlock() { g_lock.store(0, std::memory_order_release); }

inline Slot* group_of(const void* p) {
  uint64_t h = (reinterpret_cast<uintptr_t>(p) >> 4) * 0x9E3779B97F4A7C15ull;
  return &g_slots[(h >> 54) & (kSlots - kGroup)];  // top 10 bits, aligned to a group
}

void untrack(const void* p) {
  Slot* group = group_of(p);
  uintptr_t want = reinterpret_cast<uintptr_t>(p);
  for (int i = 0; i < kGroup; i++) {
    uintptr_t seen = want;
    if (group[i].ptr.load(relaxed) == want &&
        group[i].ptr.compare_exchange_strong(seen, 0, std::memory_order_acq_rel)) {
      g_freed_flags[group[i].id].store(1, relaxed);
      g_tracked.fetch_sub(1, relaxed);
      return;
    }
  }
}

// Under the lock. Returns the id, or -1 when the table has no room for `p`.
int32_t track(void* p) {
  if (g_next_id >= kMaxTracked) return -1;
  Slot* group = group_of(p);
  for (int i = 0; i < kGroup; i++) {
    if (group[i].ptr.load(relaxed) == 0) {
      int32_t id = g_next_id++;
      g_freed_flags[id].store(0, relaxed);
      group[i].id = id;
      group[i].ptr.store(reinterpret_cast<uintptr_t>(p), std::memory_order_release);
      g_tracked.fetch_add(1, relaxed);
      return id;
    }
  }
  return -1;
}

void clear_tracked() {
  for (auto& slot : g_slots) slot.ptr.store(0, relaxed);
  g_tracked.store(0, relaxed);
  g_next_id = 0;
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Under the lock.
bool push(const ShimSample& sample) {
  if (g_len == g_cap) {
    size_t cap = g_cap ? g_cap * 2 : 256;
    void* grown = __libc_realloc(g_buf, cap * sizeof(ShimSample));
    if (!grown) {
      g_dropped.fetch_add(1, relaxed);
      return false;
    }
    g_buf = static_cast<ShimSample*>(grown);
    g_cap = cap;
  }
  g_buf[g_len++] = sample;
  return true;
}

// Raise the signal in this thread, only if the handler armed with is still installed and the
// signal is not blocked here: a pending signal could otherwise outlive the handler.
void nudge() {
  int sig = g_signum.load(relaxed);
  if (sig <= 0) return;
  struct sigaction current;
  if (sigaction(sig, nullptr, &current) != 0) return;
  if (reinterpret_cast<void*>(current.sa_handler) != g_handler.load(relaxed)) return;
  sigset_t blocked;
  if (pthread_sigmask(SIG_BLOCK, nullptr, &blocked) != 0 || sigismember(&blocked, sig)) return;
  raise(sig);
}

// Enter the rare path: returns false when it must not run (re-entered, or not armed).
bool enter_rare() {
  if (tls.guard) return false;
  tls.guard = 1;
  g_in_flight.fetch_add(1, std::memory_order_seq_cst);
  if (g.armed.load(std::memory_order_seq_cst)) return true;
  g_in_flight.fetch_sub(1, std::memory_order_seq_cst);
  tls.guard = 0;
  return false;
}

void leave_rare(bool emitted) {
  if (emitted) nudge();
  g_in_flight.fetch_sub(1, std::memory_order_seq_cst);
  tls.guard = 0;
}

// The Python line is taken here, in the sampling thread, before anything else can run: a
// signal handler would only run at the main thread's next bytecode boundary, on another line.
void capture_where(ShimWhere* where) {
  where->depth = 0;
  where->owned = 0;
  auto capture = g_capture.load(std::memory_order_acquire);
  if (capture) capture(where);
}

ShimSample base_sample(int32_t kind, int64_t footprint) {
  ShimSample s;
  memset(&s, 0, offsetof(ShimSample, where));
  s.kind = kind;
  s.tracked_id = -1;
  s.footprint = footprint;
  s.time_ns = now_ns();
  s.thread = static_cast<uint64_t>(pthread_self());
  return s;
}

// `p`: the allocation that triggered it (nullptr for a free).
__attribute__((noinline)) void sample_footprint(void* p) {
  int saved_errno = errno;
  if (!enter_rare()) return;
  lock();
  int64_t allocated = g.allocated.load(relaxed);
  int64_t freed = g.freed.load(relaxed);
  int64_t python = g.python.load(relaxed);
  int64_t footprint = allocated - freed;
  int64_t last = g.last_footprint.load(relaxed);
  int64_t threshold = g.threshold.load(relaxed);
  bool emit = footprint - last >= threshold || last - footprint >= threshold;
  int32_t tracked = -1;
  if (p && footprint >= g.leak_next.load(relaxed)) {
    tracked = track(p);
    g.leak_next.store(footprint + g_leak_step, relaxed);
    emit = true;
  }
  if (emit) {
    ShimSample s = base_sample(footprint >= last ? SHIM_GROW : SHIM_SHRINK, footprint);
    s.tracked_id = tracked;
    s.alloc_bytes = allocated - g_last_allocated;
    s.free_bytes = freed - g_last_freed;
    s.python_bytes = python - g_last_python;
    capture_where(&s.where);  // under the lock: it neither allocates nor blocks
    push(s);  // a lost sample keeps its code references: a negligible leak, counted in dropped
    g_last_allocated = allocated;
    g_last_freed = freed;
    g_last_python = python;
    g.last_footprint.store(footprint, relaxed);
  }
  unlock();
  leave_rare(emit);
  errno = saved_errno;
}

__attribute__((noinline)) void sample_copy(size_t n) {
  uint32_t epoch = g_epoch.load(relaxed);
  if (tls.copy_epoch != epoch) {  // bytes counted before this arm() are not this test's
    tls.copy_epoch = epoch;
    tls.copied = static_cast<int64_t>(n);
  }
  int64_t step = g.copy_step.load(relaxed);
  if (tls.copied < step) return;
  int saved_errno = errno;
  if (!enter_rare()) return;
  int64_t charged = tls.copied / step * step;  // whole steps: the remainder carries over
  tls.copied -= charged;
  ShimSample s = base_sample(SHIM_COPY, g.allocated.load(relaxed) - g.freed.load(relaxed));
  s.copy_bytes = charged;
  capture_where(&s.where);
  lock();
  push(s);
  unlock();
  leave_rare(true);
  errno = saved_errno;
}

inline void count_alloc_sized(void* p, int64_t size) {
  int64_t allocated = g.allocated.fetch_add(size, relaxed) + size;
  if (tls.python) g.python.fetch_add(size, relaxed);
  if (LIKELY(!g.armed.load(relaxed))) return;
  int64_t footprint = allocated - g.freed.load(relaxed);
  if (footprint > g.peak.load(relaxed)) g.peak.store(footprint, relaxed);
  if (UNLIKELY(footprint - g.last_footprint.load(relaxed) >= g.threshold.load(relaxed) ||
               footprint >= g.leak_next.load(relaxed))) {
    sample_footprint(p);
  }
}

inline void count_alloc(void* p) {
  if (LIKELY(p != nullptr)) count_alloc_sized(p, static_cast<int64_t>(malloc_usable_size(p)));
}

// Before the block goes back to its allocator (its address may be reused at once).
inline void forget(void* p) {
  if (UNLIKELY(g_tracked.load(relaxed) != 0)) untrack(p);
}

inline int64_t before_free(void* p) {
  forget(p);
  return static_cast<int64_t>(malloc_usable_size(p));
}

inline void count_free(int64_t size) {
  int64_t freed = g.freed.fetch_add(size, relaxed) + size;
  if (LIKELY(!g.armed.load(relaxed))) return;
  int64_t footprint = g.allocated.load(relaxed) - freed;
  if (UNLIKELY(g.last_footprint.load(relaxed) - footprint >= g.threshold.load(relaxed))) {
    sample_footprint(nullptr);
  }
}

inline void count_copy(size_t n) {
  tls.copied += static_cast<int64_t>(n);
  if (UNLIKELY(tls.copied >= g.copy_step.load(relaxed))) sample_copy(n);
}

// Used while dlsym looks up the real functions (dlsym may itself copy).
void* byte_copy(void* dst, const void* src, size_t n) {
  volatile unsigned char* d = static_cast<unsigned char*>(dst);
  const volatile unsigned char* s = static_cast<const unsigned char*>(src);
  if (d < s) {
    for (size_t i = 0; i < n; i++) d[i] = s[i];
  } else {
    for (size_t i = n; i > 0; i--) d[i - 1] = s[i - 1];
  }
  return dst;
}

__attribute__((noinline)) CopyFn resolve_slow(std::atomic<CopyFn>& slot, const char* name) {
  if (tls.resolving) return byte_copy;
  tls.resolving = 1;
  CopyFn fn = reinterpret_cast<CopyFn>(dlsym(RTLD_NEXT, name));
  tls.resolving = 0;
  if (!fn) return byte_copy;
  slot.store(fn, relaxed);
  return fn;
}

inline CopyFn resolve(std::atomic<CopyFn>& slot, const char* name) {
  CopyFn fn = slot.load(relaxed);
  return LIKELY(fn != nullptr) ? fn : resolve_slow(slot, name);
}

void after_fork_in_child() {
  // The child's only thread is the one that forked: nothing is armed, no lock is held, and
  // the parent's samples are not the child's (the buffer is dropped, not freed: it may be torn).
  g.armed.store(0, relaxed);
  g.threshold.store(kNever, relaxed);
  g.leak_next.store(kNever, relaxed);
  g.copy_step.store(kNever, relaxed);
  g_signum.store(0, relaxed);
  g_lock.store(0, relaxed);
  g_in_flight.store(0, relaxed);
  g_buf = nullptr;
  g_len = g_cap = 0;
  clear_tracked();
  tls.guard = 0;
}

__attribute__((constructor)) void shim_init() {
  resolve(g_memcpy, "memcpy");
  resolve(g_memmove, "memmove");
  pthread_atfork(nullptr, nullptr, after_fork_in_child);
}

// -- the API ----------------------------------------------------------------------------------
void api_arm(int64_t threshold, int64_t leak_step, int64_t copy_step, int signum,
             void* handler) {
  lock();
  clear_tracked();
  g_len = 0;  // samples of an earlier, never-drained run
  g_leak_step = leak_step;
  g_last_allocated = g.allocated.load(relaxed);
  g_last_freed = g.freed.load(relaxed);
  g_last_python = g.python.load(relaxed);
  int64_t footprint = g_last_allocated - g_last_freed;
  g.last_footprint.store(footprint, relaxed);
  g.peak.store(footprint, relaxed);
  g.leak_next.store(footprint + leak_step, relaxed);
  g.threshold.store(threshold, relaxed);
  uint32_t epoch = g_epoch.fetch_add(1, relaxed) + 1;
  tls.copy_epoch = epoch;
  tls.copied = 0;
  g_signum.store(signum, relaxed);
  g_handler.store(handler, relaxed);
  unlock();
  g.copy_step.store(copy_step, relaxed);
  g.armed.store(1, std::memory_order_seq_cst);
}

void api_disarm() {
  g.armed.store(0, std::memory_order_seq_cst);
  g.copy_step.store(kNever, relaxed);
  g.leak_next.store(kNever, relaxed);
  while (g_in_flight.load(std::memory_order_seq_cst) != 0) sched_yield();
}

int api_armed() { return g.armed.load(relaxed); }

void api_set_capture(void (*capture)(ShimWhere*)) {
  g_capture.store(capture, std::memory_order_release);
}

ShimSample* api_take_samples(size_t* count) {
  lock();
  ShimSample* samples = g_buf;
  *count = g_len;
  g_buf = nullptr;
  g_len = g_cap = 0;
  unlock();
  return samples;
}

void api_release_samples(ShimSample* samples) { __libc_free(samples); }
int64_t api_footprint() { return g.allocated.load(relaxed) - g.freed.load(relaxed); }
int64_t api_peak() { return g.peak.load(relaxed); }
int64_t api_dropped() { return g_dropped.load(relaxed); }

int api_leak_freed(int32_t id) {
  if (id < 0 || id >= kMaxTracked) return 0;
  return g_freed_flags[id].load(relaxed);
}

void* python_malloc(void* ctx, size_t size) {
  auto* prev = static_cast<ShimAllocator*>(ctx);
  int outer = tls.python;
  tls.python = 1;
  void* p = prev->malloc(prev->ctx, size);
  tls.python = outer;
  return p;
}

void* python_calloc(void* ctx, size_t nelem, size_t elsize) {
  auto* prev = static_cast<ShimAllocator*>(ctx);
  int outer = tls.python;
  tls.python = 1;
  void* p = prev->calloc(prev->ctx, nelem, elsize);
  tls.python = outer;
  return p;
}

void* python_realloc(void* ctx, void* ptr, size_t size) {
  auto* prev = static_cast<ShimAllocator*>(ctx);
  int outer = tls.python;
  tls.python = 1;
  void* p = prev->realloc(prev->ctx, ptr, size);
  tls.python = outer;
  return p;
}

void python_free(void* ctx, void* ptr) {
  auto* prev = static_cast<ShimAllocator*>(ctx);
  prev->free(prev->ctx, ptr);
}

// Memory an allocator gets without malloc (Python's object arenas come from mmap): counted here,
// as Python's, with the size the allocator gives back on free.
void* python_arena_alloc(void* ctx, size_t size) {
  auto* prev = static_cast<ShimArenaAllocator*>(ctx);
  void* p = prev->alloc(prev->ctx, size);
  if (p) {
    int outer = tls.python;
    tls.python = 1;
    count_alloc_sized(p, static_cast<int64_t>(size));
    tls.python = outer;
  }
  return p;
}

void python_arena_free(void* ctx, void* ptr, size_t size) {
  auto* prev = static_cast<ShimArenaAllocator*>(ctx);
  if (ptr) forget(ptr);
  prev->free(prev->ctx, ptr, size);
  if (ptr) count_free(static_cast<int64_t>(size));
}

ShimApi g_api = {
    PYTEST_SCALENE_SHIM_ABI, api_arm,        api_disarm,     api_armed,
    api_take_samples,        api_release_samples, api_footprint, api_peak,
    api_leak_freed,          api_dropped,    python_malloc,  python_calloc,
    python_realloc,          python_free,    python_arena_alloc, python_arena_free,
    api_set_capture,
};

}  // namespace

EXPORT ShimApi* pytest_scalene_shim_api() { return &g_api; }

// -- the interposed functions -----------------------------------------------------------------
EXPORT void* malloc(size_t size) __THROW {
  void* p = __libc_malloc(size);
  count_alloc(p);
  return p;
}

EXPORT void free(void* p) __THROW {
  if (!p) return;
  int64_t size = before_free(p);
  __libc_free(p);
  count_free(size);
}

EXPORT void* calloc(size_t nelem, size_t elsize) __THROW {
  void* p = __libc_calloc(nelem, elsize);
  count_alloc(p);
  return p;
}

EXPORT void* realloc(void* old, size_t size) __THROW {
  // A moved or resized block counts as freed for leak tracking (conservative).
  int64_t old_size = old ? before_free(old) : 0;
  void* p = __libc_realloc(old, size);
  if (p || (old && size == 0)) {  // glibc's realloc(p, 0) frees p and returns NULL
    if (old) count_free(old_size);
    count_alloc(p);
  }
  return p;
}

EXPORT void* reallocarray(void* old, size_t nelem, size_t elsize) __THROW {
  size_t size;
  if (__builtin_mul_overflow(nelem, elsize, &size)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc(old, size);
}

EXPORT int posix_memalign(void** out, size_t alignment, size_t size) __THROW {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0 || alignment == 0) {
    return EINVAL;
  }
  int saved_errno = errno;
  void* p = __libc_memalign(alignment, size);
  errno = saved_errno;
  if (!p) return ENOMEM;
  count_alloc(p);
  *out = p;
  return 0;
}

EXPORT void* aligned_alloc(size_t alignment, size_t size) __THROW {
  void* p = __libc_memalign(alignment, size);
  count_alloc(p);
  return p;
}

EXPORT void* memalign(size_t alignment, size_t size) __THROW {
  void* p = __libc_memalign(alignment, size);
  count_alloc(p);
  return p;
}

EXPORT void* valloc(size_t size) __THROW {
  void* p = __libc_valloc(size);
  count_alloc(p);
  return p;
}

EXPORT void* pvalloc(size_t size) __THROW {
  void* p = __libc_pvalloc(size);
  count_alloc(p);
  return p;
}

EXPORT void* memcpy(void* dst, const void* src, size_t n) __THROW {
  count_copy(n);
  return resolve(g_memcpy, "memcpy")(dst, src, n);
}

EXPORT void* memmove(void* dst, const void* src, size_t n) __THROW {
  count_copy(n);
  return resolve(g_memmove, "memmove")(dst, src, n);
}
