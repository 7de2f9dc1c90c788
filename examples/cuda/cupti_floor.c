/* The floor of CUPTI kernel tracing (docs/cuda.md, "Measured"): the least any CUPTI-based tracer
 * can cost. Loaded by train.py (--floor-windows) into the training process itself; it enables
 * CONCURRENT_KERNEL activity with the smallest possible buffer callbacks (hand out a buffer,
 * count its records, free it) and nothing else: no parsing, no database, no thread of its own.
 * The difference between rocprof-attach's step-time cost and this one is ours.
 *
 * Build (no CUPTI headers needed; the few declarations are below, as CUPTI 12/13 define them):
 *   gcc -O2 -shared -fPIC -o libcupti_floor.so examples/cuda/cupti_floor.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef int (*register_fn)(void (*)(uint8_t **, size_t *, size_t *),
                           void (*)(void *, uint32_t, uint8_t *, size_t, size_t));
typedef int (*kind_fn)(int);
typedef int (*flush_fn)(uint32_t);
typedef int (*next_fn)(uint8_t *, size_t, void **);

enum { KIND_CONCURRENT_KERNEL = 10, FLUSH_FORCED = 1, BUFFER = 8 << 20 };

static register_fn reg;
static kind_fn enable, disable;
static flush_fn flush;
static next_fn next;
static volatile uint64_t records;

static void requested(uint8_t **buf, size_t *size, size_t *max) {
  *buf = aligned_alloc(8, BUFFER);
  *size = *buf ? BUFFER : 0;
  *max = 0;
}

static void completed(void *ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
  (void)ctx; (void)stream; (void)size;
  void *rec = 0;
  while (valid && next(buf, valid, &rec) == 0)
    __atomic_add_fetch(&records, 1, __ATOMIC_RELAXED);
  free(buf);
}

static int load(void) {
  if (reg) return 0;
  void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libcupti.so.12", RTLD_NOW | RTLD_NOLOAD);
  if (!h && getenv("CUPTI_PATH")) h = dlopen(getenv("CUPTI_PATH"), RTLD_NOW);
  if (!h) return -1;
  reg = (register_fn)dlsym(h, "cuptiActivityRegisterCallbacks");
  enable = (kind_fn)dlsym(h, "cuptiActivityEnable");
  disable = (kind_fn)dlsym(h, "cuptiActivityDisable");
  flush = (flush_fn)dlsym(h, "cuptiActivityFlushAll");
  next = (next_fn)dlsym(h, "cuptiActivityGetNextRecord");
  if (!reg || !enable || !disable || !flush || !next) return -2;
  return reg(requested, completed);
}

/* Starts kernel tracing: 0 on success, else a CUPTI result or -1 (no libcupti mapped). */
int floor_on(void) {
  int r = load();
  return r ? r : enable(KIND_CONCURRENT_KERNEL);
}

/* Stops it: flushes, disables, flushes. */
int floor_off(void) {
  flush(FLUSH_FORCED);
  int r = disable(KIND_CONCURRENT_KERNEL);
  flush(FLUSH_FORCED);
  return r;
}

/* Kernel records seen so far. */
uint64_t floor_records(void) { return __atomic_load_n(&records, __ATOMIC_RELAXED); }
