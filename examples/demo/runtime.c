/* libdemo-runtime.so: the demo's HIP-like runtime (API in demo_runtime.h).
 *
 * At load time (constructor) it fills its dispatch table, starts the "device" thread and registers
 * the table with librocprofiler-register.so.0 under the name "hip", exactly the call libamdhip64
 * makes:
 *     rocprofiler_register_library_api_table("hip", NULL, version, tables, 1, NULL)
 * With ROCP_TOOL_ATTACH=1 in the environment that first registration is what starts the register
 * library's `rocp-bg-attach` listener thread, which rocprof-attach later injects calls into.
 *
 * The device executes queued work in order on one thread: kernels (real CPU loops) and copies.
 */
#define _GNU_SOURCE
#include "demo_runtime.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- device: one worker thread and an in-order queue ---- */

typedef enum { CMD_KERNEL, CMD_COPY, CMD_SET } cmd_kind_t;

typedef struct cmd {
    struct cmd* next;
    cmd_kind_t kind;
    uint64_t seq;
    /* kernel */
    demo_kernel_fn fn;
    demo_dim3_t grid, block;
    void* args; /* private copy, freed after execution */
    /* copy / set */
    void* dst;
    const void* src;
    int value;
    size_t size;
} cmd_t;

static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t q_done = PTHREAD_COND_INITIALIZER;
static cmd_t *q_head, *q_tail;
static uint64_t q_submitted, q_completed;
static uint64_t next_stream = 1;
static int registered;

static void* device_main(void* arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "demo-device");
    pthread_mutex_lock(&q_lock);
    for (;;) {
        while (!q_head) pthread_cond_wait(&q_work, &q_lock);
        cmd_t* c = q_head;
        q_head = c->next;
        if (!q_head) q_tail = NULL;
        pthread_mutex_unlock(&q_lock);
        switch (c->kind) {
        case CMD_KERNEL: c->fn(c->grid, c->block, c->args); break;
        case CMD_COPY: memmove(c->dst, c->src, c->size); break;
        case CMD_SET: memset(c->dst, c->value, c->size); break;
        }
        free(c->args);
        pthread_mutex_lock(&q_lock);
        q_completed = c->seq;
        free(c);
        pthread_cond_broadcast(&q_done);
    }
    return NULL;
}

/* Queue a command; returns its sequence number (completion is in order). */
static uint64_t submit(cmd_t* c) {
    pthread_mutex_lock(&q_lock);
    uint64_t seq = c->seq = ++q_submitted; /* c belongs to the device thread once queued */
    c->next = NULL;
    if (q_tail) q_tail->next = c;
    else q_head = c;
    q_tail = c;
    pthread_cond_signal(&q_work);
    pthread_mutex_unlock(&q_lock);
    return seq;
}

static void wait_for(uint64_t seq) {
    pthread_mutex_lock(&q_lock);
    while (q_completed < seq) pthread_cond_wait(&q_done, &q_lock);
    pthread_mutex_unlock(&q_lock);
}

static uint64_t last_submitted(void) {
    pthread_mutex_lock(&q_lock);
    uint64_t s = q_submitted;
    pthread_mutex_unlock(&q_lock);
    return s;
}

/* ---- implementations (the original table entries) ---- */

static demo_error_t impl_get_device_count(int* count) {
    if (!count) return demoErrorInvalidValue;
    *count = 1;
    return demoSuccess;
}

static demo_error_t impl_malloc(void** ptr, size_t size) {
    if (!ptr) return demoErrorInvalidValue;
    size_t rounded = (size + 255) & ~(size_t)255;
    *ptr = aligned_alloc(256, rounded ? rounded : 256);
    return *ptr ? demoSuccess : demoErrorOutOfMemory;
}

static demo_error_t impl_free(void* ptr) {
    if (ptr) {
        wait_for(last_submitted()); /* like hipFree: no queued work may still use it */
        free(ptr);
    }
    return demoSuccess;
}

static demo_error_t impl_memcpy(void* dst, const void* src, size_t size, demo_memcpy_kind_t kind) {
    if ((!dst || !src) && size) return demoErrorInvalidValue;
    if (kind < demoMemcpyHostToHost || kind > demoMemcpyDeviceToDevice) return demoErrorInvalidValue;
    cmd_t* c = calloc(1, sizeof *c);
    if (!c) return demoErrorOutOfMemory;
    c->kind = CMD_COPY;
    c->dst = dst;
    c->src = src;
    c->size = size;
    wait_for(submit(c)); /* synchronous, in order after earlier work */
    return demoSuccess;
}

static demo_error_t impl_memset(void* dst, int value, size_t size) {
    if (!dst && size) return demoErrorInvalidValue;
    cmd_t* c = calloc(1, sizeof *c);
    if (!c) return demoErrorOutOfMemory;
    c->kind = CMD_SET;
    c->dst = dst;
    c->value = value;
    c->size = size;
    wait_for(submit(c));
    return demoSuccess;
}

static demo_error_t impl_stream_create(demo_stream_t* stream) {
    if (!stream) return demoErrorInvalidValue;
    pthread_mutex_lock(&q_lock);
    *stream = next_stream++;
    pthread_mutex_unlock(&q_lock);
    return demoSuccess;
}

static demo_error_t impl_stream_synchronize(demo_stream_t stream) {
    (void)stream; /* one in-order queue: waiting for everything is waiting for this stream */
    wait_for(last_submitted());
    return demoSuccess;
}

static demo_error_t impl_stream_destroy(demo_stream_t stream) {
    return impl_stream_synchronize(stream);
}

static demo_error_t impl_launch_kernel(const demo_kernel_t* kernel, demo_dim3_t grid, demo_dim3_t block,
                                       const void* args, size_t args_size, demo_stream_t stream) {
    (void)stream;
    if (!kernel || !kernel->fn || (args_size && !args)) return demoErrorInvalidValue;
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z) return demoErrorInvalidValue;
    cmd_t* c = calloc(1, sizeof *c);
    if (!c) return demoErrorOutOfMemory;
    c->kind = CMD_KERNEL;
    c->fn = kernel->fn;
    c->grid = grid;
    c->block = block;
    if (args_size) { /* kernel arguments are copied at launch, like a kernarg segment */
        c->args = malloc(args_size);
        if (!c->args) { free(c); return demoErrorOutOfMemory; }
        memcpy(c->args, args, args_size);
    }
    submit(c); /* asynchronous */
    return demoSuccess;
}

static demo_error_t impl_device_synchronize(void) {
    wait_for(last_submitted());
    return demoSuccess;
}

/* The dispatch table. Tools change entries with atomic stores; calls load them atomically. */
static demo_api_table_t g_table = {
    .size = sizeof(demo_api_table_t),
    .demoGetDeviceCount = impl_get_device_count,
    .demoMalloc = impl_malloc,
    .demoFree = impl_free,
    .demoMemcpy = impl_memcpy,
    .demoMemset = impl_memset,
    .demoStreamCreate = impl_stream_create,
    .demoStreamDestroy = impl_stream_destroy,
    .demoStreamSynchronize = impl_stream_synchronize,
    .demoLaunchKernel = impl_launch_kernel,
    .demoDeviceSynchronize = impl_device_synchronize,
};
/* rocprofiler-register keeps the pointer to this array, so it must live as long as the process. */
static void* g_tables[1] = {&g_table};

#define DISPATCH(entry) __atomic_load_n(&g_table.entry, __ATOMIC_ACQUIRE)

demo_error_t demoGetDeviceCount(int* count) { return DISPATCH(demoGetDeviceCount)(count); }
demo_error_t demoMalloc(void** ptr, size_t size) { return DISPATCH(demoMalloc)(ptr, size); }
demo_error_t demoFree(void* ptr) { return DISPATCH(demoFree)(ptr); }
demo_error_t demoMemcpy(void* dst, const void* src, size_t size, demo_memcpy_kind_t kind) {
    return DISPATCH(demoMemcpy)(dst, src, size, kind);
}
demo_error_t demoMemset(void* dst, int value, size_t size) { return DISPATCH(demoMemset)(dst, value, size); }
demo_error_t demoStreamCreate(demo_stream_t* stream) { return DISPATCH(demoStreamCreate)(stream); }
demo_error_t demoStreamDestroy(demo_stream_t stream) { return DISPATCH(demoStreamDestroy)(stream); }
demo_error_t demoStreamSynchronize(demo_stream_t stream) { return DISPATCH(demoStreamSynchronize)(stream); }
demo_error_t demoLaunchKernel(const demo_kernel_t* kernel, demo_dim3_t grid, demo_dim3_t block,
                              const void* args, size_t args_size, demo_stream_t stream) {
    return DISPATCH(demoLaunchKernel)(kernel, grid, block, args, args_size, stream);
}
demo_error_t demoDeviceSynchronize(void) { return DISPATCH(demoDeviceSynchronize)(); }

int demoRuntimeRegistered(void) { return __atomic_load_n(&registered, __ATOMIC_ACQUIRE); }

typedef int (*register_fn)(const char*, void*, uint32_t, void**, uint64_t, void*);

__attribute__((constructor)) static void demo_runtime_init(void) {
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, device_main, NULL) != 0) {
        fprintf(stderr, "demo-runtime: cannot start the device thread\n");
        abort();
    }
    pthread_attr_destroy(&a);

    /* Like HIP: find rocprofiler-register through the normal loader search (LD_LIBRARY_PATH,
     * rpath) and hand it the dispatch table. Missing library = run without profiling support. */
    void* h = dlopen("librocprofiler-register.so.0", RTLD_NOW | RTLD_GLOBAL);
    register_fn reg = h ? (register_fn)dlsym(h, "rocprofiler_register_library_api_table") : NULL;
    if (!reg) {
        fprintf(stderr, "demo-runtime: rocprofiler-register not available (%s); running unprofiled\n",
                h ? "no rocprofiler_register_library_api_table" : dlerror());
        __atomic_store_n(&registered, -1, __ATOMIC_RELEASE);
        return;
    }
    int rc = reg("hip", NULL, DEMO_RUNTIME_VERSION, g_tables, 1, NULL);
    if (rc != 0) fprintf(stderr, "demo-runtime: registration returned %d\n", rc);
    __atomic_store_n(&registered, rc == 0 ? 1 : -1, __ATOMIC_RELEASE);
}
