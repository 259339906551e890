/* A GPU timeline of this process through CUPTI's activity API: kernels (concurrent, CUDA graph nodes included),
 * copies, memsets and the CUDA runtime and driver calls, written as tab-separated lines when the trace stops.
 * benchmarks/step_timeline.py loads it with ctypes; Nsight Systems does not run on the lent GPU machines, and
 * PyTorch's profiler cannot share a process with llama-cpp-python's CUDA build there (the process aborts at import).
 *
 * Lines: K start end stream name | C start end stream bytes kind | S start end stream bytes |
 *        R start end thread name (runtime) | D start end thread name (driver). Times: CUPTI's clock, ns (trace_now).
 *
 * Build: nvcc -shared -Xcompiler -fPIC -o libcupti_trace.so cupti_trace.c -lcupti (-I/-L for CUPTI's folders).
 */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>

#define BUF_SIZE (16u * 1024u * 1024u)

static FILE *out = NULL;
static unsigned long long dropped = 0;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = (uint8_t *) aligned_alloc(8, BUF_SIZE);
    *size = *buffer ? BUF_SIZE : 0;
    *max_records = 0;
}

static const char *api_name(CUpti_CallbackDomain domain, uint32_t cbid) {
    const char *name = NULL;
    if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || name == NULL) {
        return "?";
    }
    return name;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void) ctx; (void) stream; (void) size;
    CUpti_Activity *rec = NULL;
    while (out && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        switch (rec->kind) {
            case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
                const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *) rec;
                fprintf(out, "K\t%llu\t%llu\t%u\t%s\n", (unsigned long long) k->start, (unsigned long long) k->end,
                        k->streamId, k->name ? k->name : "?");
            } break;
            case CUPTI_ACTIVITY_KIND_MEMCPY: {
                const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *) rec;
                fprintf(out, "C\t%llu\t%llu\t%u\t%llu\t%u.%u.%u\n", (unsigned long long) m->start,
                        (unsigned long long) m->end, m->streamId, (unsigned long long) m->bytes, m->copyKind,
                        m->srcKind, m->dstKind);
            } break;
            case CUPTI_ACTIVITY_KIND_MEMSET: {
                const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *) rec;
                fprintf(out, "S\t%llu\t%llu\t%u\t%llu\n", (unsigned long long) m->start, (unsigned long long) m->end,
                        m->streamId, (unsigned long long) m->bytes);
            } break;
            case CUPTI_ACTIVITY_KIND_RUNTIME:
            case CUPTI_ACTIVITY_KIND_DRIVER: {
                const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *) rec;
                const int rt = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
                fprintf(out, "%c\t%llu\t%llu\t%u\t%s\n", rt ? 'R' : 'D', (unsigned long long) a->start,
                        (unsigned long long) a->end, a->threadId,
                        api_name(rt ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid));
            } break;
            default:
                break;
        }
    }
    size_t n = 0;
    if (cuptiActivityGetNumDroppedRecords(NULL, 0, &n) == CUPTI_SUCCESS) {
        dropped += n;
    }
    free(buffer);
}

static const CUpti_ActivityKind KINDS[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
};
#define N_KINDS (sizeof(KINDS) / sizeof(KINDS[0]))

/* 0 when tracing; otherwise the CUPTI error (or -1: the file could not be opened). */
int trace_start(const char *path) {
    out = fopen(path, "w");
    if (!out) {
        return -1;
    }
    CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    for (size_t i = 0; r == CUPTI_SUCCESS && i < N_KINDS; ++i) {
        r = cuptiActivityEnable(KINDS[i]);
    }
    if (r != CUPTI_SUCCESS) {
        fclose(out);
        out = NULL;
    }
    return (int) r;
}

/* Now on CUPTI's clock (ns), for marks set from the host. */
unsigned long long trace_now(void) {
    uint64_t t = 0;
    cuptiGetTimestamp(&t);
    return (unsigned long long) t;
}

void trace_mark(const char *name, unsigned long long start, unsigned long long end) {
    if (out) {
        fprintf(out, "M\t%llu\t%llu\t0\t%s\n", start, end, name);
    }
}

/* Flushes every record and closes the file; the records CUPTI had to drop. */
unsigned long long trace_stop(void) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (size_t i = 0; i < N_KINDS; ++i) {
        cuptiActivityDisable(KINDS[i]);
    }
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (out) {
        fclose(out);
        out = NULL;
    }
    return dropped;
}
