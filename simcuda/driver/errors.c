/* simcuda/driver/errors.c: the driver's error names and descriptions
 * (cuGetErrorName, cuGetErrorString), for the codes the simulated driver
 * returns and the common others; an unknown code is
 * CUDA_ERROR_INVALID_VALUE, as in the driver.
 */
#define _GNU_SOURCE
#include "simcuda.h"

#include <stddef.h>

static const struct { CUresult code; const char *name, *text; } g_errors[] = {
#define E(c, t) {c, #c, t}
    E(CUDA_SUCCESS, "no error"),
    E(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    E(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    E(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
    E(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    E(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    E(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    E(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"),
    E(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
    E(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    E(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    E(CUDA_ERROR_NOT_READY, "device not ready"),
    E(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
    E(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch"),
    E(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled"),
    E(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "peer access has not been enabled"),
    E(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    E(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    E(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing"),
    E(CUDA_ERROR_UNKNOWN, "unknown error"),
#undef E
};

CUresult cuGetErrorName(CUresult e, const char **s) {
  if (!s)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
    if (g_errors[i].code == e) {
      *s = g_errors[i].name;
      return CUDA_SUCCESS;
    }
  *s = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult e, const char **s) {
  if (!s)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
    if (g_errors[i].code == e) {
      *s = g_errors[i].text;
      return CUDA_SUCCESS;
    }
  *s = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}
