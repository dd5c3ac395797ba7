// A stress test of the shim's leak table and counters (scripts/tsan_shim.sh builds it with
// ThreadSanitizer; tests/test_shim_races.py runs that). native/shim.cpp is compiled in, with its
// interposed functions renamed (shim_malloc...), so that it forwards to the allocator after it
// (TSan's) and this program calls it explicitly.
//
// Threads allocate and free blocks of up to 2 MB, a quarter of them freed by another thread,
// while one thread re-arms the shim every millisecond with a small leak step (a tracked
// allocation at almost every new high-water mark). Checked: the tracked count never goes below
// 0 and is 0 once every block is freed, every tracked id of the last arming whose block was
// freed is flagged freed, and the peak is the highest footprint seen. TSan checks the rest.
// The headers first, so that the renaming below applies to shim.cpp's definitions only.
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

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
#define malloc_usable_size shim_malloc_usable_size
#define SHIM_LABEL(name)
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

namespace {
constexpr int kWorkers = 4;
std::atomic<bool> stop{false};
std::mutex handoff_lock;
std::vector<void*> handoff;  // blocks another thread frees
std::atomic<int> failures{0};

void fail(const char* what) {
  fprintf(stderr, "FAIL: %s\n", what);
  failures.fetch_add(1);
}

void worker(unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<void*> live;
  while (!stop.load(std::memory_order_relaxed)) {
    if (live.size() < 48 && rng() % 3 != 0) {
      size_t size = 1 + rng() % (2 << 20);
      void* p = rng() % 5 == 0 ? shim_calloc(1, size) : shim_malloc(size);
      if (p) live.push_back(p);
    } else if (!live.empty()) {
      size_t i = rng() % live.size();
      void* p = live[i];
      live[i] = live.back();
      live.pop_back();
      if (rng() % 4 == 0) {
        std::lock_guard<std::mutex> hold(handoff_lock);
        handoff.push_back(p);
      } else if (rng() % 8 == 0) {
        p = shim_realloc(p, 1 + rng() % (1 << 20));
        if (p) live.push_back(p);
      } else {
        shim_free(p);
      }
    }
    void* other = nullptr;
    {
      std::lock_guard<std::mutex> hold(handoff_lock);
      if (!handoff.empty()) {
        other = handoff.back();
        handoff.pop_back();
      }
    }
    if (other) shim_free(other);
  }
  for (void* p : live) shim_free(p);
}
}  // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 2.0;
  ShimApi* api = pytest_scalene_shim_api();
  std::vector<std::thread> threads;
  for (int i = 0; i < kWorkers; i++) threads.emplace_back(worker, 1234u + i);
  std::vector<int32_t> ids;
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int arms = 0;
  while (std::chrono::steady_clock::now() < end) {
    api->arm(1 << 20, 1 << 16, int64_t{1} << 40, 0, nullptr);
    arms++;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (g_tracked.load() < 0) fail("tracked count below 0");
    int64_t peak_before = api->peak();
    size_t count = 0;
    ShimSample* samples = api->take_samples(&count);
    ids.clear();
    for (size_t i = 0; i < count; i++) {
      if (samples[i].tracked_id >= 0) ids.push_back(samples[i].tracked_id);
      if (samples[i].kind == SHIM_GROW && samples[i].footprint > api->peak()) {
        fail("a grow sample above the peak");
      }
    }
    api->release_samples(samples);
    if (api->peak() < peak_before) fail("the peak went down while armed");
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  for (void* p : handoff) shim_free(p);
  handoff.clear();
  // Every block is freed: nothing is tracked any more, and the last arming's ids are flagged.
  size_t count = 0;
  ShimSample* samples = api->take_samples(&count);
  for (size_t i = 0; i < count; i++) {
    if (samples[i].tracked_id >= 0) ids.push_back(samples[i].tracked_id);
  }
  api->release_samples(samples);
  api->disarm();
  if (g_tracked.load() != 0) fail("tracked count not 0 with every block freed");
  for (int32_t id : ids) {
    if (!api->leak_freed(id)) fail("a freed tracked block not flagged");
  }
  printf("arms %d, last arming's tracked ids %zu, failures %d\n", arms, ids.size(),
         failures.load());
  return failures.load() == 0 ? 0 : 1;
}
