// The interface between the preloaded shim and the Python extension.
// The extension finds it with dlsym(RTLD_DEFAULT, "pytest_scalene_shim_api"); when the shim is
// not preloaded the symbol is absent and memory profiling is reported as unavailable.
// The shim knows nothing of Python: the allocator wrappers below only share the layout of
// PyMemAllocatorEx ({ctx, malloc, calloc, realloc, free}), a stable part of the C API.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define PYTEST_SCALENE_SHIM_ABI 5
#define SHIM_WHERE_DEPTH 24

extern "C" {

enum ShimSampleKind : int32_t {
  SHIM_GROW = 1,    // the footprint grew by >= threshold (or set a new leak high-water mark)
  SHIM_SHRINK = 2,  // the footprint shrank by >= threshold
  SHIM_COPY = 3,    // the allocating thread copied >= copy_step bytes with memcpy/memmove
};

// Where the sampling thread was, filled synchronously by the capture callback (the extension
// walks the thread's own Python frames): innermost first. The shim treats it as opaque bytes.
struct ShimWhere {
  int32_t depth;             // frames filled in (0: unknown, e.g. a thread Python does not know)
  int32_t owned;             // 1: `code` holds strong references (taken with the GIL held)
  uint64_t code[SHIM_WHERE_DEPTH];  // PyCodeObject* of each frame
  int32_t line[SHIM_WHERE_DEPTH];   // the line each frame was executing
};

struct ShimSample {
  int32_t kind;
  int32_t tracked_id;     // >= 0: the allocation that set a new high-water mark is tracked
  int64_t footprint;      // live bytes (malloc_usable_size) after the event, process-wide
  int64_t alloc_bytes;    // bytes allocated since the previous grow/shrink sample
  int64_t free_bytes;     // bytes freed since the previous grow/shrink sample
  int64_t python_bytes;   // of alloc_bytes, those allocated through Python's allocator
  int64_t copy_bytes;     // SHIM_COPY only: bytes copied (a multiple of copy_step)
  uint64_t time_ns;       // CLOCK_MONOTONIC (time.monotonic_ns())
  uint64_t thread;        // pthread_self() of the thread that allocated or copied
  ShimWhere where;        // the sampling thread's Python stack at the moment of the sample
};

// Same layout as PyMemAllocatorEx.
struct ShimAllocator {
  void* ctx;
  void* (*malloc)(void* ctx, size_t size);
  void* (*calloc)(void* ctx, size_t nelem, size_t elsize);
  void* (*realloc)(void* ctx, void* ptr, size_t size);
  void (*free)(void* ctx, void* ptr);
};

// Same layout as PyObjectArenaAllocator.
struct ShimArenaAllocator {
  void* ctx;
  void* (*alloc)(void* ctx, size_t size);
  void (*free)(void* ctx, void* ptr, size_t size);
};

struct ShimApi {
  int abi;
  // Start sampling. Samples are signalled with `signum` (0: none) only while the thread's
  // disposition of `signum` is still `handler` and the signal is not blocked in that thread.
  void (*arm)(int64_t threshold, int64_t leak_step, int64_t copy_step, int signum,
              void* handler);
  // Stop sampling; when it returns, no thread will raise the signal any more.
  void (*disarm)(void);
  int (*armed)(void);
  // Hands over the pending samples (caller frees them with release_samples); *count is set.
  ShimSample* (*take_samples)(size_t* count);
  void (*release_samples)(ShimSample* samples);
  int64_t (*footprint)(void);  // live bytes now
  int64_t (*peak)(void);       // highest footprint since arm()
  // Leak tracking: ids come in samples; freed(id) tells whether that allocation was freed.
  int (*leak_freed)(int32_t id);
  int64_t (*dropped)(void);  // samples lost because the sample buffer could not grow
  // Python's allocator domains, one slot each (0 and 1; the extension uses PYMEM_DOMAIN_MEM and
  // PYMEM_DOMAIN_OBJ): keeps *allocator as the slot's previous allocator and rewrites it into
  // the one to install, whose malloc, calloc and realloc mark the bytes that reach malloc
  // through them as Python's. Its ctx and free stay the previous ones' (free marks nothing).
  void (*hook_python_domain)(int slot, ShimAllocator* allocator);
  // Arena allocator wrappers (ctx = a ShimArenaAllocator* holding the previous one): memory
  // that never reaches malloc, counted in the footprint as Python's.
  void* (*python_arena_alloc)(void* ctx, size_t size);
  void (*python_arena_free)(void* ctx, void* ptr, size_t size);
  // Called on the sample path (never on the fast path), in the sampling thread, before the
  // sample is stored; nullptr: no capture. It must not allocate through the shim's sample path
  // (the path's guard makes such allocations count without sampling).
  void (*set_capture)(void (*capture)(ShimWhere* where));
};

}
