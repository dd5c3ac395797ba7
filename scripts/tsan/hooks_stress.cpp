// A stress test of the in-process hooks (native/got_hooks.cpp) with the shim (native/shim.cpp),
// both built into one library with ThreadSanitizer (scripts/tsan_shim.sh): the shim is loaded as
// sampling/in_process_hooks.py loads it (dlopen, RTLD_LOCAL) while threads allocate, copy and
// free through a library's GOT (hooks_work.c). The hooks go in and out under them, and one
// thread opens and closes copies of that library, each open rewriting the new object (the
// dlopen wrapper) and looking malloc up (the dlsym wrapper), while the main thread re-arms the
// shim and drains its samples. Checked: while the hooks are in, dlsym(RTLD_DEFAULT, "malloc")
// is the shim's and allocations are counted; once out, it is not, and the slots are put back.
// TSan checks the rest.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "shim_api.h"

namespace {
using Alloc = void* (*)(size_t, int);
using Copy = void* (*)(const void*, size_t);
using Free = void (*)(void*);
using Open = int (*)(const char*, void**);

std::atomic<bool> stop{false};
std::atomic<int> failures{0};
std::atomic<int> hooked_phase{0};  // 0: not yet, 1: hooks in, 2: out again
Alloc work_alloc;
Copy work_copy;
Free work_free;
Open work_open;

void fail(const char* what) {
  fprintf(stderr, "FAIL: %s\n", what);
  failures.fetch_add(1);
}

template <typename T>
T symbol(void* handle, const char* name) {
  void* found = dlsym(handle, name);
  if (found == nullptr) {
    fprintf(stderr, "missing %s: %s\n", name, dlerror());
    exit(2);
  }
  return reinterpret_cast<T>(found);
}

void allocator(unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<void*> live;
  char source[4096] = {1};
  while (!stop.load(std::memory_order_relaxed)) {
    if (live.size() < 64 && rng() % 3 != 0) {
      void* p = rng() % 4 == 0 ? work_copy(source, 1 + rng() % sizeof source)
                               : work_alloc(1 + rng() % (256 << 10), rng() % 3);
      if (p) live.push_back(p);
    } else if (!live.empty()) {
      size_t i = rng() % live.size();
      work_free(live[i]);
      live[i] = live.back();
      live.pop_back();
    }
  }
  for (void* p : live) work_free(p);
}

void opener(const std::vector<std::string>* copies, void* const* shim_malloc) {
  while (hooked_phase.load(std::memory_order_acquire) == 0) std::this_thread::yield();
  for (size_t i = 0; !stop.load(std::memory_order_relaxed); i++) {
    int phase = hooked_phase.load(std::memory_order_acquire);
    void* found = nullptr;
    if (work_open((*copies)[i % copies->size()].c_str(), &found) != 0) fail("dlopen or dlclose");
    int after = hooked_phase.load(std::memory_order_acquire);
    if (phase == 1 && after == 1 && found != *shim_malloc) fail("dlsym: not the shim's malloc");
    if (phase == 2 && found == *shim_malloc) fail("dlsym: the shim's malloc once unhooked");
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: hooks_stress SECONDS SHIM WORK [COPY...]\n");
    return 2;
  }
  double seconds = atof(argv[1]);
  void* work = dlopen(argv[3], RTLD_NOW | RTLD_LOCAL);
  if (work == nullptr) return fprintf(stderr, "%s\n", dlerror()), 2;
  work_alloc = symbol<Alloc>(work, "work_alloc");
  work_copy = symbol<Copy>(work, "work_copy");
  work_free = symbol<Free>(work, "work_free");
  work_open = symbol<Open>(work, "work_open");
  std::vector<std::string> copies(argv + 4, argv + argc);
  if (copies.empty()) copies.push_back(argv[3]);

  // Every thread is started before the install: with glibc's own GOT rewritten, a thread's
  // start calls the shim (realloc) inside TSan's runtime, before TSan can run instrumented code.
  void* shim_malloc = nullptr;
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < 3; i++) threads.emplace_back(allocator, 99u + i);
  threads.emplace_back(opener, &copies, &shim_malloc);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // running before the install

  void* shim = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (shim == nullptr) return fprintf(stderr, "%s\n", dlerror()), 2;
  auto hook = symbol<int (*)(void*)>(shim, "pytest_scalene_hook_in_process");
  auto unhook = symbol<int (*)()>(shim, "pytest_scalene_unhook_in_process");
  auto slots = symbol<int (*)()>(shim, "pytest_scalene_hooked_slots");
  ShimApi* api = symbol<ShimApi* (*)()>(shim, "pytest_scalene_shim_api")();
  shim_malloc = dlsym(shim, "malloc");
  if (hook(shim) != 0) return fprintf(stderr, "FAIL: hook\n"), 1;
  hooked_phase.store(1, std::memory_order_release);

  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int arms = 0;
  int64_t counted = 0;
  while (std::chrono::steady_clock::now() < until) {
    api->arm(1 << 20, 1 << 16, 1 << 20, 0, nullptr);
    arms++;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    size_t count = 0;
    ShimSample* samples = api->take_samples(&count);
    for (size_t i = 0; i < count; i++) counted += samples[i].alloc_bytes;
    api->release_samples(samples);
    api->disarm();
  }
  if (counted <= 0) fail("no allocation counted while hooked");
  int rewritten = slots();
  if (unhook() != 0) fail("unhook");
  hooked_phase.store(2, std::memory_order_release);
  if (dlsym(RTLD_DEFAULT, "malloc") == shim_malloc) fail("malloc still the shim's");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // running after the unhook
  stop.store(true);
  for (auto& t : threads) t.join();
  printf("arms %d, slots rewritten %d, bytes counted %lld, failures %d\n", arms, rewritten,
         static_cast<long long>(counted), failures.load());
  return failures.load() == 0 ? 0 : 1;
}
