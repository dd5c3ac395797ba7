// Which code objects ran between start and stop. Both means record each code object into one
// open-addressing set holding strong references (an address cannot be reused by another code
// object before stop() hands them out), guarded by the GIL:
// - Python 3.10 and 3.11: a PEP 523 frame-evaluation hook, installed only between start and
//   stop, records each frame's code object, then runs the frame with the default evaluator.
//   Every frame passes through it: a call, a generator or coroutine resumed, a callback called
//   from C, in any thread. On 3.11 any eval-frame function turns off the inlined
//   Python-to-Python calls: each call costs a C-level call while the hook is installed
//   (measured in docs/benchmarks-code-map.md).
// - Python 3.12+: the callback that pytest_scalene/sampling/code_seen.py registers with
//   sys.monitoring for PY_START, PY_RESUME and PY_THROW, a builtin (METH_FASTCALL) rather than
//   a Python function: it runs once per code object per recording (it returns DISABLE), and
//   a Python callback's frame cost about as much as the rest of the event. What fires between
//   recordings goes to a second set while code_seen.py asks for it (keep_outside): code that
//   first ran there, for it to follow. Not on a free-threaded build, where the sets would need
//   a lock: code_seen.py records in Python there.
// C, not C++: CPython's internal headers (the 3.11 frame layout) are C.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#elif PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>
#endif

#include <stdint.h>
#include <stdlib.h>

#if PY_VERSION_HEX < 0x030C0000
#define RECORD_WITH_HOOK 1
#elif !defined(Py_GIL_DISABLED)
#define RECORD_WITH_CALLBACK 1
#endif

#if defined(RECORD_WITH_HOOK) || defined(RECORD_WITH_CALLBACK)

#define INITIAL_CAPACITY 1024  // a power of two; most tests run fewer distinct code objects

// An open-addressing set of code objects, holding strong references.
typedef struct {
  PyObject** table;  // NULL = empty slot
  size_t capacity;
  size_t used;
  int out_of_memory;
} CodeSet;

static CodeSet recorded = {NULL, 0, 0, 0};  // what ran between start and stop
// 3.12+, while keep_outside is set: code that fired outside a recording (its events are then
// disabled until the caller re-arms them; it hands them out with take_outside()).
static CodeSet outside = {NULL, 0, 0, 0};
static int keep_outside = 0;
static int active = 0;  // recording: the hook installed, or the callback keeping what it sees

static size_t slot_in(size_t cap, PyObject* code) {
  uint64_t h = (uint64_t)(uintptr_t)code >> 4;  // objects are 16-byte aligned
  return (size_t)((h * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

static void insert_new(PyObject** into, size_t cap, PyObject* code) {
  size_t i = slot_in(cap, code);
  while (into[i] != NULL) i = (i + 1) & (cap - 1);
  into[i] = code;
}

static int set_ready(CodeSet* set) {
  if (set->table != NULL) return 1;
  set->table = calloc(INITIAL_CAPACITY, sizeof(PyObject*));
  if (set->table == NULL) return 0;
  set->capacity = INITIAL_CAPACITY;
  return 1;
}

static int grow(CodeSet* set) {
  size_t bigger = set->capacity * 2;
  PyObject** fresh = calloc(bigger, sizeof(PyObject*));
  if (fresh == NULL) return 0;
  for (size_t i = 0; i < set->capacity; i++) {
    if (set->table[i] != NULL) insert_new(fresh, bigger, set->table[i]);
  }
  free(set->table);
  set->table = fresh;
  set->capacity = bigger;
  return 1;
}

static inline void remember_in(CodeSet* set, PyObject* code) {
  if (set->table == NULL && !set_ready(set)) {
    set->out_of_memory = 1;
    return;
  }
  size_t i = slot_in(set->capacity, code);
  while (set->table[i] != NULL) {
    if (set->table[i] == code) return;  // the common case: seen already
    i = (i + 1) & (set->capacity - 1);
  }
  if ((set->used + 1) * 2 > set->capacity) {  // keep the load under one half: short probes
    if (!grow(set)) {
      set->out_of_memory = 1;
      return;
    }
    insert_new(set->table, set->capacity, code);
  } else {
    set->table[i] = code;
  }
  Py_INCREF(code);
  set->used++;
}

static inline void remember(PyObject* code) { remember_in(&recorded, code); }

static void set_clear(CodeSet* set) {
  for (size_t i = 0; set->used > 0 && i < set->capacity; i++) {
    if (set->table[i] != NULL) {
      Py_DECREF(set->table[i]);
      set->table[i] = NULL;
      set->used--;
    }
  }
  set->out_of_memory = 0;
}

// A new list of the set's code objects (its references move there), the set emptied; NULL
// with MemoryError set when the list cannot be made (the references are then dropped).
static PyObject* set_drain(CodeSet* set) {
  PyObject* seen = PyList_New((Py_ssize_t)set->used);
  size_t n = 0;
  for (size_t i = 0; i < set->capacity; i++) {
    if (set->table[i] == NULL) continue;
    if (seen != NULL) {
      PyList_SET_ITEM(seen, (Py_ssize_t)n, set->table[i]);
    } else {
      Py_DECREF(set->table[i]);
    }
    set->table[i] = NULL;
    n++;
  }
  set->used = 0;
  return seen;
}

#if defined(RECORD_WITH_HOOK) && PY_VERSION_HEX >= 0x030B0000
static PyObject* record_frame(PyThreadState* tstate, _PyInterpreterFrame* frame, int throwflag) {
  remember((PyObject*)frame->f_code);
  return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
}
#elif defined(RECORD_WITH_HOOK)
static PyObject* record_frame(PyThreadState* tstate, PyFrameObject* frame, int throwflag) {
  remember((PyObject*)frame->f_code);
  return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
}
#endif

// NULL when recording can start, else why not (a static string).
const char* pytest_scalene_code_seen_problem(void) {
#ifdef RECORD_WITH_HOOK
  if (active) return NULL;
  _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
  if (current != _PyEval_EvalFrameDefault) {
    return "another frame-evaluation function (PEP 523: a debugger such as pydevd, a JIT) is "
           "installed; the code map's recorder will not replace it";
  }
#endif
  return NULL;
}

// Begins recording; 0 when it cannot (problem() says why; out of memory: -1).
int pytest_scalene_code_seen_start(void) {
  if (pytest_scalene_code_seen_problem() != NULL) return 0;
  if (!set_ready(&recorded)) return -1;
  // Forget what was seen: a frame-evaluation function reinstalled by someone else (our own
  // hook, by address) may have recorded since the last stop.
  set_clear(&recorded);
#ifdef RECORD_WITH_HOOK
  if (!active) _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), record_frame);
#endif
  active = 1;
  return 1;
}

// Stops recording; a new list of the code objects seen since start (each once), the set empty.
// NULL with an exception set when memory ran out (while recording or building the list).
PyObject* pytest_scalene_code_seen_stop(void) {
  int replaced = 0;
#ifdef RECORD_WITH_HOOK
  if (active) {
    PyInterpreterState* interp = PyInterpreterState_Get();
    // Someone may have put their own function on top since start: leave theirs in place, and
    // say that the record is incomplete (frames run since went past the hook).
    if (_PyInterpreterState_GetEvalFrameFunc(interp) == record_frame) {
      _PyInterpreterState_SetEvalFrameFunc(interp, _PyEval_EvalFrameDefault);
    } else {
      replaced = 1;
    }
  }
#endif
  active = 0;
  int out_of_memory = recorded.out_of_memory;
  recorded.out_of_memory = 0;
  PyObject* seen = set_drain(&recorded);
  if (seen != NULL && out_of_memory) {
    Py_DECREF(seen);
    PyErr_SetString(PyExc_MemoryError, "the code map's recorder could not grow its set");
    seen = NULL;
  } else if (seen != NULL && replaced) {
    Py_DECREF(seen);
    PyErr_SetString(PyExc_RuntimeError,
                    "another frame-evaluation function replaced the code map's recorder while "
                    "it recorded: the record is incomplete");
    seen = NULL;
  }
  return seen;
}

// 3.12+: whether the callback keeps what fires outside a recording (take_outside() hands it
// out). Off: it is dropped, as before.
void pytest_scalene_code_seen_keep_outside(int keep) {
  keep_outside = keep;
  if (!keep) set_clear(&outside);
}

// The code objects that fired outside a recording since the last call, each once (a new list,
// the set emptied); NULL with an exception set when memory ran out.
PyObject* pytest_scalene_code_seen_take_outside(void) {
  if (outside.out_of_memory) {
    set_clear(&outside);
    PyErr_SetString(PyExc_MemoryError, "the code map's recorder could not grow its set");
    return NULL;
  }
  return set_drain(&outside);
}

#ifdef RECORD_WITH_CALLBACK
static PyObject* disable = NULL;  // sys.monitoring.DISABLE, fetched once

// The sys.monitoring callback: (code, offset) for PY_START and PY_RESUME, (code, offset,
// exception) for PY_THROW. Returns DISABLE, so that the code fires again only after the next
// restart_events(); None for PY_THROW, which cannot be disabled.
static PyObject* on_event(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 2 && nargs != 3) {
    PyErr_Format(PyExc_TypeError,
                 "the code map's callback takes (code, offset[, exception]), not %zd arguments",
                 nargs);
    return NULL;
  }
  if (!PyCode_Check(args[0])) {
    PyErr_Format(PyExc_TypeError, "the code map's callback takes a code object, not %.100s",
                 Py_TYPE(args[0])->tp_name);
    return NULL;
  }
  if (active) {
    remember(args[0]);
  } else if (keep_outside) {
    remember_in(&outside, args[0]);
  }
  if (nargs == 3) Py_RETURN_NONE;
  return Py_NewRef(disable);
}

static PyMethodDef on_event_def = {"code_seen_event", (PyCFunction)(void (*)(void))on_event,
                                   METH_FASTCALL, "Records the code object that started."};
#endif

// A new reference to the builtin to register with sys.monitoring (3.12+), None where code
// cannot be recorded from C (3.10/3.11: the hook does it; free-threaded builds); NULL with an
// exception set on failure.
PyObject* pytest_scalene_code_seen_callback(void) {
#ifdef RECORD_WITH_CALLBACK
  if (disable == NULL) {
    PyObject* monitoring = PySys_GetObject("monitoring");  // borrowed
    if (monitoring == NULL) {
      PyErr_SetString(PyExc_RuntimeError, "sys.monitoring is missing");
      return NULL;
    }
    disable = PyObject_GetAttrString(monitoring, "DISABLE");
    if (disable == NULL) return NULL;
  }
  return PyCFunction_NewEx(&on_event_def, NULL, NULL);
#else
  Py_RETURN_NONE;
#endif
}

#else  // a free-threaded build: code_seen.py records in Python

const char* pytest_scalene_code_seen_problem(void) {
  return "a free-threaded build records with sys.monitoring in Python, not in C";
}
int pytest_scalene_code_seen_start(void) { return 0; }
PyObject* pytest_scalene_code_seen_stop(void) { return PyList_New(0); }
void pytest_scalene_code_seen_keep_outside(int keep) { (void)keep; }
PyObject* pytest_scalene_code_seen_take_outside(void) { return PyList_New(0); }
PyObject* pytest_scalene_code_seen_callback(void) { Py_RETURN_NONE; }

#endif
