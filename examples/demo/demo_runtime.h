/* The demo "runtime": a tiny HIP-like API executed on the CPU (see runtime.c and docs/demo.md).
 *
 * Every API call dispatches through `demo_api_table_t`, and the runtime registers that table with
 * librocprofiler-register.so.0 as the "hip" runtime, the way libamdhip64 registers its dispatch
 * table. A profiling tool attached later swaps table entries for recording wrappers.
 *
 * The "device" is one worker thread fed by an in-order queue: kernel launches return at once and
 * demoDeviceSynchronize / demoStreamSynchronize wait for the queue to drain. Memory copies go
 * through the same queue and wait for completion (like hipMemcpy). "Device memory" is host memory.
 */
#ifndef DEMO_RUNTIME_H
#define DEMO_RUNTIME_H
#include <stddef.h>
#include <stdint.h>

#define DEMO_RUNTIME_VERSION 10000 /* 1.0.0, encoded like ROCm's major*10000+minor*100+patch */

typedef enum demo_error {
    demoSuccess = 0,
    demoErrorInvalidValue = 1,
    demoErrorOutOfMemory = 2,
    demoErrorNotReady = 3,
} demo_error_t;

typedef enum demo_memcpy_kind {
    demoMemcpyHostToHost = 0,
    demoMemcpyHostToDevice = 1,
    demoMemcpyDeviceToHost = 2,
    demoMemcpyDeviceToDevice = 3,
} demo_memcpy_kind_t;

typedef struct demo_dim3 {
    uint32_t x, y, z;
} demo_dim3_t;

/* A stream is a small integer handle; 0 is the default stream. All streams share the one device
 * queue (execution is in order), the handle only tags the work. */
typedef uint64_t demo_stream_t;

/* A kernel body runs once per launch on the device thread and loops over the whole grid itself.
 * `args` points at the runtime's private copy of the launch arguments. */
typedef void (*demo_kernel_fn)(demo_dim3_t grid, demo_dim3_t block, const void* args);

/* A "code object symbol": name as the profiler shows it, and the body. Must outlive its launches. */
typedef struct demo_kernel {
    const char* name;
    demo_kernel_fn fn;
} demo_kernel_t;

/* The dispatch table registered with rocprofiler-register (tables[0] of the "hip" runtime).
 * `size` is sizeof(demo_api_table_t) so a tool can check which entries exist. Entries are read
 * with acquire loads on every call, so a tool may replace them at any time with atomic stores. */
typedef struct demo_api_table {
    uint64_t size;
    demo_error_t (*demoGetDeviceCount)(int* count);
    demo_error_t (*demoMalloc)(void** ptr, size_t size);
    demo_error_t (*demoFree)(void* ptr);
    demo_error_t (*demoMemcpy)(void* dst, const void* src, size_t size, demo_memcpy_kind_t kind);
    demo_error_t (*demoMemset)(void* dst, int value, size_t size);
    demo_error_t (*demoStreamCreate)(demo_stream_t* stream);
    demo_error_t (*demoStreamDestroy)(demo_stream_t stream);
    demo_error_t (*demoStreamSynchronize)(demo_stream_t stream);
    demo_error_t (*demoLaunchKernel)(const demo_kernel_t* kernel, demo_dim3_t grid, demo_dim3_t block,
                                     const void* args, size_t args_size, demo_stream_t stream);
    demo_error_t (*demoDeviceSynchronize)(void);
} demo_api_table_t;

/* Public API (each forwards to the current table entry). */
demo_error_t demoGetDeviceCount(int* count);
demo_error_t demoMalloc(void** ptr, size_t size);
demo_error_t demoFree(void* ptr);
demo_error_t demoMemcpy(void* dst, const void* src, size_t size, demo_memcpy_kind_t kind);
demo_error_t demoMemset(void* dst, int value, size_t size);
demo_error_t demoStreamCreate(demo_stream_t* stream);
demo_error_t demoStreamDestroy(demo_stream_t stream);
demo_error_t demoStreamSynchronize(demo_stream_t stream);
demo_error_t demoLaunchKernel(const demo_kernel_t* kernel, demo_dim3_t grid, demo_dim3_t block,
                              const void* args, size_t args_size, demo_stream_t stream);
demo_error_t demoDeviceSynchronize(void);

/* Not part of the table: 1 once the runtime registered with rocprofiler-register, -1 if the
 * register library could not be loaded (the runtime still works, unprofiled). */
int demoRuntimeRegistered(void);
#endif
