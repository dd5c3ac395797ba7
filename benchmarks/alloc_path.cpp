// The allocation path's cost per call (benchmarks/alloc_path.py builds and runs this).
//
//   alloc_path MODE ARMED WHAT CALLS
// MODE: plain (no shim), preload (LD_PRELOAD set by the caller), installed (the shim loaded
// with dlopen and its GOT hooks installed, path in $SHIM). ARMED: 1 arms the shim as a test
// does (threshold 10 MB, leak step 10 MB, copy step 1 MB, no signal). WHAT: pairs (malloc of
// 64-71 bytes and free) or copies (memcpy of 255-256 bytes). Prints the nanoseconds per call,
// the best of 7 rounds of CALLS calls. The calls go through this program's own GOT entries, as
// a library's do.
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../native/shim_api.h"

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static double pairs(long calls) {
  double best = 1e30;
  for (int round = 0; round < 7; round++) {
    double start = now_ns();
    for (long i = 0; i < calls; i++) {
      void* p = malloc(64 + (i & 7));
      __asm__ volatile("" : : "r"(p) : "memory");
      free(p);
    }
    double spent = (now_ns() - start) / calls;
    if (spent < best) best = spent;
  }
  return best;
}

static double copies(long calls) {
  static char src[256], dst[256];
  double best = 1e30;
  for (int round = 0; round < 7; round++) {
    double start = now_ns();
    for (long i = 0; i < calls; i++) {
      size_t n = 256 - (i & 1);  // not a constant: a real call, never inlined
      __asm__ volatile("" : "+r"(n));
      memcpy(dst, src, n);
      __asm__ volatile("" : : : "memory");
    }
    double spent = (now_ns() - start) / calls;
    if (spent < best) best = spent;
  }
  return best;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: alloc_path plain|preload|installed 0|1 pairs|copies CALLS\n");
    return 2;
  }
  const char* mode = argv[1];
  int armed = atoi(argv[2]);
  int want_pairs = strcmp(argv[3], "pairs") == 0;
  long calls = atol(argv[4]);
  ShimApi* api = NULL;
  if (strcmp(mode, "installed") == 0) {
    void* shim = dlopen(getenv("SHIM"), RTLD_NOW | RTLD_LOCAL);
    auto install = shim ? (int (*)(void*))dlsym(shim, "pytest_scalene_hook_in_process") : NULL;
    if (!install || install(shim) != 0) {
      fprintf(stderr, "installing the shim failed: %s\n", dlerror());
      return 1;
    }
    auto get = (ShimApi* (*)(void))dlsym(shim, "pytest_scalene_shim_api");
    api = get();
  } else if (strcmp(mode, "preload") == 0) {
    auto get = (ShimApi* (*)(void))dlsym(RTLD_DEFAULT, "pytest_scalene_shim_api");
    if (!get) {
      fprintf(stderr, "the shim is not preloaded\n");
      return 1;
    }
    api = get();
  }
  if (armed) {
    if (!api) {
      fprintf(stderr, "nothing to arm in mode %s\n", mode);
      return 1;
    }
    api->arm(10485767, 10485767, 1 << 20, 0, NULL);
  }
  printf("%.2f\n", want_pairs ? pairs(calls) : copies(calls));
  if (armed) api->disarm();
  return 0;
}
