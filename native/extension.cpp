// Python side of the shim: arms it, drains its samples, and marks Python's allocations.
#include <Python.h>
#include <dlfcn.h>
#include <signal.h>
#include <time.h>

#include <pybind11/pybind11.h>

#include "shim_api.h"

namespace py = pybind11;

extern "C" int pytest_scalene_walk_frames(PyThreadState* tstate, uint64_t* codes, int32_t* lines,
                                          int max);
extern "C" const char* pytest_scalene_code_seen_problem(void);
extern "C" int pytest_scalene_code_seen_start(void);
extern "C" PyObject* pytest_scalene_code_seen_stop(void);
extern "C" PyObject* pytest_scalene_code_seen_callback(void);
extern "C" void pytest_scalene_code_seen_keep_outside(int keep);
extern "C" PyObject* pytest_scalene_code_seen_take_outside(void);

namespace {

ShimApi* find_shim() {
  using Getter = ShimApi* (*)();
  auto getter = reinterpret_cast<Getter>(dlsym(RTLD_DEFAULT, "pytest_scalene_shim_api"));
  ShimApi* api = getter ? getter() : nullptr;
  return api && api->abi == PYTEST_SCALENE_SHIM_ABI ? api : nullptr;
}

ShimApi* shim() {
  static ShimApi* api = find_shim();
  if (!api) throw std::runtime_error("the pytest-scalene allocator shim is not preloaded");
  return api;
}

// Which of Python's allocations count as Python's: those that entered the object or the mem
// domain (PyObject_Malloc, PyMem_Malloc: what Python's objects and their buffers use, with the
// GIL held), and pymalloc's arenas (mapped without malloc). The RAW domain is not Python's:
// PyMem_RawMalloc may be called by anyone, without the GIL, and numpy >= 2.5 allocates array
// data there. Large objects that pymalloc passes on to the RAW domain count as Python's because
// the flag set on entering the object domain is still set (small ones never reach malloc: the
// shim's wrappers let them through unmarked, see hook_python_domain).
struct Hook {
  PyMemAllocatorDomain domain;
  PyMemAllocatorEx previous;
  PyMemAllocatorEx ours;
  bool installed;  // still ours, or left in place as a pass-through (uninstall_python_hooks)
};
Hook hooks[] = {{PYMEM_DOMAIN_MEM, {}, {}, false}, {PYMEM_DOMAIN_OBJ, {}, {}, false}};
ShimArenaAllocator previous_arena;
PyObjectArenaAllocator our_arena;
bool arena_installed = false;
int install_count = 0;

void install_python_hooks() {
  ShimApi* api = shim();
  if (install_count++ > 0) return;
  int slot = 0;
  for (Hook& hook : hooks) {
    int this_slot = slot++;
    // A pass-through left in place still calls the slot's previous allocator: hooking over it
    // again would make that the allocator installed over ours, a loop.
    if (hook.installed) continue;
    PyMem_GetAllocator(hook.domain, &hook.previous);
    const PyMemAllocatorEx& p = hook.previous;
    ShimAllocator ours = {p.ctx, p.malloc, p.calloc, p.realloc, p.free};
    api->hook_python_domain(this_slot, &ours);
    hook.ours = {ours.ctx, ours.malloc, ours.calloc, ours.realloc, ours.free};
    PyMem_SetAllocator(hook.domain, &hook.ours);
    hook.installed = true;
  }
  if (arena_installed) return;  // a pass-through, as above
  PyObjectArenaAllocator current;
  PyObject_GetArenaAllocator(&current);
  previous_arena = {current.ctx, current.alloc, current.free};
  our_arena = {&previous_arena, api->python_arena_alloc, api->python_arena_free};
  PyObject_SetArenaAllocator(&our_arena);
  arena_installed = true;
}

// False when another allocator was installed over ours (tracemalloc...): ours then stays, as a
// pass-through, so that their chain is not cut.
bool uninstall_python_hooks() {
  if (install_count == 0 || --install_count > 0) return true;
  bool all = true;
  for (Hook& hook : hooks) {
    if (!hook.installed) continue;
    PyMemAllocatorEx current;
    PyMem_GetAllocator(hook.domain, &current);
    if (current.ctx != hook.ours.ctx || current.malloc != hook.ours.malloc) {
      all = false;
      continue;
    }
    PyMem_SetAllocator(hook.domain, &hook.previous);
    hook.installed = false;
  }
  if (arena_installed) {
    PyObjectArenaAllocator current;
    PyObject_GetArenaAllocator(&current);
    if (current.ctx == &previous_arena && current.alloc == our_arena.alloc) {
      PyObjectArenaAllocator previous = {previous_arena.ctx, previous_arena.alloc,
                                         previous_arena.free};
      PyObject_SetArenaAllocator(&previous);
      arena_installed = false;
    } else {
      all = false;
    }
  }
  return all;
}

// The shim calls this in the sampling thread, inside the allocator: it records that thread's
// Python stack (code objects and lines, innermost first) without allocating. With the GIL held,
// it takes references, so the code objects outlive the frames until the samples are drained;
// without it (native code that released the GIL), only the addresses: Python matches them with
// code objects it holds when draining.
void capture_where(ShimWhere* where) {
  PyThreadState* tstate = PyGILState_GetThisThreadState();
  if (tstate == nullptr) return;  // a thread Python does not know (a BLAS pool)
  where->depth = pytest_scalene_walk_frames(tstate, where->code, where->line, SHIM_WHERE_DEPTH);
  if (where->depth > 0 && PyGILState_Check()) {
    for (int i = 0; i < where->depth; i++) Py_INCREF(reinterpret_cast<PyObject*>(where->code[i]));
    where->owned = 1;
  }
}

void arm(int64_t threshold, int64_t leak_step, int64_t copy_step, int signum) {
  if (threshold < 1 || leak_step < 1 || copy_step < 1) {
    throw std::invalid_argument("threshold, leak_step and copy_step must be >= 1");
  }
  void* handler = nullptr;
  if (signum > 0) {
    struct sigaction current;
    if (sigaction(signum, nullptr, &current) != 0) throw std::invalid_argument("bad signal");
    handler = reinterpret_cast<void*>(current.sa_handler);
  }
  shim()->set_capture(capture_where);
  shim()->arm(threshold, leak_step, copy_step, signum, handler);
}

py::list take_samples() {
  size_t count = 0;
  ShimSample* samples = shim()->take_samples(&count);
  py::list out;
  for (size_t i = 0; i < count; i++) {
    const ShimSample& s = samples[i];
    py::tuple stack(s.where.depth);
    for (int j = 0; j < s.where.depth; j++) {
      py::object code;
      if (s.where.owned) {  // steal the reference taken at capture
        code = py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(s.where.code[j]));
      } else {
        code = py::int_(s.where.code[j]);
      }
      stack[j] = py::make_tuple(code, s.where.line[j]);
    }
    out.append(py::make_tuple(s.kind, s.tracked_id, s.footprint, s.alloc_bytes, s.free_bytes,
                              s.python_bytes, s.copy_bytes, s.time_ns, s.thread, stack));
  }
  shim()->release_samples(samples);
  return out;
}

// A test's start in one call (the sampler's per-test cost was five calls into this module):
// the samples lost so far, the footprint and the clock (time.monotonic_ns's), then arm().
py::tuple begin_test(int64_t threshold, int64_t leak_step, int64_t copy_step, int signum) {
  ShimApi* api = shim();
  if (api->armed()) {
    throw std::runtime_error("the allocator shim is already armed (pytest run inside pytest?)");
  }
  int64_t dropped = api->dropped();
  int64_t footprint = api->footprint();
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  arm(threshold, leak_step, copy_step, signum);
  return py::make_tuple(dropped, footprint, int64_t(now.tv_sec) * 1000000000 + now.tv_nsec);
}

// A test's end in one call: disarm(), then the clock, the footprint, the peak since arm() and
// the samples lost so far, read before the samples become Python objects (which allocate).
py::tuple end_test() {
  ShimApi* api = shim();
  api->disarm();
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  int64_t footprint = api->footprint();
  int64_t peak = api->peak();
  int64_t dropped = api->dropped();
  py::list samples = take_samples();
  return py::make_tuple(int64_t(now.tv_sec) * 1000000000 + now.tv_nsec, samples, footprint,
                        peak, dropped);
}

}  // namespace

// A new list from the C side, or its Python exception raised (NULL).
static py::list new_list_or_raise(PyObject* list) {
  if (list == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::list>(list);
}

PYBIND11_MODULE(_native, m) {
  m.doc() = "pytest-scalene native helpers: the allocator shim's controls";
  m.def("shim_loaded", []() { return find_shim() != nullptr; },
        "True when the allocator shim is preloaded into this process.");
  m.attr("GROW") = static_cast<int>(SHIM_GROW);
  m.attr("SHRINK") = static_cast<int>(SHIM_SHRINK);
  m.attr("COPY") = static_cast<int>(SHIM_COPY);
  m.attr("WHERE_DEPTH") = static_cast<int>(SHIM_WHERE_DEPTH);
  m.def("arm", &arm, py::arg("threshold"), py::arg("leak_step"), py::arg("copy_step"),
        py::arg("signum"),
        "Start sampling; samples raise `signum` (whose current handler must stay installed).");
  m.def("disarm", []() { shim()->disarm(); }, "Stop sampling; no signal is raised after it.");
  m.def("begin_test", &begin_test, py::arg("threshold"), py::arg("leak_step"),
        py::arg("copy_step"), py::arg("signum"),
        "A test's start: (dropped, footprint, monotonic_ns) read, then arm(); RuntimeError "
        "where the shim is already armed.");
  m.def("end_test", &end_test,
        "A test's end: disarm(), then (monotonic_ns, samples, footprint, peak, dropped).");
  m.def("armed", []() { return shim()->armed() != 0; });
  m.def("take_samples", &take_samples,
        "Pending samples: (kind, tracked_id, footprint, alloc_bytes, free_bytes, python_bytes, "
        "copy_bytes, time_ns, thread, stack) tuples; stack: ((code, line), ...) innermost first, "
        "code a code object, or its address (int) when taken without the GIL.");
  m.def("footprint", []() { return shim()->footprint(); }, "Live malloc'd bytes now.");
  m.def("peak", []() { return shim()->peak(); }, "Highest footprint since arm().");
  m.def("leak_freed", [](int32_t id) { return shim()->leak_freed(id) != 0; },
        "Whether the tracked allocation `id` has been freed.");
  m.def("dropped", []() { return shim()->dropped(); }, "Samples lost (buffer could not grow).");
  m.def("install_python_hooks", &install_python_hooks,
        "Wrap Python's allocators (the MEM and OBJ domains, object arenas) so that their "
        "bytes count as Python's (the RAW domain is native's). Counted: call "
        "uninstall_python_hooks as many times.");
  m.def("uninstall_python_hooks", &uninstall_python_hooks,
        "Unwrap them; False when another allocator sits on top (ours stays as a pass-through).");
  m.def("code_seen_problem",
        []() -> py::object {
          const char* problem = pytest_scalene_code_seen_problem();
          return problem ? py::object(py::str(problem)) : py::object(py::none());
        },
        "Why the code recorder cannot run in this process, or None.");
  m.def("code_seen_start",
        []() {
          if (pytest_scalene_code_seen_start() < 0) throw std::bad_alloc();
        },
        "Begin recording each code object run (3.10/3.11: install the frame-evaluation hook; "
        "3.12+: keep what code_seen_callback() sees); a no-op when code_seen_problem() is not "
        "None.");
  m.def("code_seen_stop", []() { return new_list_or_raise(pytest_scalene_code_seen_stop()); },
        "Stop recording; the code objects run since code_seen_start, each once.");
  m.def("code_seen_keep_outside",
        [](bool keep) { pytest_scalene_code_seen_keep_outside(keep ? 1 : 0); },
        "3.12+: whether code_seen_callback() keeps what fires outside a recording, for "
        "code_seen_take_outside() (off: dropped).");
  m.def("code_seen_take_outside",
        []() { return new_list_or_raise(pytest_scalene_code_seen_take_outside()); },
        "The code objects that fired outside a recording since the last call, each once.");
  m.def("code_seen_callback",
        []() {
          PyObject* callback = pytest_scalene_code_seen_callback();
          if (callback == nullptr) throw py::error_already_set();
          return py::reinterpret_steal<py::object>(callback);
        },
        "3.12+: the builtin to register with sys.monitoring for PY_START, PY_RESUME and "
        "PY_THROW; None where recording from C is not available.");
}
