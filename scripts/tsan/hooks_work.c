/* The library whose GOT the in-process hooks rewrite in scripts/tsan/hooks_stress.cpp: its own
   calls of malloc & co., memcpy, dlopen and dlsym go through its GOT entries (built with
   ThreadSanitizer, so that TSan sees what it does with the blocks). Copies of it, under other
   names, are what a thread opens and closes while the hooks are in. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

void* work_alloc(size_t n, int how) {
  void* p = how == 0 ? malloc(n) : how == 1 ? calloc(1, n) : realloc(NULL, n);
  if (p) memset(p, 7, n < 64 ? n : 64);
  return p;
}

void* work_copy(const void* src, size_t n) {
  void* p = malloc(n);
  if (p) memcpy(p, src, n);
  return p;
}

void work_free(void* p) { free(p); }

/* Open a library and look malloc up through it, as ctypes does: the dlsym wrapper's path. */
int work_open(const char* path, void** malloc_found) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) return -1;
  *malloc_found = dlsym(RTLD_DEFAULT, "malloc");
  void* (*alloc)(size_t, int) = (void* (*)(size_t, int))dlsym(handle, "work_alloc");
  void (*release)(void*) = (void (*)(void*))dlsym(handle, "work_free");
  if (alloc && release) release(alloc(100, 0));
  return dlclose(handle);
}
