// The allocator shim, preloaded with LD_PRELOAD. It knows nothing of Python.
//
// - malloc & co. forward to the next definition after the shim (dlsym(RTLD_NEXT)): glibc's, or
//   the allocator the user preloaded after it (jemalloc, tcmalloc, mimalloc), which then serves
//   every block, as it would unprofiled. Each block is counted with that same allocator's
//   malloc_usable_size; no allocator function is ever called unqualified (a name bound in the
//   global scope could be another allocator's, handed blocks it does not own): footprint = bytes allocated - bytes freed, exact
//   and symmetric because the same size function is used both ways. Counting runs from process
//   start so that frees of blocks allocated before arming keep the footprint right.
// - Nothing is sampled until the extension arms the shim. Then, when the footprint moves by a
//   threshold (drawn around its mean after each sample) since the last sample, or passes the
//   next leak high-water step, a sample goes into a buffer that only grows (no sample is lost)
//   and the thread raises a signal so that Python's handler drains the buffer at its next
//   bytecode boundary.
// - Memory that never reaches malloc can be counted through the arena wrappers (the extension
//   wraps Python's object arenas with them), and allocator wrappers can mark bytes as Python's.
// - memcpy/memmove count bytes per thread; every copy_step bytes make a copy sample.
// - A thread-local guard keeps the rare sampling path from re-entering itself.
// Hot paths (malloc, free, memcpy) take no lock and make no system call.
// Allocations made while the next functions are being looked up (dlsym may allocate) come from
// a small static buffer, never freed.
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
#include <wchar.h>

#include <atomic>

#include "shim_api.h"

#define EXPORT extern "C" __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace {

constexpr int64_t kNever = INT64_MAX;
constexpr auto relaxed = std::memory_order_relaxed;

struct ThreadState {
  int guard;          // inside the sampling path
  int python;         // inside Python's allocator (set by the python_* wrappers)
  int resolving;      // looking up the next allocator and copy functions
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
// The threshold is drawn afresh after each grow/shrink sample, uniformly in [T/2, 3T/2): with a
// fixed T, a periodic allocation pattern (4 MB, 1 MB, 4 MB, ...) crosses it on the same
// allocation every time and that line is charged everything. A random phase picks the crossing
// allocation in proportion to its size. Seeded at arm(): one run's draws are reproducible.
int64_t g_mean_threshold = kNever;
uint64_t g_rng = 0;  // xorshift64 state, under the lock
int64_t g_last_allocated = 0, g_last_freed = 0, g_last_python = 0;
ShimSample* g_buf = nullptr;
size_t g_len = 0, g_cap = 0;

// Leak tracking: the allocations that set high-water marks, in a fixed table of groups of four
// slots (one cache line). free() hashes once and compares four pointers, only while non-empty.
// A slot holds the pointer and its id in one word (pointer << 16 | id), so that the thread whose
// compare-and-swap empties it gets the id it emptied, never that of a later occupant.
constexpr int kSlots = 1024;
constexpr int kGroup = 4;
constexpr int kIdBits = 16;
constexpr int32_t kMaxTracked = 1 << kIdBits;
constexpr uintptr_t kMaxTrackedPointer = uintptr_t{1} << (64 - kIdBits);
struct Slot {
  std::atomic<uint64_t> entry;  // 0: empty
};
alignas(64) Slot g_slots[kSlots];
std::atomic<uint8_t> g_freed_flags[kMaxTracked];
int32_t g_next_id = 0;                // under the lock
std::atomic<int> g_untracking{0};     // frees between emptying a slot and flagging its id

using CopyFn = void* (*)(void*, const void*, size_t);
using CheckedCopyFn = void* (*)(void*, const void*, size_t, size_t);
using WideCopyFn = wchar_t* (*)(wchar_t*, const wchar_t*, size_t);
using CheckedWideCopyFn = wchar_t* (*)(wchar_t*, const wchar_t*, size_t, size_t);

// The next allocator's and copy functions, looked up explicitly (see the top of the file).
struct Libc {
  void* (*next_malloc)(size_t);
  void (*next_free)(void*);
  void* (*next_calloc)(size_t, size_t);
  void* (*next_realloc)(void*, size_t);
  void* (*next_memalign)(size_t, size_t);
  void* (*next_valloc)(size_t);
  void* (*next_pvalloc)(size_t);
  size_t (*next_usable)(void*);
  CopyFn next_memcpy, next_memmove, next_mempcpy;
  CheckedCopyFn next_memcpy_chk, next_memmove_chk, next_mempcpy_chk;
  WideCopyFn next_wmemcpy;
  CheckedWideCopyFn next_wmemcpy_chk;
};
Libc libc;
std::atomic<int> g_libc_ready{0};

// Allocations made while looking them up (dlsym may allocate): a bump buffer, with the
// size in a 16-byte header; never freed, never counted.
constexpr size_t kBootBytes = 1 << 16;
alignas(16) unsigned char g_boot[kBootBytes];
std::atomic<size_t> g_boot_used{0};

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

inline uint64_t pointer_of(uint64_t entry) { return entry >> kIdBits; }

void untrack(const void* p) {
  Slot* group = group_of(p);
  uint64_t want = reinterpret_cast<uintptr_t>(p);
  for (int i = 0; i < kGroup; i++) {
    uint64_t seen = group[i].entry.load(relaxed);
    if (seen == 0 || pointer_of(seen) != want) continue;
    // Counted before the swap, so that a re-arm (clear_tracked) waits for the flag below: the
    // id could otherwise be handed out again and flagged freed by this late free.
    g_untracking.fetch_add(1, std::memory_order_seq_cst);
    if (group[i].entry.compare_exchange_strong(seen, 0, std::memory_order_seq_cst)) {
      g_freed_flags[seen & (kMaxTracked - 1)].store(1, relaxed);
      g_tracked.fetch_sub(1, relaxed);
      g_untracking.fetch_sub(1, std::memory_order_seq_cst);
      return;
    }
    g_untracking.fetch_sub(1, std::memory_order_seq_cst);
  }
}

// Under the lock. Returns the id, or -1 when the table has no room for `p`.
int32_t track(void* p) {
  uintptr_t address = reinterpret_cast<uintptr_t>(p);
  if (g_next_id >= kMaxTracked || address >= kMaxTrackedPointer) return -1;
  Slot* group = group_of(p);
  for (int i = 0; i < kGroup; i++) {
    if (group[i].entry.load(relaxed) == 0) {  // only track() fills slots, under the lock
      int32_t id = g_next_id++;
      g_freed_flags[id].store(0, relaxed);
      // Counted before it can be seen: an untrack of it then never takes the count below 0.
      g_tracked.fetch_add(1, relaxed);
      group[i].entry.store((uint64_t{address} << kIdBits) | static_cast<uint64_t>(id),
                           std::memory_order_seq_cst);
      return id;
    }
  }
  return -1;
}

// Under the lock. Each entry is taken out once, by this or by a free, and counted down once.
void clear_tracked() {
  int cleared = 0;
  for (auto& slot : g_slots) {
    if (slot.entry.load(relaxed) != 0 && slot.entry.exchange(0, std::memory_order_seq_cst) != 0) {
      cleared++;
    }
  }
  g_tracked.fetch_sub(cleared, relaxed);
  // A free that emptied a slot before the exchanges may not have flagged its id yet.
  while (g_untracking.load(std::memory_order_seq_cst) != 0) sched_yield();
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
    void* grown = libc.next_realloc(g_buf, cap * sizeof(ShimSample));
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

// Under the lock.
int64_t next_threshold() {
  int64_t mean = g_mean_threshold;
  if (mean == kNever || mean < 2) return mean;
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return mean / 2 + static_cast<int64_t>(g_rng % static_cast<uint64_t>(mean));
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

// The peak as a running max: a compare-and-swap loop, not a last-writer-wins store.
inline void raise_peak(int64_t footprint) {
  int64_t peak = g.peak.load(relaxed);
  while (UNLIKELY(footprint > peak) && !g.peak.compare_exchange_weak(peak, footprint, relaxed)) {
  }
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
    // Another thread may have counted its allocation (read above) and not yet raised the peak:
    // a sample never shows a footprint above the peak (the stress test caught one).
    raise_peak(footprint);
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
    g.threshold.store(next_threshold(), relaxed);
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
  raise_peak(footprint);
  if (UNLIKELY(footprint - g.last_footprint.load(relaxed) >= g.threshold.load(relaxed) ||
               footprint >= g.leak_next.load(relaxed))) {
    sample_footprint(p);
  }
}

inline void count_alloc(void* p) {
  if (LIKELY(p != nullptr)) count_alloc_sized(p, static_cast<int64_t>(libc.next_usable(p)));
}

// Before the block goes back to its allocator (its address may be reused at once).
inline void forget(void* p) {
  if (UNLIKELY(g_tracked.load(relaxed) != 0)) untrack(p);
}

inline int64_t before_free(void* p) {
  forget(p);
  return static_cast<int64_t>(libc.next_usable(p));
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

// Used before the copy functions are known (dlsym may itself copy).
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

inline bool in_boot(const void* p) {
  auto* b = static_cast<const unsigned char*>(p);
  return UNLIKELY(b >= g_boot && b < g_boot + kBootBytes);
}

void* boot_alloc(size_t size) {
  size_t need = 16 + ((size + 15) & ~static_cast<size_t>(15));
  size_t at = g_boot_used.fetch_add(need, relaxed);
  if (at + need > kBootBytes) return nullptr;
  *reinterpret_cast<size_t*>(g_boot + at) = size;
  return g_boot + at + 16;  // zero already: the buffer is static and never reused
}

size_t boot_size(const void* p) {
  return *reinterpret_cast<const size_t*>(static_cast<const unsigned char*>(p) - 16);
}

using Lookup = void* (*)(const char*);

template <typename Fn>
void find(Lookup lookup, Fn& slot, const char* name) {
  slot = reinterpret_cast<Fn>(lookup(name));
}

// The next allocator's and copy functions through `lookup`; false when one that every glibc has
// is missing.
bool look_up(Libc& found, Lookup lookup) {
  memset(&found, 0, sizeof found);
  find(lookup, found.next_malloc, "malloc");
  find(lookup, found.next_free, "free");
  find(lookup, found.next_calloc, "calloc");
  find(lookup, found.next_realloc, "realloc");
  find(lookup, found.next_memalign, "memalign");
  find(lookup, found.next_valloc, "valloc");
  find(lookup, found.next_pvalloc, "pvalloc");
  find(lookup, found.next_usable, "malloc_usable_size");
  find(lookup, found.next_memcpy, "memcpy");
  find(lookup, found.next_memmove, "memmove");
  find(lookup, found.next_mempcpy, "mempcpy");
  find(lookup, found.next_memcpy_chk, "__memcpy_chk");
  find(lookup, found.next_memmove_chk, "__memmove_chk");
  find(lookup, found.next_mempcpy_chk, "__mempcpy_chk");
  find(lookup, found.next_wmemcpy, "wmemcpy");
  find(lookup, found.next_wmemcpy_chk, "__wmemcpy_chk");
  return found.next_malloc && found.next_free && found.next_calloc && found.next_realloc &&
         found.next_memalign && found.next_valloc && found.next_pvalloc && found.next_usable &&
         found.next_memcpy && found.next_memmove;
}

// Looks the next definitions up. False while a lookup is under way in this thread (the caller
// then uses the boot buffer or byte_copy).
__attribute__((noinline)) bool resolve_libc() {
  if (g_libc_ready.load(std::memory_order_acquire)) return true;
  if (tls.resolving) return false;
  tls.resolving = 1;
  Libc found;
  if (!look_up(found, [](const char* name) { return dlsym(RTLD_NEXT, name); })) {
    static const char msg[] = "pytest-scalene shim: the next allocator was not found; aborting\n";
    (void)!write(2, msg, sizeof msg - 1);
    abort();  // the plugin only preloads the shim under glibc, which has them all
  }
  libc = found;  // still resolving: a memcpy the compiler makes of this copies bytewise
  g_libc_ready.store(1, std::memory_order_release);
  tls.resolving = 0;
  return true;
}

inline bool ready() {
  return LIKELY(g_libc_ready.load(std::memory_order_acquire)) || resolve_libc();
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
  g_untracking.store(0, relaxed);  // frees of other threads, which do not exist here
  clear_tracked();
  g_tracked.store(0, relaxed);
  tls.guard = 0;
}

__attribute__((constructor)) void shim_init() {
  resolve_libc();
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
  g_mean_threshold = threshold;
  g_rng = 0x9E3779B97F4A7C15ull;
  g.threshold.store(next_threshold(), relaxed);
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

void api_release_samples(ShimSample* samples) { libc.next_free(samples); }
int64_t api_footprint() { return g.allocated.load(relaxed) - g.freed.load(relaxed); }
int64_t api_peak() { return g.peak.load(relaxed); }
int64_t api_dropped() { return g_dropped.load(relaxed); }

int api_leak_freed(int32_t id) {
  if (id < 0 || id >= kMaxTracked) return 0;
  return g_freed_flags[id].load(relaxed);
}

// Python's allocator domains (hook_python_domain): the allocator each had, and the largest
// request it serves without reaching malloc. pymalloc serves requests of up to 512 bytes from its
// arenas (counted, as Python's, by the arena wrappers below), so marking them is wasted work on
// Python's most frequent call: those pass straight through. The limit is found by a probe, not
// assumed: with PYTHONMALLOC=malloc or the debug hooks (which add a header) small requests reach
// malloc, and every request is marked (limit 0). pymalloc's own bookkeeping (its arena table)
// then counts as native: a few KB.
constexpr int kPythonDomains = 2;
constexpr size_t kPymallocSmall = 512;
ShimAllocator g_python_prev[kPythonDomains];
size_t g_python_small[kPythonDomains];

template <int D>
void* python_malloc(void* ctx, size_t size) {
  const ShimAllocator& prev = g_python_prev[D];
  if (size - 1 < g_python_small[D]) return prev.malloc(ctx, size);  // 0 reaches malloc
  int outer = tls.python;
  tls.python = 1;
  void* p = prev.malloc(ctx, size);
  tls.python = outer;
  return p;
}

template <int D>
void* python_calloc(void* ctx, size_t nelem, size_t elsize) {
  const ShimAllocator& prev = g_python_prev[D];
  if (elsize != 0 && nelem != 0 && nelem <= g_python_small[D] / elsize) {
    return prev.calloc(ctx, nelem, elsize);
  }
  int outer = tls.python;
  tls.python = 1;
  void* p = prev.calloc(ctx, nelem, elsize);
  tls.python = outer;
  return p;
}

// Always marked: pymalloc hands a block it did not allocate (a large one) to realloc whatever
// the new size.
template <int D>
void* python_realloc(void* ctx, void* ptr, size_t size) {
  const ShimAllocator& prev = g_python_prev[D];
  int outer = tls.python;
  tls.python = 1;
  void* p = prev.realloc(ctx, ptr, size);
  tls.python = outer;
  return p;
}

// Whether a request of kPymallocSmall bytes through slot D's allocator reaches malloc: counted
// as Python's by this thread alone (no other thread is inside a wrapper yet).
template <int D>
bool small_requests_reach_malloc() {
  const ShimAllocator& prev = g_python_prev[D];
  int64_t before = g.python.load(relaxed);
  void* p = python_malloc<D>(prev.ctx, kPymallocSmall);
  bool reached = g.python.load(relaxed) != before;
  prev.free(prev.ctx, p);
  return reached;
}

template <int D>
void hook_domain(ShimAllocator* allocator) {
  g_python_prev[D] = *allocator;
  g_python_small[D] = 0;  // the probe's request is marked, so that it shows if it reached malloc
  g_python_small[D] = small_requests_reach_malloc<D>() ? 0 : kPymallocSmall;
  allocator->malloc = python_malloc<D>;
  allocator->calloc = python_calloc<D>;
  allocator->realloc = python_realloc<D>;
}

void api_hook_python_domain(int slot, ShimAllocator* allocator) {
  if (slot == 0) hook_domain<0>(allocator);
  if (slot == 1) hook_domain<1>(allocator);
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
    api_leak_freed,          api_dropped,    api_hook_python_domain, python_arena_alloc,
    python_arena_free,
    api_set_capture,
};

}  // namespace

EXPORT ShimApi* pytest_scalene_shim_api() { return &g_api; }

// Loaded with dlopen rather than preloaded (got_hooks.cpp), before any GOT entry points here:
// the next functions are those the process is bound to. Returns 0, or -1 when one is missing.
// Written before the hooks send any call here, then published again: a thread reaches these
// functions through a GOT slot, a plain load that orders nothing (and that TSan cannot see),
// and its ready() must acquire the store made after the write. A later install finds the same
// functions (the process's bindings do not change) and writes nothing: threads may be calling.
EXPORT int pytest_scalene_shim_use_next(void* (*lookup)(const char*)) {
  Libc found;
  if (!ready() || !look_up(found, lookup)) return -1;
  if (memcmp(&libc, &found, sizeof found) != 0) {
    libc = found;
    g_libc_ready.store(1, std::memory_order_release);
  }
  return 0;
}

// -- the interposed functions -----------------------------------------------------------------
EXPORT void* malloc(size_t size) __THROW {
  if (UNLIKELY(!ready())) return boot_alloc(size);
  void* p = libc.next_malloc(size);
  count_alloc(p);
  return p;
}

EXPORT void free(void* p) __THROW {
  // ready(): the acquire that makes the next functions visible to a thread that got here
  // through a GOT slot (see pytest_scalene_shim_use_next); never false for a block of theirs.
  if (!p || in_boot(p) || UNLIKELY(!ready())) return;
  int64_t size = before_free(p);
  libc.next_free(p);
  count_free(size);
}

EXPORT void* calloc(size_t nelem, size_t elsize) __THROW {
  if (UNLIKELY(!ready())) {
    size_t size;
    return __builtin_mul_overflow(nelem, elsize, &size) ? nullptr : boot_alloc(size);
  }
  void* p = libc.next_calloc(nelem, elsize);
  count_alloc(p);
  return p;
}

EXPORT void* realloc(void* old, size_t size) __THROW {
  if (UNLIKELY(old && in_boot(old))) {  // out of the boot buffer, which is never freed
    void* p = malloc(size);
    if (p) byte_copy(p, old, boot_size(old) < size ? boot_size(old) : size);
    return p;
  }
  if (UNLIKELY(!ready())) return boot_alloc(size);
  // A moved or resized block counts as freed for leak tracking (conservative).
  int64_t old_size = old ? before_free(old) : 0;
  void* p = libc.next_realloc(old, size);
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

EXPORT size_t malloc_usable_size(void* p) __THROW {
  if (!p) return 0;
  if (in_boot(p)) return boot_size(p);
  return ready() ? libc.next_usable(p) : 0;
}

void* aligned(size_t alignment, size_t size) {
  if (UNLIKELY(!ready())) return alignment <= 16 ? boot_alloc(size) : nullptr;
  void* p = libc.next_memalign(alignment, size);
  count_alloc(p);
  return p;
}

EXPORT int posix_memalign(void** out, size_t alignment, size_t size) __THROW {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0 || alignment == 0) {
    return EINVAL;
  }
  int saved_errno = errno;
  void* p = aligned(alignment, size);
  errno = saved_errno;
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

EXPORT void* aligned_alloc(size_t alignment, size_t size) __THROW {
  return aligned(alignment, size);
}

EXPORT void* memalign(size_t alignment, size_t size) __THROW { return aligned(alignment, size); }

EXPORT void* valloc(size_t size) __THROW {
  if (UNLIKELY(!ready())) return nullptr;
  void* p = libc.next_valloc(size);
  count_alloc(p);
  return p;
}

EXPORT void* pvalloc(size_t size) __THROW {
  if (UNLIKELY(!ready())) return nullptr;
  void* p = libc.next_pvalloc(size);
  count_alloc(p);
  return p;
}

// Copies: every variant a compiler or a FORTIFY build may call. The _chk variants check the
// destination size themselves (glibc's, which abort on overflow as they would unprofiled).
EXPORT void* memcpy(void* dst, const void* src, size_t n) __THROW {
  if (UNLIKELY(!ready())) return byte_copy(dst, src, n);
  count_copy(n);
  return libc.next_memcpy(dst, src, n);
}

EXPORT void* memmove(void* dst, const void* src, size_t n) __THROW {
  if (UNLIKELY(!ready())) return byte_copy(dst, src, n);
  count_copy(n);
  return libc.next_memmove(dst, src, n);
}

EXPORT void* mempcpy(void* dst, const void* src, size_t n) __THROW {
  if (UNLIKELY(!ready())) return static_cast<unsigned char*>(byte_copy(dst, src, n)) + n;
  count_copy(n);
  return libc.next_mempcpy(dst, src, n);
}

// The FORTIFY names are compiler builtins: defined under other names, exported under theirs.
#ifndef SHIM_LABEL
#define SHIM_LABEL(name) __asm__(name)
#endif
extern "C" void* shim_memcpy_chk(void*, const void*, size_t, size_t) SHIM_LABEL("__memcpy_chk");
extern "C" void* shim_memmove_chk(void*, const void*, size_t, size_t) SHIM_LABEL("__memmove_chk");
extern "C" void* shim_mempcpy_chk(void*, const void*, size_t, size_t) SHIM_LABEL("__mempcpy_chk");
extern "C" wchar_t* shim_wmemcpy_chk(wchar_t*, const wchar_t*, size_t, size_t) SHIM_LABEL(
    "__wmemcpy_chk");

EXPORT void* shim_memcpy_chk(void* dst, const void* src, size_t n, size_t dstlen) {
  if (UNLIKELY(!ready() || !libc.next_memcpy_chk)) return byte_copy(dst, src, n);
  count_copy(n);
  return libc.next_memcpy_chk(dst, src, n, dstlen);
}

EXPORT void* shim_memmove_chk(void* dst, const void* src, size_t n, size_t dstlen) {
  if (UNLIKELY(!ready() || !libc.next_memmove_chk)) return byte_copy(dst, src, n);
  count_copy(n);
  return libc.next_memmove_chk(dst, src, n, dstlen);
}

EXPORT void* shim_mempcpy_chk(void* dst, const void* src, size_t n, size_t dstlen) {
  if (UNLIKELY(!ready() || !libc.next_mempcpy_chk)) {
    return static_cast<unsigned char*>(byte_copy(dst, src, n)) + n;
  }
  count_copy(n);
  return libc.next_mempcpy_chk(dst, src, n, dstlen);
}

EXPORT wchar_t* wmemcpy(wchar_t* dst, const wchar_t* src, size_t n) __THROW {
  if (UNLIKELY(!ready())) return static_cast<wchar_t*>(byte_copy(dst, src, n * sizeof(wchar_t)));
  count_copy(n * sizeof(wchar_t));
  return libc.next_wmemcpy(dst, src, n);
}

EXPORT wchar_t* shim_wmemcpy_chk(wchar_t* dst, const wchar_t* src, size_t n, size_t dstlen) {
  if (UNLIKELY(!ready() || !libc.next_wmemcpy_chk)) {
    return static_cast<wchar_t*>(byte_copy(dst, src, n * sizeof(wchar_t)));
  }
  count_copy(n * sizeof(wchar_t));
  return libc.next_wmemcpy_chk(dst, src, n, dstlen);
}
