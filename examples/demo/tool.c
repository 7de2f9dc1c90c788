/* libdemo-tool.so: the demo profiling tool, loaded into a running demo-app by rocprof-attach.
 *
 * The stand-in rocprofiler-register (tests/fixtures/register_standin.c) dlopens this library on the
 * first attach and calls the hooks below on every attach/detach, after applying the attacher's
 * environment with setenv. It plays the part of rocprofv3's tool library
 * (docs/protocol.md sections 8.1 to 8.3):
 *
 * attach:  read ROCPROF_* settings, number the session (/tmp/rocprofv3_attach_<pid>.session), then
 *          replace entries of the "hip" runtime's dispatch table (demo_runtime.h) with recording
 *          wrappers. Kernel launches are wrapped so that the kernel body runs inside a trampoline on
 *          the device thread, which timestamps the real execution.
 * detach:  put the original entries back, wait (bounded) for calls and kernels still in flight,
 *          then write <path>/<file>_{hip_api,kernel,memory_copy,memory_allocation}_trace.csv in
 *          rocprofv3's CSV layout (output-formats.md 2.2/2.3): synchronously when
 *          ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC is true, else on a thread joined at the next attach
 *          or at exit.
 *
 * Timestamps: CLOCK_MONOTONIC in nanoseconds (time since boot, not wall-clock; never jumps).
 * Agents: "Agent 0" is the host CPU, "Agent 1" the demo device (ROCPROF_AGENT_INDEX
 * type-relative gives "CPU 0" / "GPU 0").
 */
#define _GNU_SOURCE
#include "demo_runtime.h"
#include "standin.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_RECORDS (1u << 20) /* per domain and session; beyond that records are counted, not kept */
#define DRAIN_LIMIT_NS 2000000000ull /* longest wait for in-flight calls/kernels at detach */

/* ---- records ---- */

typedef struct { const char* function; int32_t tid; uint64_t corr, start, end; } api_rec_t;
typedef struct {
    uint64_t kernel_id, dispatch_id, corr, stream, start, end;
    int32_t tid;
    demo_dim3_t grid, block;
} kernel_rec_t;
typedef struct { demo_memcpy_kind_t kind; uint64_t corr, start, end; } copy_rec_t;
typedef struct { int is_free; uint64_t size, addr, corr, start, end; } alloc_rec_t;

typedef struct { void* data; size_t len, cap, elem; } vec_t;

static int vec_push(vec_t* v, const void* item) {
    if (v->len >= MAX_RECORDS) return -1;
    if (v->len == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        void* d = realloc(v->data, cap * v->elem);
        if (!d) return -1;
        v->data = d;
        v->cap = cap;
    }
    memcpy((char*)v->data + v->len * v->elem, item, v->elem);
    v->len++;
    return 0;
}

typedef struct config {
    int hip, kernel, copy, alloc; /* enabled services */
    int sync_output;
    int type_relative_agents;
    char* prefix; /* <path>/<file>[_<session>]: files are <prefix>_<name>.csv */
} config_t;

typedef struct session {
    config_t cfg;
    uint64_t serial;
    int number; /* 0 for the first session of the process, n for reattach n */
    vec_t api, kernel, copy, alloc;
    uint64_t dropped;
} session_t;

/* ---- global state ---- */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* guards everything below */
static pthread_cond_t g_idle = PTHREAD_COND_INITIALIZER;   /* signalled when in-flight work drains */
static session_t* g_cur;          /* NULL while detached */
static uint64_t g_serial;         /* incremented per attach */
static uint64_t g_inflight_calls; /* wrappers between entry and their record */
static uint64_t g_inflight_kernels; /* kernels launched through a trampoline, not yet finished */
static demo_api_table_t* g_table; /* the runtime's table */
static demo_api_table_t g_orig;   /* its original entries (saved once) */
static int g_have_orig;
static pthread_t g_writer;
static int g_writer_running;
static int g_session_file_written;
static char** g_kernel_names; /* Kernel_Id - 1 -> name (interned for the life of the process) */
static size_t g_n_kernel_names, g_cap_kernel_names;
static uint64_t g_next_corr = 1, g_next_dispatch = 1; /* atomics */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int32_t current_tid(void) {
    static __thread int32_t tid;
    if (!tid) tid = (int32_t)syscall(SYS_gettid);
    return tid;
}

static void note(const char* fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "demo-tool[%d]: %s\n", (int)getpid(), buf);
}

static int env_true(const char* name, int dflt) {
    const char* v = getenv(name);
    if (!v || !*v) return dflt;
    const char* yes[] = {"y", "yes", "t", "true", "on", "1"};
    for (unsigned i = 0; i < sizeof yes / sizeof *yes; i++)
        if (strcasecmp(v, yes[i]) == 0) return 1;
    return 0;
}

/* Kernel_Id for a kernel name (names copied, ids from 1). Called with g_lock held. */
static uint64_t kernel_id_locked(const char* name) {
    for (size_t i = 0; i < g_n_kernel_names; i++)
        if (strcmp(g_kernel_names[i], name) == 0) return i + 1;
    if (g_n_kernel_names == g_cap_kernel_names) {
        size_t cap = g_cap_kernel_names ? g_cap_kernel_names * 2 : 16;
        char** n = realloc(g_kernel_names, cap * sizeof *n);
        if (!n) return 0;
        g_kernel_names = n;
        g_cap_kernel_names = cap;
    }
    char* copy = strdup(name);
    if (!copy) return 0;
    g_kernel_names[g_n_kernel_names++] = copy;
    return g_n_kernel_names;
}

/* ---- recording ---- */

/* A wrapper brackets its work with call_enter/call_leave so detach can wait for it. */
static void call_enter(void) {
    pthread_mutex_lock(&g_lock);
    g_inflight_calls++;
    pthread_mutex_unlock(&g_lock);
}

static void call_leave(void) {
    pthread_mutex_lock(&g_lock);
    if (--g_inflight_calls == 0) pthread_cond_broadcast(&g_idle);
    pthread_mutex_unlock(&g_lock);
}

static void push_locked(int enabled, vec_t* v, const void* item) {
    if (enabled && vec_push(v, item) != 0) g_cur->dropped++;
}

static void record_api(const char* function, uint64_t corr, uint64_t start, uint64_t end) {
    api_rec_t r = {function, current_tid(), corr, start, end};
    pthread_mutex_lock(&g_lock);
    if (g_cur) push_locked(g_cur->cfg.hip, &g_cur->api, &r);
    pthread_mutex_unlock(&g_lock);
}

static void record_copy(demo_memcpy_kind_t kind, uint64_t corr, uint64_t start, uint64_t end) {
    copy_rec_t r = {kind, corr, start, end};
    pthread_mutex_lock(&g_lock);
    if (g_cur) push_locked(g_cur->cfg.copy, &g_cur->copy, &r);
    pthread_mutex_unlock(&g_lock);
}

static void record_alloc(int is_free, uint64_t size, uint64_t addr, uint64_t corr, uint64_t start,
                         uint64_t end) {
    alloc_rec_t r = {is_free, size, addr, corr, start, end};
    pthread_mutex_lock(&g_lock);
    if (g_cur) push_locked(g_cur->cfg.alloc, &g_cur->alloc, &r);
    pthread_mutex_unlock(&g_lock);
}

static uint64_t next_corr(void) { return __atomic_fetch_add(&g_next_corr, 1, __ATOMIC_RELAXED); }

/* ---- wrappers (installed in the runtime's table while attached) ---- */

#define API_CALL(name, call)                                                        \
    call_enter();                                                                   \
    uint64_t corr = next_corr();                                                    \
    uint64_t t0 = now_ns();                                                         \
    demo_error_t rc = g_orig.name call;                                             \
    uint64_t t1 = now_ns();                                                         \
    record_api(#name, corr, t0, t1)

static demo_error_t w_get_device_count(int* count) {
    API_CALL(demoGetDeviceCount, (count));
    call_leave();
    return rc;
}

static demo_error_t w_malloc(void** ptr, size_t size) {
    API_CALL(demoMalloc, (ptr, size));
    if (rc == demoSuccess) record_alloc(0, size, (uint64_t)(uintptr_t)*ptr, corr, t0, t1);
    call_leave();
    return rc;
}

static demo_error_t w_free(void* ptr) {
    API_CALL(demoFree, (ptr));
    if (rc == demoSuccess && ptr) record_alloc(1, 0, (uint64_t)(uintptr_t)ptr, corr, t0, t1);
    call_leave();
    return rc;
}

static demo_error_t w_memcpy(void* dst, const void* src, size_t size, demo_memcpy_kind_t kind) {
    API_CALL(demoMemcpy, (dst, src, size, kind));
    if (rc == demoSuccess) record_copy(kind, corr, t0, t1);
    call_leave();
    return rc;
}

static demo_error_t w_memset(void* dst, int value, size_t size) {
    API_CALL(demoMemset, (dst, value, size));
    call_leave();
    return rc;
}

static demo_error_t w_stream_create(demo_stream_t* stream) {
    API_CALL(demoStreamCreate, (stream));
    call_leave();
    return rc;
}

static demo_error_t w_stream_destroy(demo_stream_t stream) {
    API_CALL(demoStreamDestroy, (stream));
    call_leave();
    return rc;
}

static demo_error_t w_stream_synchronize(demo_stream_t stream) {
    API_CALL(demoStreamSynchronize, (stream));
    call_leave();
    return rc;
}

static demo_error_t w_device_synchronize(void) {
    API_CALL(demoDeviceSynchronize, ());
    call_leave();
    return rc;
}

/* A traced launch: the runtime runs `tramp` on the device thread, which runs the real kernel. */
typedef struct traced_launch {
    demo_kernel_t tramp;
    demo_kernel_fn fn;
    void* args;
    uint64_t serial, kernel_id, dispatch_id, corr, stream;
    int32_t tid;
} traced_launch_t;

static void trampoline(demo_dim3_t grid, demo_dim3_t block, const void* args) {
    traced_launch_t* t = *(traced_launch_t* const*)args;
    uint64_t start = now_ns();
    t->fn(grid, block, t->args);
    uint64_t end = now_ns();
    kernel_rec_t r = {t->kernel_id, t->dispatch_id, t->corr, t->stream, start, end, t->tid, grid, block};
    pthread_mutex_lock(&g_lock);
    if (g_cur && g_cur->serial == t->serial) push_locked(g_cur->cfg.kernel, &g_cur->kernel, &r);
    if (--g_inflight_kernels == 0) pthread_cond_broadcast(&g_idle);
    pthread_mutex_unlock(&g_lock);
    free(t->args);
    free(t);
}

static demo_error_t w_launch_kernel(const demo_kernel_t* kernel, demo_dim3_t grid, demo_dim3_t block,
                                    const void* args, size_t args_size, demo_stream_t stream) {
    call_enter();
    uint64_t corr = next_corr();
    uint64_t t0 = now_ns();
    traced_launch_t* t = NULL;
    pthread_mutex_lock(&g_lock);
    int trace = g_cur && g_cur->cfg.kernel && kernel && kernel->fn && kernel->name && (args || !args_size);
    uint64_t serial = g_cur ? g_cur->serial : 0;
    uint64_t kid = trace ? kernel_id_locked(kernel->name) : 0;
    pthread_mutex_unlock(&g_lock);
    if (trace && kid) {
        t = calloc(1, sizeof *t);
        if (t && args_size) {
            t->args = malloc(args_size);
            if (t->args) memcpy(t->args, args, args_size);
            else { free(t); t = NULL; }
        }
    }
    demo_error_t rc;
    if (t) {
        t->tramp.name = kernel->name;
        t->tramp.fn = trampoline;
        t->fn = kernel->fn;
        t->serial = serial;
        t->kernel_id = kid;
        t->dispatch_id = __atomic_fetch_add(&g_next_dispatch, 1, __ATOMIC_RELAXED);
        t->corr = corr;
        t->stream = stream;
        t->tid = current_tid();
        pthread_mutex_lock(&g_lock);
        g_inflight_kernels++;
        pthread_mutex_unlock(&g_lock);
        rc = g_orig.demoLaunchKernel(&t->tramp, grid, block, &t, sizeof t, stream);
        if (rc != demoSuccess) { /* never queued: undo */
            pthread_mutex_lock(&g_lock);
            if (--g_inflight_kernels == 0) pthread_cond_broadcast(&g_idle);
            pthread_mutex_unlock(&g_lock);
            free(t->args);
            free(t);
        }
    } else {
        rc = g_orig.demoLaunchKernel(kernel, grid, block, args, args_size, stream);
    }
    record_api("demoLaunchKernel", corr, t0, now_ns());
    call_leave();
    return rc;
}

/* ---- table swapping ---- */

#define SET_ENTRY(field, fn) __atomic_store_n(&g_table->field, (fn), __ATOMIC_RELEASE)

static void install_wrappers(void) {
    SET_ENTRY(demoGetDeviceCount, w_get_device_count);
    SET_ENTRY(demoMalloc, w_malloc);
    SET_ENTRY(demoFree, w_free);
    SET_ENTRY(demoMemcpy, w_memcpy);
    SET_ENTRY(demoMemset, w_memset);
    SET_ENTRY(demoStreamCreate, w_stream_create);
    SET_ENTRY(demoStreamDestroy, w_stream_destroy);
    SET_ENTRY(demoStreamSynchronize, w_stream_synchronize);
    SET_ENTRY(demoLaunchKernel, w_launch_kernel);
    SET_ENTRY(demoDeviceSynchronize, w_device_synchronize);
}

static void restore_originals(void) {
    SET_ENTRY(demoGetDeviceCount, g_orig.demoGetDeviceCount);
    SET_ENTRY(demoMalloc, g_orig.demoMalloc);
    SET_ENTRY(demoFree, g_orig.demoFree);
    SET_ENTRY(demoMemcpy, g_orig.demoMemcpy);
    SET_ENTRY(demoMemset, g_orig.demoMemset);
    SET_ENTRY(demoStreamCreate, g_orig.demoStreamCreate);
    SET_ENTRY(demoStreamDestroy, g_orig.demoStreamDestroy);
    SET_ENTRY(demoStreamSynchronize, g_orig.demoStreamSynchronize);
    SET_ENTRY(demoLaunchKernel, g_orig.demoLaunchKernel);
    SET_ENTRY(demoDeviceSynchronize, g_orig.demoDeviceSynchronize);
}

/* ---- output naming (output-formats.md 6, docs/protocol.md sections 8.1 and 8.2) ---- */

typedef struct { char* buf; size_t len, cap; int oom; } str_t;

static void str_add(str_t* s, const char* p, size_t n) {
    if (s->oom) return;
    if (s->len + n + 1 > s->cap) {
        size_t cap = (s->len + n + 1) * 2;
        char* b = realloc(s->buf, cap);
        if (!b) { s->oom = 1; return; }
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    s->buf[s->len] = 0;
}
static void str_cat(str_t* s, const char* p) { str_add(s, p, strlen(p)); }
static char* str_take(str_t* s) {
    if (s->oom || !s->buf) { free(s->buf); return s->oom ? NULL : strdup(""); }
    return s->buf;
}

static void program_tag(char* out, size_t n) {
    out[0] = 0;
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[4096];
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (r <= 0) return;
    buf[r] = 0;
    const char* slash = strrchr(buf, '/');
    const char* base = slash ? slash + 1 : buf;
    size_t len = strlen(base);
    if (len >= n) len = n - 1;
    memcpy(out, base, len);
    out[len] = 0;
}

/* Expand the placeholders the demo supports: %hostname% %pid% %ppid% %cwd% %tag% (also written
 * {hostname} ...), and the short forms %h and %p. Other text is copied as is. */
static char* expand(const char* in) {
    char host[256] = "", cwd[PATH_MAX] = "", pid[32], ppid[32], tag[256];
    gethostname(host, sizeof host - 1);
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    snprintf(ppid, sizeof ppid, "%d", (int)getppid());
    program_tag(tag, sizeof tag);
    const struct { const char* key; const char* value; } keys[] = {
        {"%hostname%", host}, {"%pid%", pid}, {"%ppid%", ppid}, {"%cwd%", cwd}, {"%tag%", tag},
        {"{hostname}", host}, {"{pid}", pid}, {"{ppid}", ppid}, {"{cwd}", cwd}, {"{tag}", tag},
        {"%h", host},         {"%p", pid},
    };
    str_t s = {0};
    for (const char* p = in; *p;) {
        int matched = 0;
        if (*p == '%' || *p == '{') {
            for (unsigned i = 0; i < sizeof keys / sizeof *keys; i++) {
                size_t kl = strlen(keys[i].key);
                if (strncmp(p, keys[i].key, kl) == 0) {
                    str_cat(&s, keys[i].value);
                    p += kl;
                    matched = 1;
                    break;
                }
            }
        }
        if (!matched) str_add(&s, p++, 1);
    }
    return str_take(&s);
}

/* Session number from /tmp/rocprofv3_attach_<pid>.session: absent -> 0, else previous + 1. */
static int next_session_number(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/rocprofv3_attach_%d.session", (int)getpid());
    int n = 0;
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode)) {
            note("%s is not a regular file; not numbering sessions", path);
            return 0;
        }
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            char buf[32] = "";
            ssize_t r = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (r > 0) n = atoi(buf) + 1;
        }
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
        char buf[32];
        int len = snprintf(buf, sizeof buf, "%d", n);
        if (write(fd, buf, (size_t)len) != len) note("cannot write %s", path);
        fchmod(fd, 0644);
        close(fd);
        g_session_file_written = 1;
    }
    return n < 0 ? 0 : n;
}

static int has_token(const char* list, const char* token) {
    char* copy = strdup(list ? list : "");
    int found = 0;
    if (!copy) return 0;
    for (char *save = NULL, *t = strtok_r(copy, " \t,;:", &save); t; t = strtok_r(NULL, " \t,;:", &save))
        if (strcasecmp(t, token) == 0) found = 1;
    free(copy);
    return found;
}

static int read_config(config_t* c, int session_number) {
    memset(c, 0, sizeof *c);
    c->hip = env_true("ROCPROF_HIP_RUNTIME_API_TRACE", 0);
    c->kernel = env_true("ROCPROF_KERNEL_TRACE", 0);
    c->copy = env_true("ROCPROF_MEMORY_COPY_TRACE", 0);
    c->alloc = env_true("ROCPROF_MEMORY_ALLOCATION_TRACE", 0);
    c->sync_output = env_true("ROCPROF_ATTACH_OUTPUT_GENERATION_SYNC", 0);
    const char* agent_index = getenv("ROCPROF_AGENT_INDEX");
    c->type_relative_agents = agent_index && strcasecmp(agent_index, "type-relative") == 0;

    const char* format = getenv("ROCPROF_OUTPUT_FORMAT");
    if (!has_token(format, "csv"))
        note("this demo tool only writes CSV; writing CSV instead of '%s'",
             format && *format ? format : "rocpd");

    const char* path = getenv("ROCPROF_OUTPUT_PATH");
    const char* file = getenv("ROCPROF_OUTPUT_FILE_NAME");
    if (!path || !*path) path = "%cwd%";
    if (!file || !*file) file = "%hostname%/%pid%";
    str_t name = {0};
    str_cat(&name, file);
    if (!strstr(file, "%pid%") && !strstr(file, "{pid}") && !strstr(file, "%p")) str_cat(&name, "_%pid%");
    if (session_number > 0) {
        char n[32];
        snprintf(n, sizeof n, "_%d", session_number);
        str_cat(&name, n);
    }
    char* file_tpl = str_take(&name);
    char* dir = expand(path);
    char* base = file_tpl ? expand(file_tpl) : NULL;
    str_t prefix = {0};
    if (dir && base) {
        str_cat(&prefix, dir);
        if (prefix.len && prefix.buf[prefix.len - 1] != '/') str_cat(&prefix, "/");
        str_cat(&prefix, base);
    }
    free(file_tpl);
    free(dir);
    free(base);
    c->prefix = (dir && base) ? str_take(&prefix) : NULL;
    if (!c->prefix) free(prefix.buf);
    return c->prefix ? 0 : -1;
}

/* ---- CSV writing (output-formats.md 2.2, 2.3) ---- */

static const char HDR_API[] =
    "\"Domain\",\"Function\",\"Process_Id\",\"Thread_Id\",\"Correlation_Id\",\"Start_Timestamp\","
    "\"End_Timestamp\"\n";
static const char HDR_KERNEL[] =
    "\"Kind\",\"Agent_Id\",\"Queue_Id\",\"Stream_Id\",\"Thread_Id\",\"Dispatch_Id\",\"Kernel_Id\","
    "\"Kernel_Name\",\"Correlation_Id\",\"Start_Timestamp\",\"End_Timestamp\",\"LDS_Block_Size\","
    "\"Scratch_Size\",\"VGPR_Count\",\"Accum_VGPR_Count\",\"SGPR_Count\",\"Workgroup_Size_X\","
    "\"Workgroup_Size_Y\",\"Workgroup_Size_Z\",\"Grid_Size_X\",\"Grid_Size_Y\",\"Grid_Size_Z\"\n";
static const char HDR_COPY[] =
    "\"Kind\",\"Direction\",\"Stream_Id\",\"Source_Agent_Id\",\"Destination_Agent_Id\","
    "\"Correlation_Id\",\"Start_Timestamp\",\"End_Timestamp\"\n";
static const char HDR_ALLOC[] =
    "\"Kind\",\"Operation\",\"Agent_Id\",\"Allocation_Size\",\"Address\",\"Correlation_Id\","
    "\"Start_Timestamp\",\"End_Timestamp\"\n";

/* mkdir -p for every directory component of `path` (the last component is a file name). */
static int make_parent_dirs(const char* path) {
    char* p = strdup(path);
    if (!p) return -1;
    int rc = 0;
    for (char* s = strchr(p + 1, '/'); s && rc == 0; s = strchr(s + 1, '/')) {
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) rc = -1;
        *s = '/';
    }
    free(p);
    return rc;
}

static const char* agent(const config_t* c, int device) {
    if (c->type_relative_agents) return device ? "GPU 0" : "CPU 0";
    return device ? "Agent 1" : "Agent 0";
}

static const char* copy_direction(demo_memcpy_kind_t k) {
    switch (k) {
    case demoMemcpyHostToDevice: return "MEMORY_COPY_HOST_TO_DEVICE";
    case demoMemcpyDeviceToHost: return "MEMORY_COPY_DEVICE_TO_HOST";
    case demoMemcpyDeviceToDevice: return "MEMORY_COPY_DEVICE_TO_DEVICE";
    default: return "MEMORY_COPY_HOST_TO_HOST";
    }
}

static void write_row(FILE* f, const session_t* s, const char* what, size_t i) {
    const config_t* c = &s->cfg;
    if (strcmp(what, "hip_api_trace") == 0) {
        const api_rec_t* r = (const api_rec_t*)s->api.data + i;
        fprintf(f, "\"HIP_RUNTIME_API_EXT\",\"%s\",%d,%d,%llu,%llu,%llu\n", r->function, (int)getpid(),
                (int)r->tid, (unsigned long long)r->corr, (unsigned long long)r->start,
                (unsigned long long)r->end);
    } else if (strcmp(what, "kernel_trace") == 0) {
        const kernel_rec_t* r = (const kernel_rec_t*)s->kernel.data + i;
        /* Grid_Size is in work-items (blocks x threads), as in an AQL dispatch packet. */
        fprintf(f,
                "\"KERNEL_DISPATCH\",\"%s\",1,%llu,%d,%llu,%llu,\"%s\",%llu,%llu,%llu,0,0,0,0,0,%u,%u,%u,"
                "%llu,%llu,%llu\n",
                agent(c, 1), (unsigned long long)r->stream, (int)r->tid, (unsigned long long)r->dispatch_id,
                (unsigned long long)r->kernel_id, g_kernel_names[r->kernel_id - 1],
                (unsigned long long)r->corr, (unsigned long long)r->start, (unsigned long long)r->end,
                r->block.x, r->block.y, r->block.z, (unsigned long long)r->grid.x * r->block.x,
                (unsigned long long)r->grid.y * r->block.y, (unsigned long long)r->grid.z * r->block.z);
    } else if (strcmp(what, "memory_copy_trace") == 0) {
        const copy_rec_t* r = (const copy_rec_t*)s->copy.data + i;
        int src_dev = r->kind == demoMemcpyDeviceToHost || r->kind == demoMemcpyDeviceToDevice;
        int dst_dev = r->kind == demoMemcpyHostToDevice || r->kind == demoMemcpyDeviceToDevice;
        fprintf(f, "\"MEMORY_COPY\",\"%s\",0,\"%s\",\"%s\",%llu,%llu,%llu\n", copy_direction(r->kind),
                agent(c, src_dev), agent(c, dst_dev), (unsigned long long)r->corr,
                (unsigned long long)r->start, (unsigned long long)r->end);
    } else {
        const alloc_rec_t* r = (const alloc_rec_t*)s->alloc.data + i;
        fprintf(f, "\"MEMORY_ALLOCATION\",\"%s\",\"%s\",%llu,\"0x%016llx\",%llu,%llu,%llu\n",
                r->is_free ? "MEMORY_ALLOCATION_FREE" : "MEMORY_ALLOCATION_ALLOCATE",
                r->is_free ? "" : agent(c, 1), (unsigned long long)r->size, (unsigned long long)r->addr,
                (unsigned long long)r->corr, (unsigned long long)r->start, (unsigned long long)r->end);
    }
}

/* Write one file if the domain is enabled and has data. Returns 0 or -1. */
static int write_csv(const session_t* s, int enabled, const vec_t* v, const char* what, const char* header) {
    if (!enabled || v->len == 0) return 0;
    size_t n = strlen(s->cfg.prefix) + strlen(what) + 8;
    char* path = malloc(n);
    if (!path) return -1;
    snprintf(path, n, "%s_%s.csv", s->cfg.prefix, what);
    int rc = -1;
    FILE* f = NULL;
    if (make_parent_dirs(path) != 0 || !(f = fopen(path, "w"))) {
        note("cannot create %s: %s", path, strerror(errno));
        free(path);
        return -1;
    }
    fputs(header, f);
    pthread_mutex_lock(&g_lock); /* kernel names may be appended concurrently */
    for (size_t i = 0; i < v->len; i++) write_row(f, s, what, i);
    pthread_mutex_unlock(&g_lock);
    int bad = ferror(f);
    if (fclose(f) == 0 && !bad) rc = 0;
    if (rc) note("error writing %s", path);
    free(path);
    return rc;
}

static void session_free(session_t* s) {
    if (!s) return;
    free(s->api.data);
    free(s->kernel.data);
    free(s->copy.data);
    free(s->alloc.data);
    free(s->cfg.prefix);
    free(s);
}

/* Writes every file of a finished session and frees it. Returns 0 on success. */
static int write_session(session_t* s) {
    int rc = 0;
    rc |= write_csv(s, s->cfg.hip, &s->api, "hip_api_trace", HDR_API);
    rc |= write_csv(s, s->cfg.kernel, &s->kernel, "kernel_trace", HDR_KERNEL);
    rc |= write_csv(s, s->cfg.copy, &s->copy, "memory_copy_trace", HDR_COPY);
    rc |= write_csv(s, s->cfg.alloc, &s->alloc, "memory_allocation_trace", HDR_ALLOC);
    if (s->dropped) note("session %d: %llu records dropped (limit %u per domain)", s->number,
                        (unsigned long long)s->dropped, MAX_RECORDS);
    session_free(s);
    return rc ? -1 : 0;
}

static void* writer_main(void* arg) {
    write_session(arg);
    return NULL;
}

static void join_writer(void) {
    if (g_writer_running) {
        pthread_join(g_writer, NULL);
        g_writer_running = 0;
    }
}

/* ---- the hooks called by rocprofiler-register ---- */

EXPORT int rocprofiler_standin_tool_attach(const standin_runtime_t* runtimes, int n) {
    join_writer(); /* a previous asynchronous output must be complete first */
    demo_api_table_t* table = NULL;
    for (int i = 0; i < n; i++)
        if (runtimes[i].name && strcmp(runtimes[i].name, "hip") == 0 && runtimes[i].n_tables >= 1 &&
            runtimes[i].tables && runtimes[i].tables[0])
            table = runtimes[i].tables[0];
    if (!table || table->size != sizeof(demo_api_table_t)) {
        note("no demo \"hip\" runtime registered in this process; nothing to trace");
        return 1;
    }
    pthread_mutex_lock(&g_lock);
    int active = g_cur != NULL;
    pthread_mutex_unlock(&g_lock);
    if (active) return 0; /* already attached: keep the running session */

    session_t* s = calloc(1, sizeof *s);
    if (!s) return 1;
    s->number = next_session_number();
    if (read_config(&s->cfg, s->number) != 0) {
        session_free(s);
        return 1;
    }
    s->api.elem = sizeof(api_rec_t);
    s->kernel.elem = sizeof(kernel_rec_t);
    s->copy.elem = sizeof(copy_rec_t);
    s->alloc.elem = sizeof(alloc_rec_t);

    pthread_mutex_lock(&g_lock);
    if (!g_have_orig) {
        g_table = table;
        g_orig = *table;
        g_have_orig = 1;
    }
    s->serial = ++g_serial;
    g_cur = s;
    pthread_mutex_unlock(&g_lock);
    install_wrappers();
    return 0;
}

EXPORT int rocprofiler_standin_tool_detach(void) {
    pthread_mutex_lock(&g_lock);
    int active = g_cur != NULL;
    pthread_mutex_unlock(&g_lock);
    if (!active) return 0;
    restore_originals();

    /* New calls now go straight to the runtime; let the ones already inside a wrapper (and the
     * kernels they queued) finish so they land in this session. Bounded. */
    struct timespec limit;
    clock_gettime(CLOCK_REALTIME, &limit);
    limit.tv_sec += DRAIN_LIMIT_NS / 1000000000ull;
    pthread_mutex_lock(&g_lock);
    while (g_inflight_calls || g_inflight_kernels)
        if (pthread_cond_timedwait(&g_idle, &g_lock, &limit) == ETIMEDOUT) break;
    if (g_inflight_calls || g_inflight_kernels)
        note("detach: %llu calls and %llu kernels still running; not recorded",
             (unsigned long long)g_inflight_calls, (unsigned long long)g_inflight_kernels);
    session_t* s = g_cur;
    g_cur = NULL;
    pthread_mutex_unlock(&g_lock);

    if (s->cfg.sync_output) return write_session(s) == 0 ? 0 : 1;
    if (pthread_create(&g_writer, NULL, writer_main, s) != 0) return write_session(s) == 0 ? 0 : 1;
    g_writer_running = 1;
    return 0;
}

__attribute__((destructor)) static void demo_tool_fini(void) {
    join_writer();
    pthread_mutex_lock(&g_lock);
    session_t* s = g_cur;
    g_cur = NULL;
    pthread_mutex_unlock(&g_lock);
    if (s) { /* process exits while attached: output is generated now, like rocprofv3 */
        restore_originals();
        write_session(s);
    }
    if (g_session_file_written) {
        char path[64];
        snprintf(path, sizeof path, "/tmp/rocprofv3_attach_%d.session", (int)getpid());
        unlink(path);
    }
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_n_kernel_names; i++) free(g_kernel_names[i]);
    free(g_kernel_names);
    g_kernel_names = NULL;
    g_n_kernel_names = g_cap_kernel_names = 0;
    pthread_mutex_unlock(&g_lock);
}
