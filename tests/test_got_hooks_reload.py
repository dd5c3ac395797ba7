"""The in-process hooks' unhook (native/got_hooks.cpp) after a library they rewrote was closed
and another was loaded where it was: the closed one's entries lie over the new one's code, and
writing them back crashed the process at the end of the session (SIGSEGV) or changed the new
library's code. Only slots that still hold the shim's functions are written back. And the new
library, at an address already rewritten once, is rewritten too."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

from conftest import c_compiler
from shim_support import needs_shim

from pytest_scalene.core import runenv

pytestmark = [needs_shim]

# A: little code, its GOT close after it, and a bss (PAD bytes) that makes its mapping as wide
# as B's, so that B, loaded after A is closed, takes A's place (mmap's first fit).
CLOSED_C = r"""
#include <stdlib.h>
#include <string.h>
char pad[PAD + 1];  /* exported: not optimised away */
void* grab(size_t n) { void* p = malloc(n); memset(p, 1, n); pad[n % (PAD + 1)] = 1; return p; }
"""
# B: more code: A's GOT offsets fall in it.
FUNCTION = "int f{i}(int x) {{ volatile int y = x; for (int k = 0; k < 5; k++) y = y * 31 + k; %s"
FUNCTION %= "return y; }}"
LOADED_C = (
    "#include <stdlib.h>\n"
    + "\n".join(FUNCTION.format(i=i) for i in range(120))
    + r"""
int works(int x) { void* p = malloc(16); free(p); return f0(x) + f119(x); }
void* keep(size_t n) { return malloc(n); }  /* a malloc relocation the compiler cannot drop */
"""
)
MAIN_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>

static void* base(void* handle) {
  struct link_map* map;
  dlinfo(handle, RTLD_DI_LINKMAP, &map);
  return (void*)map->l_addr;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  void* self = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  int (*hook)(void*) = (int (*)(void*))dlsym(self, "pytest_scalene_hook_in_process");
  int (*unhook)(void) = (int (*)(void))dlsym(self, "pytest_scalene_unhook_in_process");
  printf("hooked %d\n", hook(self));
  void* closed = dlopen(argv[2], RTLD_NOW);
  void* closed_at = base(closed);
  void* (*grab)(size_t) = (void* (*)(size_t))dlsym(closed, "grab");
  free(grab(100));
  int (*slots)(void) = (int (*)(void))dlsym(self, "pytest_scalene_hooked_slots");
  dlclose(closed);
  int before = slots();
  void* loaded = dlopen(argv[3], RTLD_NOW);
  printf("same place %d\n", closed_at == base(loaded));
  printf("rewritten %d\n", slots() > before);
  int (*works)(int) = (int (*)(int))dlsym(loaded, "works");
  int result = works(3);
  printf("unhooked %d\n", unhook());
  printf("same result %d\n", works(3) == result);
  return 0;
}
"""


def _span(library: Path) -> int:
    """The end of an ELF64 object's last loaded segment (its mapping's size, less rounding)."""
    data = library.read_bytes()
    (phoff,) = struct.unpack_from("<Q", data, 0x20)
    size, count = struct.unpack_from("<HH", data, 0x36)
    ends = []
    for i in range(count):
        kind, _flags, _offset, vaddr, _paddr, _filesz, memsz = struct.unpack_from(
            "<IIQQQQQ", data, phoff + i * size
        )
        if kind == 1:  # PT_LOAD
            ends.append(vaddr + memsz)
    return max(ends)


def test_unhook_after_another_library_took_a_closed_ones_place(tmp_path: Path) -> None:
    compiler = c_compiler("the libraries and the program of this test")
    for name, source in {"closed": CLOSED_C, "loaded": LOADED_C, "main": MAIN_C}.items():
        (tmp_path / f"{name}.c").write_text(source)
    closed, loaded = tmp_path / "libclosed.so", tmp_path / "libloaded.so"

    def build(output: Path, source: str, *flags: str) -> None:
        command = [compiler, "-O1", "-shared", "-fPIC", *flags, "-o", str(output), source]
        subprocess.run(command, check=True)

    build(loaded, str(tmp_path / "loaded.c"))
    build(closed, str(tmp_path / "closed.c"), "-DPAD=0")
    page = 4096
    pad = (_span(loaded) + page - 1) // page * page - _span(closed)
    assert pad > 0, "the loaded library must be the larger"
    build(closed, str(tmp_path / "closed.c"), f"-DPAD={pad - 64}")
    program = tmp_path / "main"
    subprocess.run([compiler, "-o", str(program), str(tmp_path / "main.c"), "-ldl"], check=True)
    shim = runenv.shim_path()
    assert shim is not None and shim.exists()
    done = subprocess.run(
        [str(program), str(shim), str(closed), str(loaded)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = done.stdout.splitlines()
    assert lines[:2] == ["hooked 0", "same place 1"], lines  # the case this test is about
    assert done.returncode == 0, (done.returncode, lines, done.stderr[-2000:])
    # The library in the closed one's place is rewritten too: a dlopen rewrites only objects
    # not seen before, by address, unless one was closed since.
    assert lines[2:] == ["rewritten 1", "unhooked 0", "same result 1"], lines
