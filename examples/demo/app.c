/* demo-app: a long-running "GPU application" written against the demo runtime (demo_runtime.h).
 *
 * Each iteration allocates three device buffers, copies two inputs to the device, launches three
 * named kernels on a stream (vector add, saxpy, scale), synchronizes, copies the result back,
 * checks it and frees the buffers: 13-14 API calls. With the default 30 ms pause that is a few
 * hundred API calls per second.
 *
 * Prints "ready <pid>" once the runtime registered with rocprofiler-register, then runs until
 * stdin reaches end of file (unless --no-stdin), SIGTERM/SIGINT, or --iterations are done.
 *
 * Options: --interval-ms N (default 30)  --iterations N (default 0 = forever)  --no-stdin
 *          --elements N (default 16384)
 */
#define _GNU_SOURCE
#include "demo_runtime.h"
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig) {
    (void)sig;
    stop_requested = 1;
}

static void* stdin_watch(void* arg) {
    (void)arg;
    char buf[256];
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n == 0 || (n < 0 && errno != EINTR)) break;
    }
    stop_requested = 1;
    return NULL;
}

/* ---- kernels: each loops over the whole grid (blocks x threads) on the device thread ---- */

typedef struct { const float* a; const float* b; float* c; int n; } add_args_t;
typedef struct { float alpha; const float* x; float* y; int n; } saxpy_args_t;
typedef struct { float* x; float factor; int n; } scale_args_t;

static size_t grid_threads(demo_dim3_t g, demo_dim3_t b) {
    return (size_t)g.x * g.y * g.z * b.x * b.y * b.z;
}

static void k_vector_add(demo_dim3_t grid, demo_dim3_t block, const void* args) {
    const add_args_t* p = args;
    size_t total = grid_threads(grid, block);
    for (size_t i = 0; i < total; i++)
        if (i < (size_t)p->n) p->c[i] = p->a[i] + p->b[i];
}

static void k_saxpy(demo_dim3_t grid, demo_dim3_t block, const void* args) {
    const saxpy_args_t* p = args;
    size_t total = grid_threads(grid, block);
    for (size_t i = 0; i < total; i++)
        if (i < (size_t)p->n) p->y[i] = p->alpha * p->x[i] + p->y[i];
}

static void k_scale(demo_dim3_t grid, demo_dim3_t block, const void* args) {
    const scale_args_t* p = args;
    size_t total = grid_threads(grid, block);
    for (size_t i = 0; i < total; i++)
        if (i < (size_t)p->n) p->x[i] *= p->factor;
}

static const demo_kernel_t vector_add = {"vector_add(float const*, float const*, float*, int)", k_vector_add};
static const demo_kernel_t saxpy = {"void saxpy<float>(float, float const*, float*, int)", k_saxpy};
static const demo_kernel_t scale = {"scale_inplace(float*, float, int)", k_scale};

#define CHECK(call)                                                                 \
    do {                                                                            \
        demo_error_t e_ = (call);                                                   \
        if (e_ != demoSuccess) {                                                    \
            fprintf(stderr, "demo-app: %s failed with %d\n", #call, (int)e_);       \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

int main(int argc, char** argv) {
    long interval_ms = 30, iterations = 0;
    int watch_stdin = 1, n = 16384;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--interval-ms") && i + 1 < argc) interval_ms = atol(argv[++i]);
        else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) iterations = atol(argv[++i]);
        else if (!strcmp(argv[i], "--elements") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-stdin")) watch_stdin = 0;
        else { fprintf(stderr, "demo-app: unknown option %s\n", argv[i]); return 2; }
    }
    if (n < 1) n = 1;
    if (interval_ms < 0) interval_ms = 0;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* whoever read our stdout may be gone (demo --keep) */
    setvbuf(stdout, NULL, _IOLBF, 0);

    int devices = 0;
    CHECK(demoGetDeviceCount(&devices));
    if (demoRuntimeRegistered() != 1) {
        fprintf(stderr, "demo-app: the runtime did not register with rocprofiler-register\n");
        return 3;
    }
    if (watch_stdin) {
        pthread_t t;
        if (pthread_create(&t, NULL, stdin_watch, NULL) != 0) return 3;
        pthread_detach(t);
    }

    size_t bytes = (size_t)n * sizeof(float);
    float* ha = malloc(bytes);
    float* hb = malloc(bytes);
    float* hc = malloc(bytes);
    if (!ha || !hb || !hc) return 3;
    for (int i = 0; i < n; i++) {
        ha[i] = (float)(i % 1000) * 0.5f;
        hb[i] = (float)(i % 77);
    }
    demo_stream_t stream;
    CHECK(demoStreamCreate(&stream));
    printf("ready %d\n", (int)getpid());

    const demo_dim3_t block = {256, 1, 1};
    const demo_dim3_t grid = {(uint32_t)((n + 255) / 256), 1, 1};
    for (long it = 0; !stop_requested && (iterations == 0 || it < iterations); it++) {
        float *da, *db, *dc;
        CHECK(demoMalloc((void**)&da, bytes));
        CHECK(demoMalloc((void**)&db, bytes));
        CHECK(demoMalloc((void**)&dc, bytes));
        CHECK(demoMemcpy(da, ha, bytes, demoMemcpyHostToDevice));
        CHECK(demoMemcpy(db, hb, bytes, demoMemcpyHostToDevice));
        add_args_t add = {da, db, dc, n};
        CHECK(demoLaunchKernel(&vector_add, grid, block, &add, sizeof add, stream));
        saxpy_args_t sx = {2.0f, da, dc, n};
        CHECK(demoLaunchKernel(&saxpy, grid, block, &sx, sizeof sx, stream));
        scale_args_t sc = {dc, 0.5f, n};
        CHECK(demoLaunchKernel(&scale, grid, block, &sc, sizeof sc, stream));
        if (it % 2) CHECK(demoStreamSynchronize(stream));
        else CHECK(demoDeviceSynchronize());
        CHECK(demoMemcpy(hc, dc, bytes, demoMemcpyDeviceToHost));
        for (int i = 0; i < n; i += 997) { /* c = ((a + b) + 2a) * 0.5 */
            float want = (3.0f * ha[i] + hb[i]) * 0.5f;
            if (fabsf(hc[i] - want) > 1e-3f * (1.0f + fabsf(want))) {
                fprintf(stderr, "demo-app: wrong result at %d: %f != %f\n", i, hc[i], want);
                return 1;
            }
        }
        if (it % 10 == 9) CHECK(demoMemset(db, 0, bytes));
        CHECK(demoFree(da));
        CHECK(demoFree(db));
        CHECK(demoFree(dc));
        struct timespec ts = {interval_ms / 1000, (interval_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL); /* EINTR just ends the pause early */
    }
    CHECK(demoStreamDestroy(stream));
    free(ha);
    free(hb);
    free(hc);
    return 0;
}
