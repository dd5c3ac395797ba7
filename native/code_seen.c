// Which code objects ran between start and stop, on Python 3.10 and 3.11 (3.12+ uses
// sys.monitoring, in Python): a PEP 523 frame-evaluation hook, installed only between start and
// stop, records each frame's code object into an open-addressing set, then runs the frame with
// the default evaluator. Every frame passes through the hook: a call, a generator or coroutine
// resumed, a callback called from C, in any thread (the hook is the interpreter's, and it runs
// with the GIL held, which also guards the set). The set holds strong references, so an
// address cannot be reused by another code object before stop() hands them out.
// On 3.11 any eval-frame function turns off the inlined Python-to-Python calls: each call
// costs a C-level call while the hook is installed (measured in docs/benchmarks-code-map.md).
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

#define INITIAL_CAPACITY 1024  // a power of two; most tests run fewer distinct code objects

static PyObject** table = NULL;  // NULL = empty slot
static size_t capacity = 0;
static size_t used = 0;
static int out_of_memory = 0;
static int installed = 0;

static size_t slot_of(PyObject* code) {
  uint64_t h = (uint64_t)(uintptr_t)code >> 4;  // objects are 16-byte aligned
  return (size_t)((h * 0x9E3779B97F4A7C15ull) >> 20) & (capacity - 1);
}

static void insert_new(PyObject** into, size_t cap, PyObject* code) {
  uint64_t h = (uint64_t)(uintptr_t)code >> 4;
  size_t i = (size_t)((h * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
  while (into[i] != NULL) i = (i + 1) & (cap - 1);
  into[i] = code;
}

static int grow(void) {
  size_t bigger = capacity * 2;
  PyObject** fresh = calloc(bigger, sizeof(PyObject*));
  if (fresh == NULL) return 0;
  for (size_t i = 0; i < capacity; i++) {
    if (table[i] != NULL) insert_new(fresh, bigger, table[i]);
  }
  free(table);
  table = fresh;
  capacity = bigger;
  return 1;
}

static inline void remember(PyObject* code) {
  size_t i = slot_of(code);
  while (table[i] != NULL) {
    if (table[i] == code) return;  // the common case: seen already
    i = (i + 1) & (capacity - 1);
  }
  if ((used + 1) * 2 > capacity) {  // keep the load under one half: short probes
    if (!grow()) {
      out_of_memory = 1;
      return;
    }
    insert_new(table, capacity, code);
  } else {
    table[i] = code;
  }
  Py_INCREF(code);
  used++;
}

#if PY_VERSION_HEX >= 0x030B0000
static PyObject* record_frame(PyThreadState* tstate, _PyInterpreterFrame* frame, int throwflag) {
  remember((PyObject*)frame->f_code);
  return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
}
#else
static PyObject* record_frame(PyThreadState* tstate, PyFrameObject* frame, int throwflag) {
  remember((PyObject*)frame->f_code);
  return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
}
#endif

// NULL when the hook can be installed, else why not (a static string).
const char* pytest_scalene_code_seen_problem(void) {
  if (installed) return NULL;
  _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
  if (current != _PyEval_EvalFrameDefault) {
    return "another frame-evaluation function (PEP 523: a debugger such as pydevd, a JIT) is "
           "installed; the code map's recorder will not replace it";
  }
  return NULL;
}

// Begins recording; 0 when it cannot (problem() says why; out of memory: -1).
int pytest_scalene_code_seen_start(void) {
  if (pytest_scalene_code_seen_problem() != NULL) return 0;
  if (table == NULL) {
    table = calloc(INITIAL_CAPACITY, sizeof(PyObject*));
    if (table == NULL) return -1;
    capacity = INITIAL_CAPACITY;
  }
  // Forget what was seen: a frame-evaluation function reinstalled by someone else (our own
  // hook, by address) may have recorded since the last stop.
  for (size_t i = 0; used > 0 && i < capacity; i++) {
    if (table[i] != NULL) {
      Py_DECREF(table[i]);
      table[i] = NULL;
      used--;
    }
  }
  out_of_memory = 0;
  if (!installed) {
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), record_frame);
    installed = 1;
  }
  return 1;
}

// Stops recording; a new list of the code objects seen since start (each once), the set empty.
// NULL with an exception set when memory ran out (while recording or building the list).
PyObject* pytest_scalene_code_seen_stop(void) {
  int replaced = 0;
  if (installed) {
    PyInterpreterState* interp = PyInterpreterState_Get();
    // Someone may have put their own function on top since start: leave theirs in place, and
    // say that the record is incomplete (frames run since went past the hook).
    if (_PyInterpreterState_GetEvalFrameFunc(interp) == record_frame) {
      _PyInterpreterState_SetEvalFrameFunc(interp, _PyEval_EvalFrameDefault);
    } else {
      replaced = 1;
    }
    installed = 0;
  }
  PyObject* seen = PyList_New((Py_ssize_t)used);
  size_t n = 0;
  for (size_t i = 0; i < capacity; i++) {
    if (table[i] == NULL) continue;
    if (seen != NULL) {
      PyList_SET_ITEM(seen, (Py_ssize_t)n, table[i]);  // the set's reference moves to the list
    } else {
      Py_DECREF(table[i]);
    }
    table[i] = NULL;
    n++;
  }
  used = 0;
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
  out_of_memory = 0;
  return seen;
}

#else  // 3.12+: sys.monitoring does this (pytest_scalene/sampling/code_seen.py)

const char* pytest_scalene_code_seen_problem(void) {
  return "Python 3.12+ records with sys.monitoring, not with this hook";
}
int pytest_scalene_code_seen_start(void) { return 0; }
PyObject* pytest_scalene_code_seen_stop(void) { return PyList_New(0); }

#endif
