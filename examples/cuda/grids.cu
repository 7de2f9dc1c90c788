// A CUDA C program of known grids, for the counters proof (examples/cuda/proof_counters.py):
// every step launches four kernels whose warps launched are known exactly
// (blocks x ceil(threads per block / 32)), then synchronises and logs the step.
//
//   nvcc -O2 -o grids grids.cu && ./grids [--seconds S] [--steps N] [--log FILE]
//
// Prints "ready" once the first step ran; logs "step <n> <t0> <t1>" (CLOCK_BOOTTIME ns) per step
// to --log (default stdout). No profiler, no CUPTI: a plain CUDA process.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

static long long boot_ns() {
    timespec t;
    clock_gettime(CLOCK_BOOTTIME, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

// Some arithmetic per thread so each kernel runs for microseconds, not nothing.
__global__ void k_wide(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = i;
    for (int k = 0; k < 64; k++) x = x * 1.0001f + 0.5f;
    if (i < n) out[i] = x;
}

__global__ void k_odd(float* out, int n) {  // 100 threads per block: 4 warps, the last partial
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = i;
    for (int k = 0; k < 128; k++) x = x * 0.9999f + 1.0f;
    if (i < n) out[i] = x;
}

__global__ void k_big_blocks(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = i;
    for (int k = 0; k < 256; k++) x = x * 1.00001f - 0.25f;
    if (i < n) out[i] = x;
}

__global__ void k_3d(float* out, int n) {
    int b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    int t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    int i = b * blockDim.x * blockDim.y * blockDim.z + t;
    float x = i;
    for (int k = 0; k < 64; k++) x = x * 1.0002f + 0.125f;
    if (i < n) out[i] = x;
}

int main(int argc, char** argv) {
    double seconds = 60;
    long steps = -1;
    FILE* log = stdout;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atol(argv[++i]);
        else if (!strcmp(argv[i], "--log") && i + 1 < argc) log = fopen(argv[++i], "w");
    }
    if (!log) return 1;
    const int n = 4096 * 256;
    float* out;
    if (cudaMalloc(&out, n * sizeof(float)) != cudaSuccess) return 1;
    long long end = boot_ns() + (long long)(seconds * 1e9);
    for (long s = 1; steps < 0 || s <= steps; s++) {
        long long t0 = boot_ns();
        k_wide<<<4096, 256>>>(out, n);                          // 4096 x 8 = 32768 warps
        k_odd<<<1000, 100>>>(out, n);                           // 1000 x 4 = 4000 warps
        k_big_blocks<<<37, 1024>>>(out, n);                     // 37 x 32 = 1184 warps
        k_3d<<<dim3(16, 8, 2), dim3(8, 8, 3)>>>(out, n);        // 256 x 6 = 1536 warps
        if (cudaDeviceSynchronize() != cudaSuccess) return 2;
        long long t1 = boot_ns();
        fprintf(log, "step %ld %lld %lld\n", s, t0, t1);
        if (s == 1) {
            printf("ready\n");
            fflush(stdout);
        }
        if (s % 100 == 0) fflush(log);
        if (t1 > end) break;
    }
    fflush(log);
    return 0;
}
