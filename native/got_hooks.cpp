// The shim's functions installed in a running process, without LD_PRELOAD: every loaded
// object's global offset table (GOT) entries for malloc & co. and the copy functions are
// rewritten to point at the shim's definitions, and dlopen's entries to a wrapper that does the
// same for each object loaded later (Python's extension modules, ctypes' libraries). memray
// installs its hooks the same way.
//
// dlsym's entries point at a wrapper too, so that a pointer to malloc looked up at run time
// (ctypes' CDLL(None).malloc) is the shim's, as under the preload. What the rewrite cannot see,
// and the preload can: calls made through a function pointer taken before the install (a
// library that stored &malloc at its start), and objects that call the allocator without a GOT
// entry (statically linked allocators). Blocks allocated before the install and freed after it
// are counted as freed: the footprint is relative, as the gates read it (per test, from arm()).
//
// The shim itself, the dynamic linker and the vDSO are never rewritten. The next allocator is
// the one every other object was bound to (dlsym(RTLD_DEFAULT)): glibc's, or the allocator the
// user preloaded.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // dladdr1, dlinfo
#endif
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>

#define EXPORT extern "C" __attribute__((visibility("default")))

extern "C" int pytest_scalene_shim_use_next(void* (*lookup)(const char*));

namespace {

// The names rewritten; their replacement is looked up in the shim by the same name.
const char* const kNames[] = {
    "malloc",        "free",          "calloc",        "realloc",      "reallocarray",
    "posix_memalign", "aligned_alloc", "memalign",      "valloc",       "pvalloc",
    "memcpy",        "memmove",       "mempcpy",       "__memcpy_chk", "__memmove_chk",
    "__mempcpy_chk", "wmemcpy",       "__wmemcpy_chk", "dlopen",       "dlsym",
};
constexpr int kCount = sizeof kNames / sizeof kNames[0];
void* g_ours[kCount];
void* g_next[kCount];  // what the process was bound to for each name (dlsym(RTLD_DEFAULT))

// Every slot rewritten, with what it held: unhook() puts them back.
struct Rewritten {
  void** slot;
  void* original;
  bool relro;  // in the object's read-only-after-relocation segment
};
constexpr int kMaxRewritten = 1 << 15;
Rewritten g_rewritten[kMaxRewritten];
int g_rewritten_count = 0;
std::atomic<int> g_lock{0};
// Read by the dlsym wrapper on any thread; set after g_ours and g_next are filled.
std::atomic<bool> g_installed{false};
const void* g_self_base = nullptr;  // the shim's own load address: never rewritten
void* (*g_real_dlopen)(const char*, int) = nullptr;
void* (*g_real_dlsym)(void*, const char*) = nullptr;

void lock() {
  while (g_lock.exchange(1, std::memory_order_acquire)) {
  }
}
void unlock() { g_lock.store(0, std::memory_order_release); }

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT, kGlobDat = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT, kGlobDat = R_AARCH64_GLOB_DAT;
#else
#error "got_hooks.cpp: only x86_64 and aarch64 relocations are known"
#endif

// The names sharing a pair of leading characters, a bit each, by a hash of the pair: a
// relocation's symbol is compared (strcmp) only with those. index_of runs for every relocation
// of every object rewritten (~50,000 in a pytest process); a loop over the names, comparing
// first characters, was 19 M instructions a start.
uint32_t g_by_prefix[256];

unsigned prefix_of(const char* name) {
  unsigned first = static_cast<unsigned char>(name[0]);
  unsigned second = first ? static_cast<unsigned char>(name[1]) : 0;
  return (first * 31 + second) & 255;
}

void index_names() {
  static_assert(kCount <= 32, "a bit per name");
  for (int i = 0; i < kCount; i++) g_by_prefix[prefix_of(kNames[i])] |= 1u << i;
}

int index_of(const char* name) {
  for (uint32_t left = g_by_prefix[prefix_of(name)]; left != 0; left &= left - 1) {
    int i = __builtin_ctz(left);
    if (strcmp(name, kNames[i]) == 0) return i;
  }
  return -1;
}

// The objects already rewritten, by load address: a dlopen rewrites only the objects it
// loaded (rewriting every object at each dlopen made importing numpy 23% dearer). An object
// unloaded since (dlpi_subs moved) may have left its address to another: then all are
// rewritten again (a slot that holds the shim's function already is left as it is).
constexpr int kMaxObjects = 4096;
uintptr_t g_done[kMaxObjects];
int g_done_count = 0;
unsigned long long g_subs_seen = 0;

bool done(uintptr_t base) {
  for (int i = 0; i < g_done_count; i++) {
    if (g_done[i] == base) return true;
  }
  return false;
}

// Writes `value` into `slot`, making its page writable for the moment when it lies in the
// object's read-only-after-relocation segment (RELRO).
bool write_slot(void** slot, void* value, bool relro) {
  uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  void* start = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(slot) & ~(page - 1));
  if (relro && mprotect(start, page, PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n(slot, value, __ATOMIC_SEQ_CST);
  if (relro) mprotect(start, page, PROT_READ);
  return true;
}

// A pointer of the dynamic section: relocated by the dynamic linker in most objects, an offset
// in those whose dynamic section is read-only (the vDSO).
template <typename T>
T* dynamic_pointer(ElfW(Addr) base, ElfW(Addr) value) {
  return reinterpret_cast<T*>(value < base ? base + value : value);
}

void rewrite_table(ElfW(Addr) base, const ElfW(Rela) * relocations, size_t bytes,
                   const ElfW(Sym) * symbols, const char* strings, uintptr_t relro_start,
                   uintptr_t relro_end) {
  size_t count = bytes / sizeof(ElfW(Rela));
  for (size_t i = 0; i < count; i++) {
    uint32_t type = ELF64_R_TYPE(relocations[i].r_info);
    if (type != kJumpSlot && type != kGlobDat) continue;
    size_t symbol = ELF64_R_SYM(relocations[i].r_info);
    if (symbol == 0) continue;
    int which = index_of(strings + symbols[symbol].st_name);
    if (which < 0 || g_ours[which] == nullptr) continue;
    void** slot = reinterpret_cast<void**>(base + relocations[i].r_offset);
    if (*slot == g_ours[which]) continue;
    if (g_rewritten_count >= kMaxRewritten) return;
    void* original = *slot;
    uintptr_t at = reinterpret_cast<uintptr_t>(slot);
    bool relro = at >= relro_start && at < relro_end;
    if (write_slot(slot, g_ours[which], relro)) {
      g_rewritten[g_rewritten_count++] = {slot, original, relro};
    }
  }
}

int rewrite_object(struct dl_phdr_info* info, size_t size, void*) {
  const char* name = info->dlpi_name ? info->dlpi_name : "";
  if (reinterpret_cast<const void*>(info->dlpi_addr) == g_self_base) return 0;
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    if (info->dlpi_subs != g_subs_seen) {  // an object was unloaded: rewrite every one again
      g_subs_seen = info->dlpi_subs;
      g_done_count = 0;
    }
  } else {
    g_done_count = 0;  // no unload counter (not glibc): every object, every time
  }
  if (done(info->dlpi_addr)) return 0;
  if (g_done_count < kMaxObjects) g_done[g_done_count++] = info->dlpi_addr;
  if (strstr(name, "/ld-linux") || strstr(name, "/ld-musl") || strstr(name, "linux-vdso")) {
    return 0;
  }
  const ElfW(Dyn)* dynamic = nullptr;
  uintptr_t relro_start = 0, relro_end = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& header = info->dlpi_phdr[i];
    if (header.p_type == PT_DYNAMIC) {
      dynamic = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + header.p_vaddr);
    } else if (header.p_type == PT_GNU_RELRO) {
      relro_start = info->dlpi_addr + header.p_vaddr;
      relro_end = relro_start + header.p_memsz;
    }
  }
  if (dynamic == nullptr) return 0;
  ElfW(Addr) base = info->dlpi_addr;
  const ElfW(Sym)* symbols = nullptr;
  const char* strings = nullptr;
  const ElfW(Rela)* plt = nullptr;
  const ElfW(Rela)* data = nullptr;
  size_t plt_bytes = 0, data_bytes = 0;
  bool rela = true;
  for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; d++) {
    switch (d->d_tag) {
      case DT_SYMTAB: symbols = dynamic_pointer<const ElfW(Sym)>(base, d->d_un.d_ptr); break;
      case DT_STRTAB: strings = dynamic_pointer<const char>(base, d->d_un.d_ptr); break;
      case DT_JMPREL: plt = dynamic_pointer<const ElfW(Rela)>(base, d->d_un.d_ptr); break;
      case DT_PLTRELSZ: plt_bytes = d->d_un.d_val; break;
      case DT_RELA: data = dynamic_pointer<const ElfW(Rela)>(base, d->d_un.d_ptr); break;
      case DT_RELASZ: data_bytes = d->d_un.d_val; break;
      case DT_PLTREL: rela = d->d_un.d_val == DT_RELA; break;
      default: break;
    }
  }
  if (!symbols || !strings || !rela) return 0;  // REL tables: not on x86_64 or aarch64
  if (plt) rewrite_table(base, plt, plt_bytes, symbols, strings, relro_start, relro_end);
  if (data) rewrite_table(base, data, data_bytes, symbols, strings, relro_start, relro_end);
  return 0;
}

void rewrite_all() {
  lock();
  if (g_installed.load(std::memory_order_acquire)) dl_iterate_phdr(rewrite_object, nullptr);
  unlock();
}

}  // namespace

namespace {

// dlopen of a bare name searches the calling object's own paths first (its DT_RPATH or
// DT_RUNPATH: a library opening a sibling of its package), and glibc reads the caller from the
// return address, which in a wrapper is the shim's. So the wrapper looks the name up in the
// caller's search path itself (dlinfo RTLD_DI_SERINFO: the list its DT_NEEDED would search) and
// opens what it finds by path; a name already loaded, or found nowhere there, goes to dlopen as
// is (the cache and the system directories: the same for every caller).
void* open_as(const void* caller, const char* file, int mode) {
  void* resident = g_real_dlopen(file, mode | RTLD_NOLOAD);
  if (resident != nullptr) {
    dlclose(resident);
    return nullptr;
  }
  Dl_info info;
  struct link_map* map = nullptr;
  if (dladdr1(caller, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 || !map) {
    return nullptr;
  }
  Dl_serinfo size;
  if (dlinfo(map, RTLD_DI_SERINFOSIZE, &size) != 0 || size.dls_size > 16384) return nullptr;
  alignas(Dl_serinfo) char buffer[16384];
  auto* paths = reinterpret_cast<Dl_serinfo*>(buffer);
  *paths = size;
  if (dlinfo(map, RTLD_DI_SERINFO, paths) != 0) return nullptr;
  char path[4096];
  size_t length = strlen(file);
  for (unsigned i = 0; i < paths->dls_cnt; i++) {
    const char* dir = paths->dls_serpath[i].dls_name;
    size_t at = strlen(dir);
    if (at + 1 + length + 1 > sizeof path) continue;
    memcpy(path, dir, at);
    path[at] = '/';
    memcpy(path + at + 1, file, length + 1);
    if (access(path, F_OK) == 0) return g_real_dlopen(path, mode);
  }
  return nullptr;
}

}  // namespace

// What dlopen's GOT entries point at once installed: the object and its dependencies are
// rewritten before the caller (an import) runs any of their code.
EXPORT void* pytest_scalene_dlopen(const char* file, int mode) {
  void* handle = nullptr;
  if (file != nullptr && strchr(file, '/') == nullptr) {
    handle = open_as(__builtin_return_address(0), file, mode);
  }
  if (handle == nullptr) handle = g_real_dlopen(file, mode);
  if (handle != nullptr) rewrite_all();
  return handle;
}

// What dlsym's GOT entries point at: a pointer to malloc & co. looked up at run time (ctypes'
// CDLL(None).malloc) is the shim's, as the process's bound one would be under the preload.
// RTLD_NEXT is relative to the caller, which glibc reads from the return address: passed on
// as a tail call, which keeps the caller's.
EXPORT void* pytest_scalene_dlsym(void* handle, const char* name) {
  if (handle == RTLD_NEXT) return g_real_dlsym(handle, name);
  void* found = g_real_dlsym(handle, name);
  if (found != nullptr && g_installed.load(std::memory_order_acquire)) {
    int which = index_of(name);
    if (which >= 0 && found == g_next[which]) return g_ours[which];
  }
  return found;
}

// Installs the hooks: `self` is the shim's handle (dlopen of its own path), through which its
// definitions are found (a plain &malloc here would bind to the first malloc in the process).
// Returns 0, or a negative number naming what failed.
EXPORT int pytest_scalene_hook_in_process(void* self) {
  if (g_installed.load(std::memory_order_acquire)) return 0;
  Dl_info where;
  if (dladdr(reinterpret_cast<void*>(&pytest_scalene_hook_in_process), &where) == 0) return -1;
  g_self_base = where.dli_fbase;
  g_real_dlopen = reinterpret_cast<void* (*)(const char*, int)>(dlsym(RTLD_DEFAULT, "dlopen"));
  g_real_dlsym = reinterpret_cast<void* (*)(void*, const char*)>(dlsym(RTLD_DEFAULT, "dlsym"));
  if (g_real_dlopen == nullptr || g_real_dlsym == nullptr) return -2;
  if (g_by_prefix[prefix_of(kNames[0])] == 0) index_names();
  // The next allocator is the one the process was bound to (RTLD_DEFAULT): the shim is not
  // first in the global scope, so that is never the shim's own.
  if (pytest_scalene_shim_use_next([](const char* name) { return dlsym(RTLD_DEFAULT, name); }) != 0) {
    return -3;
  }
  for (int i = 0; i < kCount; i++) {
    const char* name = kNames[i];
    if (strcmp(name, "dlopen") == 0) name = "pytest_scalene_dlopen";
    if (strcmp(name, "dlsym") == 0) name = "pytest_scalene_dlsym";
    g_ours[i] = dlsym(self, name);
    g_next[i] = dlsym(RTLD_DEFAULT, kNames[i]);
    if (g_ours[i] == nullptr || g_ours[i] == g_next[i]) return -4;
  }
  g_installed.store(true, std::memory_order_release);
  rewrite_all();
  return 0;
}

namespace {

bool is_ours(const void* value) {
  for (int i = 0; i < kCount; i++) {
    if (value == g_ours[i]) return true;
  }
  return false;
}

// Puts back the rewritten slots that lie in `info`'s object: only objects still loaded (one
// closed since the install is unmapped, and its slots with it), and only slots that still hold
// the shim's function. An object loaded where a closed one was rewritten lies over that one's
// entries: its own newer entries come first (the loop runs backwards), and the older ones point
// into its code or data, where writing crashed (or changed its code).
int restore_object(struct dl_phdr_info* info, size_t, void*) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& header = info->dlpi_phdr[i];
    if (header.p_type != PT_LOAD || !(header.p_flags & PF_R)) continue;
    uintptr_t start = info->dlpi_addr + header.p_vaddr, end = start + header.p_memsz;
    for (int j = g_rewritten_count - 1; j >= 0; j--) {
      Rewritten& entry = g_rewritten[j];
      uintptr_t at = reinterpret_cast<uintptr_t>(entry.slot);
      if (entry.slot == nullptr || at < start || at >= end) continue;
      if (is_ours(__atomic_load_n(entry.slot, __ATOMIC_SEQ_CST))) {
        write_slot(entry.slot, entry.original, entry.relro);
      }
      entry.slot = nullptr;
    }
  }
  return 0;
}

}  // namespace

// Puts every rewritten slot back (the process keeps running: pytest.main() returned). Blocks
// the shim allocated stay valid: it forwards to the same allocator.
EXPORT int pytest_scalene_unhook_in_process() {
  lock();
  dl_iterate_phdr(restore_object, nullptr);
  g_rewritten_count = 0;
  g_done_count = 0;  // installed again: every object is rewritten again
  g_installed.store(false, std::memory_order_release);
  unlock();
  return 0;
}

// Under the lock: a dlopen on another thread may be rewriting a new object's slots.
EXPORT int pytest_scalene_hooked_slots() {
  lock();
  int count = g_rewritten_count;
  unlock();
  return count;
}

// The hot-path benchmark's loop (benchmarks/hot_paths, counted under callgrind): `pairs`
// malloc+free pairs and as many 256-byte memcpy calls through the shim's own definitions
// (`self`: its handle), installed or not. Returns the pairs made, or -1.
EXPORT long pytest_scalene_exercise(void* self, long pairs) {
  auto allocate = reinterpret_cast<void* (*)(size_t)>(dlsym(self, "malloc"));
  auto release = reinterpret_cast<void (*)(void*)>(dlsym(self, "free"));
  auto copy = reinterpret_cast<void* (*)(void*, const void*, size_t)>(dlsym(self, "memcpy"));
  if (allocate == nullptr || release == nullptr || copy == nullptr) return -1;
  static char source[256], target[256];
  for (long i = 0; i < pairs; i++) {
    void* p = allocate(64 + (i & 7));
    __asm__ volatile("" : : "r"(p) : "memory");
    release(p);
    copy(target, source, 256 - (i & 1));
  }
  return pairs;
}
