// Callgrind client requests for the instruction-count mode (pytest_scalene/instructions/).
// Outside valgrind each request is a few no-op instructions. Built without valgrind's header
// (Debian's valgrind package ships it), the module still imports and says so: available()
// is False and the mode refuses to start with a message naming the missing package.
#include <Python.h>

#ifdef PYTEST_SCALENE_HAVE_CALLGRIND
#include <valgrind/callgrind.h>
#endif

namespace {

PyObject* available(PyObject*, PyObject*) {
#ifdef PYTEST_SCALENE_HAVE_CALLGRIND
  Py_RETURN_TRUE;
#else
  Py_RETURN_FALSE;
#endif
}

PyObject* on_valgrind(PyObject*, PyObject*) {
#ifdef PYTEST_SCALENE_HAVE_CALLGRIND
  return PyBool_FromLong(RUNNING_ON_VALGRIND != 0);
#else
  Py_RETURN_FALSE;
#endif
}

// Counting on: zero the counters, then instrument. Called right before the measured call.
PyObject* start(PyObject*, PyObject*) {
#ifdef PYTEST_SCALENE_HAVE_CALLGRIND
  CALLGRIND_ZERO_STATS;
  CALLGRIND_START_INSTRUMENTATION;
#endif
  Py_RETURN_NONE;
}

// Counting off, then one dump named `label` (a file of its own: callgrind.out.PID.N).
PyObject* stop_and_dump(PyObject*, PyObject* label) {
  const char* text = PyUnicode_AsUTF8(label);
  if (text == nullptr) return nullptr;
#ifdef PYTEST_SCALENE_HAVE_CALLGRIND
  CALLGRIND_STOP_INSTRUMENTATION;
  CALLGRIND_DUMP_STATS_AT(text);
#endif
  Py_RETURN_NONE;
}

// Collection off or on, instrumentation kept (cheap, unlike stopping it, which drops callgrind's
// translations): what runs between two toggles is not counted. Used in pairs.
PyObject* toggle_collect(PyObject*, PyObject*) {
#ifdef PYTEST_SCALENE_HAVE_CALLGRIND
  CALLGRIND_TOGGLE_COLLECT;
#endif
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"available", available, METH_NOARGS, "Built with valgrind's client-request header."},
    {"on_valgrind", on_valgrind, METH_NOARGS, "This process runs under valgrind."},
    {"start", start, METH_NOARGS, "Zero callgrind's counters and start instrumenting."},
    {"stop_and_dump", stop_and_dump, METH_O, "Stop instrumenting and dump the counts as LABEL."},
    {"toggle_collect", toggle_collect, METH_NOARGS, "Stop or resume counting (used in pairs)."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "_callgrind",
                      "Callgrind client requests around a measured call.", -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__callgrind() { return PyModule_Create(&module); }
