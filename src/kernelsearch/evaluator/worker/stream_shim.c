/* Stream shim for the candidate's worker (worker/streams.py, the stream-order check).
 *
 * Loaded with RTLD_GLOBAL before torch, so it precedes the CUDA runtime and driver in the
 * global symbol scope: every call a library makes through its PLT to one of the stream
 * constructors below reaches this file first. It forwards each call to the definition the
 * caller would have reached without it, records every non-blocking stream created (those the
 * legacy default stream does not order), and, while the worker holds a gate (ks_gate_close),
 * makes each new non-blocking stream wait on the gate's event before handing it out. The
 * worker gates the streams created earlier through the same call. No CUDA headers: handles are
 * opaque pointers (cudaStream_t and CUstream, cudaEvent_t and CUevent are the same objects).
 *
 * Not seen: streams made through a function pointer the caller looked up itself (dlsym on a
 * library handle, cuGetProcAddress), by a statically linked runtime, or in another context.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

typedef void *ks_stream;
typedef void *ks_event;
typedef int (*create_flags_fn)(ks_stream *, unsigned int);
typedef int (*create_priority_fn)(ks_stream *, unsigned int, int);
typedef int (*destroy_fn)(ks_stream);
typedef int (*wait_fn)(ks_stream, ks_event, unsigned int);

#define KS_NON_BLOCKING 0x1u   /* cudaStreamNonBlocking == CU_STREAM_NON_BLOCKING */
#define KS_ERROR_UNKNOWN 999   /* cudaErrorUnknown == CUDA_ERROR_UNKNOWN */
#define KS_MAX_STREAMS 4096

static pthread_mutex_t ks_lock = PTHREAD_MUTEX_INITIALIZER;
static ks_stream ks_streams_seen[KS_MAX_STREAMS];
static int ks_n_streams;
static int ks_dropped;     /* non-blocking streams not recorded: the table was full */
static ks_event ks_gate;   /* non-NULL while the worker holds a gate */
static int ks_gated_new;   /* streams made (and gated) while the gate is closed */
static int ks_gate_failed; /* waits that failed while gating */

/* The driver function `name` itself (never this shim's definition of it). */
static void *ks_driver(const char *name) {
    void *f = NULL;
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h != NULL) {
        f = dlsym(h, name);
        dlclose(h);
    }
    return f;
}

/* The definition `name` had without this shim: first in the dependencies of the library that
 * called (an extension gets the runtime it was linked against), else the next in the global
 * search order. `self` is this shim's own definition, never returned. */
static void *ks_real(const char *name, void *caller, void *self) {
    void *f = NULL;
    Dl_info info;
    if (caller != NULL && dladdr(caller, &info) && info.dli_fname != NULL && info.dli_fname[0] != '\0') {
        void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
        if (h != NULL) {
            f = dlsym(h, name);
            dlclose(h);
        }
    }
    if (f == NULL || f == self)
        f = dlsym(RTLD_NEXT, name);
    if ((f == NULL || f == self) && name[0] == 'c' && name[1] == 'u' && name[2] != 'd')
        f = ks_driver(name); /* the driver, loaded privately */
    return f == self ? NULL : f;
}

/* The driver's cuStreamWaitEvent (the runtime is loaded per caller; the driver once). */
static wait_fn ks_wait(void) {
    static wait_fn fn;
    if (fn == NULL)
        fn = (wait_fn)ks_driver("cuStreamWaitEvent");
    if (fn == NULL)
        fn = (wait_fn)dlsym(RTLD_DEFAULT, "cuStreamWaitEvent");
    return fn;
}

static int ks_hold(ks_stream s, ks_event e) {
    wait_fn w = ks_wait();
    return w != NULL && w(s, e, 0) == 0;
}

static void ks_track(int status, ks_stream *out, unsigned int flags) {
    if (status != 0 || out == NULL || *out == NULL || !(flags & KS_NON_BLOCKING))
        return;
    ks_wait(); /* resolved outside the lock: dlopen must not run under it */
    pthread_mutex_lock(&ks_lock);
    if (ks_n_streams < KS_MAX_STREAMS)
        ks_streams_seen[ks_n_streams++] = *out;
    else
        ks_dropped++;
    if (ks_gate != NULL) {
        if (ks_hold(*out, ks_gate))
            ks_gated_new++;
        else
            ks_gate_failed++;
    }
    pthread_mutex_unlock(&ks_lock);
}

static void ks_untrack(ks_stream s) {
    pthread_mutex_lock(&ks_lock);
    for (int i = 0; i < ks_n_streams; i++) {
        if (ks_streams_seen[i] == s) {
            ks_streams_seen[i] = ks_streams_seen[--ks_n_streams];
            break;
        }
    }
    pthread_mutex_unlock(&ks_lock);
}

#define KS_CREATE_FLAGS(NAME)                                                               \
    int NAME(ks_stream *s, unsigned int flags) {                                           \
        create_flags_fn f = (create_flags_fn)ks_real(#NAME, __builtin_return_address(0),   \
                                                     (void *)&NAME);                       \
        int status = f != NULL ? f(s, flags) : KS_ERROR_UNKNOWN;                           \
        ks_track(status, s, flags);                                                        \
        return status;                                                                     \
    }

#define KS_CREATE_PRIORITY(NAME)                                                            \
    int NAME(ks_stream *s, unsigned int flags, int priority) {                             \
        create_priority_fn f = (create_priority_fn)ks_real(#NAME, __builtin_return_address(0), \
                                                           (void *)&NAME);                 \
        int status = f != NULL ? f(s, flags, priority) : KS_ERROR_UNKNOWN;                 \
        ks_track(status, s, flags);                                                        \
        return status;                                                                     \
    }

#define KS_DESTROY(NAME)                                                                    \
    int NAME(ks_stream s) {                                                                \
        destroy_fn f = (destroy_fn)ks_real(#NAME, __builtin_return_address(0), (void *)&NAME); \
        ks_untrack(s);                                                                     \
        return f != NULL ? f(s) : KS_ERROR_UNKNOWN;                                        \
    }

KS_CREATE_FLAGS(cudaStreamCreateWithFlags)
KS_CREATE_PRIORITY(cudaStreamCreateWithPriority)
KS_CREATE_FLAGS(cuStreamCreate)
KS_CREATE_PRIORITY(cuStreamCreateWithPriority)
KS_DESTROY(cudaStreamDestroy)
KS_DESTROY(cuStreamDestroy)
KS_DESTROY(cuStreamDestroy_v2)

/* The worker's side. Close the gate: every recorded stream, and every non-blocking stream made
 * until ks_gate_open, waits on `event`. Returns how many recorded streams now wait, or -1 when
 * the driver's wait cannot be found (nothing is gated). */
int ks_gate_close(ks_event event) {
    if (event == NULL || ks_wait() == NULL)
        return -1;
    pthread_mutex_lock(&ks_lock);
    int held = 0;
    ks_gated_new = 0;
    ks_gate_failed = 0;
    for (int i = 0; i < ks_n_streams; i++) {
        if (ks_hold(ks_streams_seen[i], event))
            held++;
        else
            ks_gate_failed++;
    }
    ks_gate = event;
    pthread_mutex_unlock(&ks_lock);
    return held;
}

/* Stop gating new streams; returns how many were made (and gated) while the gate was closed. */
int ks_gate_open(void) {
    pthread_mutex_lock(&ks_lock);
    ks_gate = NULL;
    int n = ks_gated_new;
    pthread_mutex_unlock(&ks_lock);
    return n;
}

/* Waits that failed since the last ks_gate_close (a stream of another context, one destroyed
 * behind the shim's back): those streams were not held. */
int ks_gate_failures(void) {
    pthread_mutex_lock(&ks_lock);
    int n = ks_gate_failed;
    pthread_mutex_unlock(&ks_lock);
    return n;
}

/* Copy up to `cap` recorded non-blocking streams into `out`; returns how many are recorded. */
int ks_streams(ks_stream *out, int cap) {
    pthread_mutex_lock(&ks_lock);
    int n = ks_n_streams;
    for (int i = 0; i < n && i < cap; i++)
        out[i] = ks_streams_seen[i];
    pthread_mutex_unlock(&ks_lock);
    return n;
}

typedef int (*event_create_fn)(ks_event *, unsigned int);
typedef int (*event_record_fn)(ks_event, ks_stream);
#define KS_EVENT_DISABLE_TIMING 0x2u /* CU_EVENT_DISABLE_TIMING */
static ks_event ks_join_events[KS_MAX_STREAMS];

/* The timed loop's join: on every recorded stream an event, and `current` waits on each, so
 * the end event recorded on `current` next comes after all their work. Then the gate opens.
 * Returns how many streams were joined, or -(1 + failures) when some could not be. */
int ks_gate_join(ks_stream current) {
    static event_create_fn create;
    static event_record_fn record;
    if (create == NULL) {
        create = (event_create_fn)ks_driver("cuEventCreate");
        record = (event_record_fn)ks_driver("cuEventRecord");
    }
    wait_fn w = ks_wait();
    pthread_mutex_lock(&ks_lock);
    int joined = 0, failed = 0;
    for (int i = 0; i < ks_n_streams; i++) {
        if (create == NULL || record == NULL || w == NULL) {
            failed++;
            continue;
        }
        if (ks_join_events[i] == NULL && create(&ks_join_events[i], KS_EVENT_DISABLE_TIMING) != 0) {
            ks_join_events[i] = NULL;
            failed++;
            continue;
        }
        if (record(ks_join_events[i], ks_streams_seen[i]) == 0 && w(current, ks_join_events[i], 0) == 0)
            joined++;
        else
            failed++;
    }
    ks_gate = NULL;
    pthread_mutex_unlock(&ks_lock);
    return failed ? -(1 + failed) : joined;
}

/* A non-blocking stream for the worker's own use (the stream-order check's gate), made with the
 * driver's function directly: not recorded, so never held or joined. NULL on failure. */
ks_stream ks_private_stream(void) {
    create_flags_fn f = (create_flags_fn)ks_driver("cuStreamCreate");
    ks_stream s = NULL;
    if (f == NULL || f(&s, KS_NON_BLOCKING) != 0)
        return NULL;
    return s;
}

/* How many non-blocking streams are recorded. */
int ks_stream_count(void) {
    pthread_mutex_lock(&ks_lock);
    int n = ks_n_streams;
    pthread_mutex_unlock(&ks_lock);
    return n;
}

/* Non-blocking streams not recorded because the table was full. */
int ks_streams_dropped(void) {
    pthread_mutex_lock(&ks_lock);
    int n = ks_dropped;
    pthread_mutex_unlock(&ks_lock);
    return n;
}
