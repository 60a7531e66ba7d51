// Internal to src/cuda: cudart error codes as Status. Includes the CUDA
// runtime header, so only this folder's CUDA-built files include it.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "base/status.h"

namespace specd::cuda {

// OK for cudaSuccess; otherwise kUnavailable when there is no driver or
// device, kResourceExhausted when out of memory, kInternal for the rest, with
// "what: cudaErrorName: description".
inline Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  const std::string msg =
      std::string(what) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  switch (err) {
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
      return UnavailableError(msg);
    case cudaErrorMemoryAllocation:
      return ResourceExhaustedError(msg);
    default:
      return InternalError(msg);
  }
}

}  // namespace specd::cuda
