// Whether this process sees a usable GPU now (cuda_api.h), for dpcore.build_info().
#include <cuda_runtime.h>

#include "cuda/cuda_api.h"

namespace dpcore {

bool cudaAvailable() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return false;
  }
  return count > 0;
}

}  // namespace dpcore
