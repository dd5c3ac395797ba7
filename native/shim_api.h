// The interface between the preloaded shim and the Python extension.
// The extension finds it with dlsym(RTLD_DEFAULT, "pytest_scalene_shim_api"); when the shim is
// not preloaded the symbol is absent and memory profiling is reported as unavailable.
#pragma once
#include <stdint.h>
#include <stddef.h>

#define PYTEST_SCALENE_SHIM_ABI 1

extern "C" {

struct ShimApi {
  int abi;
};

}
