/* demo-harness: drives the demo tool without ptrace, for tests/demo_tool.rs.
 *
 * Linked against libdemo-runtime.so, whose constructor registers the "hip" table with the stand-in
 * librocprofiler-register.so.0 (run with ROCP_TOOL_ATTACH=1 so the listener exists). The harness
 * then calls rocprofiler_register_attach / _detach itself, from its main thread, with an
 * environment buffer built exactly like rocprof-attach's (u32 little-endian count, then
 * name\0value\0 pairs).
 *
 * Usage: demo-harness TOOL STEP...   Steps, run in order:
 *   env NAME=VALUE   add a pair to the buffer of the next attach
 *   attach           call rocprofiler_register_attach(buffer, TOOL); prints "attach <status>"
 *   detach           call rocprofiler_register_detach();             prints "detach <status>"
 *   work N           N iterations of: demoMalloc x2, demoMemcpy H2D, demoLaunchKernel x2
 *                    (fill_double, add_one), demoStreamSynchronize, demoMemcpy D2H, demoFree x2
 *   thread-work N    the same, on a second thread (joined before the next step)
 * Every API call made prints "call <function>" and every kernel launched "kernel <name>", so the
 * test knows exactly what was called. Exits 1 if a result is wrong or a call fails.
 */
#define _GNU_SOURCE
#include "demo_runtime.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*attach_fn)(const char*, const char*);
typedef int (*detach_fn)(void);

static void k_fill_double(demo_dim3_t grid, demo_dim3_t block, const void* args) {
    const struct { const int* in; int* out; int n; }* p = args;
    for (size_t i = 0; i < (size_t)grid.x * block.x && i < (size_t)p->n; i++) p->out[i] = 2 * p->in[i];
}
static void k_add_one(demo_dim3_t grid, demo_dim3_t block, const void* args) {
    const struct { int* x; int n; }* p = args;
    for (size_t i = 0; i < (size_t)grid.x * block.x && i < (size_t)p->n; i++) p->x[i] += 1;
}
static const demo_kernel_t fill_double = {"fill_double(int const*, int*, int)", k_fill_double};
static const demo_kernel_t add_one = {"add_one(int*, int)", k_add_one};

static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;
static void say(const char* what, const char* name) {
    pthread_mutex_lock(&print_lock);
    printf("%s %s\n", what, name);
    pthread_mutex_unlock(&print_lock);
}

#define CALL(fn, ...)                                                    \
    do {                                                                 \
        say("call", #fn);                                                \
        if (fn(__VA_ARGS__) != demoSuccess) {                            \
            fprintf(stderr, "harness: %s failed\n", #fn);                \
            exit(1);                                                     \
        }                                                                \
    } while (0)

static void* work(void* arg) {
    long iterations = (long)arg;
    enum { N = 1000 };
    int host[N];
    for (int i = 0; i < N; i++) host[i] = i;
    demo_dim3_t grid = {(N + 127) / 128, 1, 1}, block = {128, 1, 1};
    for (long it = 0; it < iterations; it++) {
        int *a, *b;
        CALL(demoMalloc, (void**)&a, sizeof host);
        CALL(demoMalloc, (void**)&b, sizeof host);
        CALL(demoMemcpy, a, host, sizeof host, demoMemcpyHostToDevice);
        struct { const int* in; int* out; int n; } fa = {a, b, N};
        say("kernel", fill_double.name);
        CALL(demoLaunchKernel, &fill_double, grid, block, &fa, sizeof fa, 0);
        struct { int* x; int n; } aa = {b, N};
        say("kernel", add_one.name);
        CALL(demoLaunchKernel, &add_one, grid, block, &aa, sizeof aa, 0);
        CALL(demoStreamSynchronize, 0);
        int result[N];
        CALL(demoMemcpy, result, b, sizeof result, demoMemcpyDeviceToHost);
        for (int i = 0; i < N; i++)
            if (result[i] != 2 * i + 1) {
                fprintf(stderr, "harness: wrong result at %d\n", i);
                exit(1);
            }
        CALL(demoFree, a);
        CALL(demoFree, b);
    }
    return NULL;
}

int main(int argc, char** argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: demo-harness TOOL STEP...\n");
        return 2;
    }
    const char* tool = argv[1];
    attach_fn attach = (attach_fn)dlsym(RTLD_DEFAULT, "rocprofiler_register_attach");
    detach_fn detach = (detach_fn)dlsym(RTLD_DEFAULT, "rocprofiler_register_detach");
    if (!attach || !detach || demoRuntimeRegistered() != 1) {
        fprintf(stderr, "harness: the runtime is not registered with the stand-in register library\n");
        return 3;
    }
    char* buf = NULL;
    size_t len = 0;
    uint32_t count = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "env") && i + 1 < argc) {
            const char* pair = argv[++i];
            const char* eq = strchr(pair, '=');
            if (!eq) { fprintf(stderr, "harness: env needs NAME=VALUE\n"); return 2; }
            size_t add = strlen(pair) + 1; /* name\0value\0 is the pair with '=' turned into \0 */
            char* nb = realloc(buf, 4 + len + add);
            if (!nb) return 3;
            buf = nb;
            memcpy(buf + 4 + len, pair, add);
            buf[4 + len + (size_t)(eq - pair)] = 0;
            len += add;
            count++;
        } else if (!strcmp(argv[i], "attach")) {
            char empty[4] = {0};
            char* b = buf ? buf : empty;
            for (int k = 0; k < 4; k++) b[k] = (char)((count >> (8 * k)) & 0xff); /* little-endian */
            printf("attach %d\n", attach(b, tool));
            free(buf);
            buf = NULL;
            len = 0;
            count = 0;
        } else if (!strcmp(argv[i], "detach")) {
            printf("detach %d\n", detach());
        } else if (!strcmp(argv[i], "work") && i + 1 < argc) {
            work((void*)atol(argv[++i]));
        } else if (!strcmp(argv[i], "thread-work") && i + 1 < argc) {
            pthread_t t;
            if (pthread_create(&t, NULL, work, (void*)atol(argv[++i])) != 0) return 3;
            pthread_join(t, NULL);
        } else {
            fprintf(stderr, "harness: unknown step %s\n", argv[i]);
            return 2;
        }
    }
    free(buf);
    return 0;
}
