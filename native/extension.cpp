#include <dlfcn.h>
#include <pybind11/pybind11.h>
#include "shim_api.h"

namespace py = pybind11;

static ShimApi* find_shim() {
  using Getter = ShimApi* (*)();
  auto getter = reinterpret_cast<Getter>(dlsym(RTLD_DEFAULT, "pytest_scalene_shim_api"));
  return getter ? getter() : nullptr;
}

PYBIND11_MODULE(_native, m) {
  m.doc() = "pytest-scalene native helpers";
  m.def("shim_loaded", []() { return find_shim() != nullptr; },
        "True when the allocator shim is preloaded into this process.");
}
