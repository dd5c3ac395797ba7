// The CPU sampler's per-test system calls, one Python call at each end of a test
// (pytest_scalene/sampling/cpu_sampler.py). In Python the same work was about twenty calls a test
// (signal and timer checks, arming, three clocks), run cold between pytest's own work; and the
// kernel's handler was read through ctypes, whose import a CPU-only session paid for this alone.
// Readings are converted exactly as the signal and resource modules convert theirs, so that a
// test's start read here and a sample read there subtract without a rounding step.
#include <Python.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>

// signalmodule.c and resource.c: seconds from a timeval.
static double timer_seconds(struct timeval tv) { return tv.tv_sec + (tv.tv_usec / 1000000.0); }
static double usage_seconds(struct timeval tv) {
  return (double)tv.tv_sec + (double)tv.tv_usec * 0.000001;
}

// signal.setitimer's rounding: seconds to nanoseconds, then to microseconds, both up.
static struct timeval timeval_up(double seconds) {
  long long ns = (long long)ceil(seconds * 1e9);
  long long us = (ns + 999) / 1000;
  struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};
  return tv;
}

// The kernel's handler for a signal: its address (0 default, 1 ignore), None if unknown. A
// handler set in C (faulthandler.register, a preloaded library) is invisible to getsignal.
static PyObject* kernel_handler(PyObject* module, PyObject* arg) {
  int signum = (int)PyLong_AsLong(arg);
  if (signum == -1 && PyErr_Occurred()) return NULL;
  struct sigaction action;
  if (sigaction(signum, NULL, &action) != 0) Py_RETURN_NONE;
  return PyLong_FromVoidPtr((void*)action.sa_handler);
}

// -- Delivery stamps ------------------------------------------------------------------------------
// The main thread's CPU clock when the kernel delivered the sampler's signal, read by a C handler
// that runs before Python's (which only notes the signal: the Python handler runs at the main
// thread's next bytecode). The main thread's CPU time from delivery to the Python handler is
// what native code held it back by (signal_delay.py). Measured from the timer's expiry instead,
// the delay also held the kernel's lag in noticing it: CPU timers are checked at ticks on a CPU
// running the process, and on a CPU shared with busy processes its slices end before a tick for
// milliseconds, so a pure-Python loop read 3-19% Python (docs/cpu.md).
static struct sigaction chained;  // Python's handler, run after the stamp
static clockid_t main_clock;
static int64_t delivered_ns = -1;  // the first delivery not yet taken; -1: none

static void stamp_handler(int signum, siginfo_t* info, void* context) {
  int saved_errno = errno;
  struct timespec ts;
  int64_t none = -1;  // two threads can take a delivery each at once: the first stamp stays
  if (__atomic_load_n(&delivered_ns, __ATOMIC_ACQUIRE) < 0 && clock_gettime(main_clock, &ts) == 0)
    __atomic_compare_exchange_n(&delivered_ns, &none, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec,
                                0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  errno = saved_errno;
  if (chained.sa_flags & SA_SIGINFO)
    chained.sa_sigaction(signum, info, context);
  else if (chained.sa_handler != SIG_DFL && chained.sa_handler != SIG_IGN)
    chained.sa_handler(signum);
}

// stamp_install(signum) -> the kernel handler's address now: the stamp's in front of the handler
// Python just installed (called on the main thread, whose clock it reads), or None where the
// kernel's handler is no function to chain to (nothing changed). Python's signal.signal on
// `signum` later replaces it with its own again.
static PyObject* stamp_install(PyObject* module, PyObject* arg) {
  int signum = (int)PyLong_AsLong(arg);
  if (signum == -1 && PyErr_Occurred()) return NULL;
  struct sigaction python, stamped;
  if (sigaction(signum, NULL, &python) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  if (python.sa_handler == SIG_DFL || python.sa_handler == SIG_IGN) Py_RETURN_NONE;
  if ((void*)python.sa_handler == (void*)stamp_handler) return PyLong_FromVoidPtr((void*)stamp_handler);
  if (pthread_getcpuclockid(pthread_self(), &main_clock) != 0) Py_RETURN_NONE;
  chained = python;
  stamped = python;
  stamped.sa_sigaction = stamp_handler;
  stamped.sa_flags |= SA_SIGINFO;
  __atomic_store_n(&delivered_ns, -1, __ATOMIC_RELEASE);
  if (sigaction(signum, &stamped, NULL) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  return PyLong_FromVoidPtr((void*)stamp_handler);
}

// stamp_take() -> the main thread's CPU seconds at the first delivery since the last take, or
// None where none came (or no stamp is installed).
static PyObject* stamp_take(PyObject* module, PyObject* unused) {
  int64_t ns = __atomic_exchange_n(&delivered_ns, -1, __ATOMIC_ACQ_REL);
  if (ns < 0) Py_RETURN_NONE;
  return PyFloat_FromDouble((double)ns / 1e9);
}

static int parse(PyObject* const* args, Py_ssize_t nargs, Py_ssize_t want, const char* name) {
  if (nargs == want) return 1;
  PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", name, want, nargs);
  return 0;
}

// The test's start while no sample has landed in it (most tests end before the first): kept here
// by begin(..., threads, main_ident), charged by end_test, handed to Python by start_readings
// when a sample lands first. Python then keeps no reading of its own: one call at each end of
// the test is all the CPU sampler's work in Python (docs/benchmarks-ms-suite.md).
static struct {
  int held;
  double user, system, wall, until_expiry;
} start;

// time.perf_counter() as Python computes it: CLOCK_MONOTONIC in nanoseconds, then seconds.
static double perf_counter_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec) / 1e9;
}

// Whether threading knows the main thread alone (threads.only_main_thread): `threads` is
// threading._active, `main_ident` the main thread's ident.
static int only_main_thread(PyObject* threads, PyObject* main_ident) {
  if (!PyDict_Check(threads) || PyDict_GET_SIZE(threads) != 1) return 0;
  int found = PyDict_Contains(threads, main_ident);
  if (found < 0) PyErr_Clear();  // an ident that cannot be looked up is no thread of theirs
  return found == 1;
}

// begin(signum, handler, itimer, interval_s[, threads, main_ident]) -> (user_s, system_s,
// until_expiry_s), True or None. None, with nothing changed, where the signal's kernel handler is
// no longer `handler` or the timer is running: code that bypassed the signal guard took them (the
// caller then looks why). Else the timer is armed with `interval_s` and the clocks are read after
// arming. Arming returns the timer as it was, so no getitimer first: a running one (rare) is put
// back as it was. Given `threads` and `main_ident` where threading knows the main thread alone,
// the readings (and perf_counter's) are kept here for end_test, and True is returned.
static PyObject* begin(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 6 && !parse(args, nargs, 4, "begin")) return NULL;
  int signum = (int)PyLong_AsLong(args[0]);
  void* handler = PyLong_AsVoidPtr(args[1]);
  int which = (int)PyLong_AsLong(args[2]);
  double interval = PyFloat_AsDouble(args[3]);
  if (PyErr_Occurred()) return NULL;
  struct sigaction action;
  struct itimerval timer, was;
  if (sigaction(signum, NULL, &action) != 0 || (void*)action.sa_handler != handler) Py_RETURN_NONE;
  timer.it_interval = timer.it_value = timeval_up(interval);
  if (setitimer(which, &timer, &was) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  if (was.it_value.tv_sec != 0 || was.it_value.tv_usec != 0) {
    if (setitimer(which, &was, NULL) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
  }
  __atomic_store_n(&delivered_ns, -1, __ATOMIC_RELEASE);  // one between tests is not this test's
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0 || getitimer(which, &timer) != 0)
    return PyErr_SetFromErrno(PyExc_OSError);
  double user = usage_seconds(usage.ru_utime), system = usage_seconds(usage.ru_stime);
  double until_expiry = timer_seconds(timer.it_value);
  start.held = nargs == 6 && only_main_thread(args[4], args[5]);
  if (!start.held) return Py_BuildValue("(ddd)", user, system, until_expiry);
  start.user = user;
  start.system = system;
  start.until_expiry = until_expiry;
  start.wall = perf_counter_seconds();
  Py_RETURN_TRUE;
}

// end(itimer, interval_s) -> (user_s, system_s): the timer disarmed where it is still the
// sampler's (its interval `interval_s` as getitimer reads it, or expired), then the clocks read.
// Disarming returns the timer as it was: another's (rare) is put back.
static PyObject* end(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  if (!parse(args, nargs, 2, "end")) return NULL;
  int which = (int)PyLong_AsLong(args[0]);
  double interval = PyFloat_AsDouble(args[1]);
  if (PyErr_Occurred()) return NULL;
  struct itimerval off = {{0, 0}, {0, 0}}, was;
  if (setitimer(which, &off, &was) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  double running = timer_seconds(was.it_interval);
  if (running != 0.0 && running != interval && setitimer(which, &was, NULL) != 0)
    return PyErr_SetFromErrno(PyExc_OSError);
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  return Py_BuildValue("(dd)", usage_seconds(usage.ru_utime), usage_seconds(usage.ru_stime));
}

// start_readings() -> (user_s, system_s, wall_s, until_expiry_s) kept by begin, or None; they
// are Python's from then on (a sample landed, or the test ends on the general path).
static PyObject* start_readings(PyObject* module, PyObject* unused) {
  if (!start.held) Py_RETURN_NONE;
  start.held = 0;
  return Py_BuildValue("(dddd)", start.user, start.system, start.wall, start.until_expiry);
}

// The profile's CPU attributes, interned at the module's import: a name made from a C string at
// each call is hashed and compared in full at every look-up.
static PyObject *cpu_python_s, *cpu_system_s;

// profile.<name> += value, for a float attribute.
static int add_to(PyObject* profile, PyObject* name, double value) {
  PyObject* was = PyObject_GetAttr(profile, name);
  if (was == NULL) return -1;
  double total = PyFloat_AsDouble(was);
  Py_DECREF(was);
  if (total == -1.0 && PyErr_Occurred()) return -1;
  PyObject* now = PyFloat_FromDouble(total + value);
  if (now == NULL) return -1;
  int failed = PyObject_SetAttr(profile, name, now);
  Py_DECREF(now);
  return failed;
}

// end_test(itimer, interval_s, profile, threads, main_ident) -> used_s or None. The test begun
// by begin(..., threads, main_ident), where threading still knows the main thread alone: end()
// and cpu_sampler._final_main_only in one call, the CPU time since the start charged to
// `profile` (cpu_python_s, cpu_system_s) and returned. None, nothing done, where begin kept no
// readings or other threads run: the caller takes start_readings.
static PyObject* end_test(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  if (!parse(args, nargs, 5, "end_test")) return NULL;
  if (!start.held || !only_main_thread(args[3], args[4])) Py_RETURN_NONE;
  PyObject* ended = end(module, args, 2);  // (itimer, interval_s)
  if (ended == NULL) return NULL;
  double user_now = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(ended, 0));
  double system_now = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(ended, 1));
  Py_DECREF(ended);
  start.held = 0;
  double user = fmax(0.0, user_now - start.user);
  double system = fmax(0.0, system_now - start.system);
  double used = user + system;
  if (used > 0) {
    // signal_delay.SignalDelay.python_share(ended=True) for a test no sample landed in: both
    // ends on time (the start, and an end no native code held back: a signal delivered since
    // would have had its handler run at a bytecode before this call), so all of it is Python.
    if (add_to(args[2], cpu_python_s, user) != 0 || add_to(args[2], cpu_system_s, system) != 0)
      return NULL;
  }
  return PyFloat_FromDouble(used);
}

static PyMethodDef methods[] = {
    {"kernel_handler", kernel_handler, METH_O,
     "kernel_handler(signum): the kernel's handler address (0 default, 1 ignore), or None."},
    {"begin", (PyCFunction)(void (*)(void))begin, METH_FASTCALL,
     "begin(signum, handler, itimer, interval_s): (user_s, system_s, until_expiry_s), or None "
     "where the signal's handler is not `handler` or the timer runs; True where the readings "
     "are kept for end_test (begin(..., threads, main_ident), the main thread alone)."},
    {"start_readings", start_readings, METH_NOARGS,
     "start_readings(): (user_s, system_s, wall_s, until_expiry_s) kept by begin, or None."},
    {"end_test", (PyCFunction)(void (*)(void))end_test, METH_FASTCALL,
     "end_test(itimer, interval_s, profile, threads, main_ident): end() and the CPU time since "
     "begin charged to `profile`; None where begin kept nothing or threads run."},
    {"stamp_install", stamp_install, METH_O,
     "stamp_install(signum): a C handler that stamps each delivery with the main thread's CPU "
     "clock, in front of Python's; the kernel's handler address now, or None."},
    {"stamp_take", stamp_take, METH_NOARGS,
     "stamp_take(): the main thread's CPU seconds at the first delivery not yet taken, or None."},
    {"end", (PyCFunction)(void (*)(void))end, METH_FASTCALL,
     "end(itimer, interval_s): disarm the sampler's timer, then (user_s, system_s)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_timer_calls",
                                    "The CPU sampler's per-test system calls.", -1, methods};

PyMODINIT_FUNC PyInit__timer_calls(void) {
  cpu_python_s = PyUnicode_InternFromString("cpu_python_s");
  cpu_system_s = PyUnicode_InternFromString("cpu_system_s");
  if (cpu_python_s == NULL || cpu_system_s == NULL) return NULL;
  return PyModule_Create(&module);
}
