/* csrc/dist_mpi_lib.c — the MPI library reached at run time: dlopen, which ABI it has (dist_mpi.h says why that
 * matters and what is supported), and one wrapper per MPI call that passes handles with the library's width.
 * Nothing here knows tensors or Python objects beyond the RuntimeError of a failed load; dist_mpi.c is the face. */
#include "gm.h"
#include "dist_mpi.h"

#include <dlfcn.h>
#include <pthread.h>

gm_mpi_lib gm_mpi;

static pthread_mutex_t mpi_mutex = PTHREAD_MUTEX_INITIALIZER;
void gm_mpi_lock(void) { pthread_mutex_lock(&mpi_mutex); }
void gm_mpi_unlock(void) { pthread_mutex_unlock(&mpi_mutex); }

/* The entry points, as dlsym found them; each wrapper below casts to the signature of the library's ABI. */
static struct {
    void *initialized, *finalized, *init_thread, *finalize, *abort, *comm_rank, *comm_size, *comm_dup, *comm_split, *comm_free,
        *comm_set_errhandler, *op_create, *op_free, *ibarrier, *iallreduce, *ibcast, *iallgather,
        *ireduce_scatter_block, *ireduce, *igather, *iscatter, *test, *get_library_version, *error_string;
} fn;

#define INTH (gm_mpi.abi == GM_MPI_ABI_MPICH)
#define I(h) ((int)(h))
#define P(h) ((void *)(h))

/* MPICH ABI (MPICH 5.0.2's mpi.h; fixed since MPICH 3.1's ABI initiative). */
static void set_mpich_constants(void) {
    gm_mpi.comm_world = 0x44000000;
    gm_mpi.errors_return = 0x54000001;
    const gm_mpi_handle dt[GM_MPI_NDT] = {0x4c00040a, 0x4c00080b, 0x4c00013b, 0x4c000137,
                                          0x4c000238, 0x4c00023c, 0x4c000439, 0x4c00083a};
    const gm_mpi_handle op[GM_MPI_NOPS] = {0x58000003, 0x58000004, 0x58000002, 0x58000001};
    memcpy(gm_mpi.dt, dt, sizeof dt);
    memcpy(gm_mpi.op, op, sizeof op);
    gm_mpi.in_place = (void *)-1;
    gm_mpi.thread_multiple = 3;
}

/* MPI 5 standard ABI (mpi_abi.h). */
static void set_standard_constants(void) {
    gm_mpi.comm_world = 0x101;
    gm_mpi.errors_return = 0x143;
    const gm_mpi_handle dt[GM_MPI_NDT] = {0x210, 0x214, 0x241, 0x240, 0x248, 0x249, 0x250, 0x258};
    const gm_mpi_handle op[GM_MPI_NOPS] = {0x21, 0x24, 0x22, 0x23};
    memcpy(gm_mpi.dt, dt, sizeof dt);
    memcpy(gm_mpi.op, op, sizeof op);
    gm_mpi.in_place = (void *)1;
    gm_mpi.thread_multiple = 4096;
}

/* Open MPI: the predefined handles are the addresses of objects the library exports (its mpi.h's
 * OMPI_PREDEFINED_GLOBAL). Returns the name of a missing one, or NULL. */
static const char *set_openmpi_constants(void *lib) {
    static const char *const names[] = {"ompi_mpi_comm_world", "ompi_mpi_errors_return", "ompi_mpi_float",
                                        "ompi_mpi_double", "ompi_mpi_uint8_t", "ompi_mpi_int8_t",
                                        "ompi_mpi_int16_t", "ompi_mpi_uint16_t", "ompi_mpi_int32_t",
                                        "ompi_mpi_int64_t", "ompi_mpi_op_sum", "ompi_mpi_op_prod",
                                        "ompi_mpi_op_min", "ompi_mpi_op_max"};
    gm_mpi_handle *slots[] = {&gm_mpi.comm_world, &gm_mpi.errors_return, &gm_mpi.dt[0], &gm_mpi.dt[1],
                              &gm_mpi.dt[2], &gm_mpi.dt[3], &gm_mpi.dt[4], &gm_mpi.dt[5], &gm_mpi.dt[6],
                              &gm_mpi.dt[7], &gm_mpi.op[0], &gm_mpi.op[1], &gm_mpi.op[2], &gm_mpi.op[3]};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *p = dlsym(lib, names[i]);
        if (!p) return names[i];
        *slots[i] = (gm_mpi_handle)p;
    }
    gm_mpi.in_place = (void *)1;
    gm_mpi.thread_multiple = 3;
    return NULL;
}

int gm_mpi_load(const char *path) {
    if (gm_mpi.lib) return 0;
    dlerror();
    /* RTLD_GLOBAL: Open MPI's components (dlopen'ed by libmpi) resolve symbols of libmpi itself. */
    void *lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        const char *e = dlerror();
        PyErr_Format(PyExc_RuntimeError, "could not load the MPI library %s: %s", path, e ? e : "(no reason given)");
        return -1;
    }
    static const struct { const char *name; void **slot; } syms[] = {
        {"MPI_Initialized", &fn.initialized}, {"MPI_Finalized", &fn.finalized},
        {"MPI_Init_thread", &fn.init_thread}, {"MPI_Finalize", &fn.finalize}, {"MPI_Abort", &fn.abort},
        {"MPI_Comm_rank", &fn.comm_rank}, {"MPI_Comm_size", &fn.comm_size}, {"MPI_Comm_dup", &fn.comm_dup},
        {"MPI_Comm_split", &fn.comm_split}, {"MPI_Comm_free", &fn.comm_free}, {"MPI_Comm_set_errhandler", &fn.comm_set_errhandler},
        {"MPI_Op_create", &fn.op_create}, {"MPI_Op_free", &fn.op_free}, {"MPI_Ibarrier", &fn.ibarrier},
        {"MPI_Iallreduce", &fn.iallreduce}, {"MPI_Ibcast", &fn.ibcast}, {"MPI_Iallgather", &fn.iallgather},
        {"MPI_Ireduce_scatter_block", &fn.ireduce_scatter_block}, {"MPI_Ireduce", &fn.ireduce},
        {"MPI_Igather", &fn.igather}, {"MPI_Iscatter", &fn.iscatter}, {"MPI_Test", &fn.test},
        {"MPI_Get_library_version", &fn.get_library_version}, {"MPI_Error_string", &fn.error_string},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        if (!(*syms[i].slot = dlsym(lib, syms[i].name))) {
            PyErr_Format(PyExc_RuntimeError, "the MPI library %s has no %s: gpumemnet needs MPI 3 or later "
                         "(its non-blocking collectives)", path, syms[i].name);
            goto fail;
        }
    }
    int (*abi_version)(int *, int *) = (int (*)(int *, int *))dlsym(lib, "MPI_Abi_get_version");
    int major = -1, minor = -1;
    if (abi_version && abi_version(&major, &minor) != 0) major = -1;
    char version[8192] = "";
    int len = 0;
    ((int (*)(char *, int *))fn.get_library_version)(version, &len);
    version[sizeof version - 1] = '\0';
    const char *missing = NULL;
    if (major >= 1) {
        gm_mpi.abi = GM_MPI_ABI_STANDARD, gm_mpi.abi_name = "MPI 5 standard ABI";
        set_standard_constants();
    } else if (dlsym(lib, "ompi_mpi_comm_world")) {
        gm_mpi.abi = GM_MPI_ABI_OPENMPI, gm_mpi.abi_name = "Open MPI";
        missing = set_openmpi_constants(lib);
    } else if (strstr(version, "MPICH") || strstr(version, "Intel(R) MPI")) {
        gm_mpi.abi = GM_MPI_ABI_MPICH, gm_mpi.abi_name = "MPICH ABI";
        set_mpich_constants();
    } else {
        char *nl = strchr(version, '\n');
        if (nl) *nl = '\0';
        PyErr_Format(PyExc_RuntimeError, "the MPI library %s (\"%.200s\") has none of the ABIs gpumemnet supports: "
                     "the MPICH ABI (MPICH, Intel MPI, MVAPICH, Cray MPICH), the MPI 5 standard ABI, or Open MPI. "
                     "Install one, e.g. `pip install mpich`", path, version);
        goto fail;
    }
    if (missing) {
        PyErr_Format(PyExc_RuntimeError, "the MPI library %s looks like Open MPI but has no %s", path, missing);
        goto fail;
    }
    gm_mpi.lib = lib;
    return 0;
fail:
    dlclose(lib);
    memset(&gm_mpi, 0, sizeof gm_mpi);
    return -1;
}

int gm_mpi_library_version(char *buf, int buflen) {
    char version[8192] = "";
    int len = 0;
    int rc = ((int (*)(char *, int *))fn.get_library_version)(version, &len);
    version[sizeof version - 1] = '\0';
    snprintf(buf, (size_t)buflen, "%s", version);
    return rc;
}

void gm_mpi_error_string(int code, char *buf, int buflen) {
    char text[4096] = "";
    int len = 0;
    if (!fn.error_string || ((int (*)(int, char *, int *))fn.error_string)(code, text, &len) != 0)
        snprintf(text, sizeof text, "MPI error %d", code);
    text[sizeof text - 1] = '\0';
    snprintf(buf, (size_t)buflen, "%s", text);
}

int gm_mpi_initialized(int *flag) { return ((int (*)(int *))fn.initialized)(flag); }
int gm_mpi_finalized(int *flag) { return ((int (*)(int *))fn.finalized)(flag); }

int gm_mpi_init_thread(int *provided) {
    /* NULL argc/argv: MPI 2 allows it, and the launcher passes everything through the environment. */
    return ((int (*)(int *, char ***, int, int *))fn.init_thread)(NULL, NULL, gm_mpi.thread_multiple, provided);
}

int gm_mpi_finalize(void) { return ((int (*)(void))fn.finalize)(); }

int gm_mpi_abort(gm_mpi_handle comm, int code) {
    if (INTH) return ((int (*)(int, int))fn.abort)(I(comm), code);
    return ((int (*)(void *, int))fn.abort)(P(comm), code);
}

int gm_mpi_comm_rank(gm_mpi_handle comm, int *rank) {
    if (INTH) return ((int (*)(int, int *))fn.comm_rank)(I(comm), rank);
    return ((int (*)(void *, int *))fn.comm_rank)(P(comm), rank);
}

int gm_mpi_comm_size(gm_mpi_handle comm, int *size) {
    if (INTH) return ((int (*)(int, int *))fn.comm_size)(I(comm), size);
    return ((int (*)(void *, int *))fn.comm_size)(P(comm), size);
}

int gm_mpi_comm_dup(gm_mpi_handle comm, gm_mpi_handle *out) {
    int rc;
    if (INTH) {
        int o = 0;
        rc = ((int (*)(int, int *))fn.comm_dup)(I(comm), &o);
        *out = o;
    } else {
        void *o = NULL;
        rc = ((int (*)(void *, void **))fn.comm_dup)(P(comm), &o);
        *out = (gm_mpi_handle)o;
    }
    return rc;
}

int gm_mpi_comm_split(gm_mpi_handle comm, int color, int key, gm_mpi_handle *out) {
    int rc;
    if (INTH) {
        int o = 0;
        rc = ((int (*)(int, int, int, int *))fn.comm_split)(I(comm), color, key, &o);
        *out = o;
    } else {
        void *o = NULL;
        rc = ((int (*)(void *, int, int, void **))fn.comm_split)(P(comm), color, key, &o);
        *out = (gm_mpi_handle)o;
    }
    return rc;
}

int gm_mpi_comm_free(gm_mpi_handle *comm) {
    int rc;
    if (INTH) {
        int c = I(*comm);
        rc = ((int (*)(int *))fn.comm_free)(&c);
        *comm = c;
    } else {
        void *c = P(*comm);
        rc = ((int (*)(void **))fn.comm_free)(&c);
        *comm = (gm_mpi_handle)c;
    }
    return rc;
}

int gm_mpi_comm_set_errhandler(gm_mpi_handle comm, gm_mpi_handle handler) {
    if (INTH) return ((int (*)(int, int))fn.comm_set_errhandler)(I(comm), I(handler));
    return ((int (*)(void *, void *))fn.comm_set_errhandler)(P(comm), P(handler));
}

typedef void user_fn(void *, void *, int *, void *);

int gm_mpi_op_create(user_fn *f, int commute, gm_mpi_handle *op) {
    int rc;
    if (INTH) {
        int o = 0;
        rc = ((int (*)(user_fn *, int, int *))fn.op_create)(f, commute, &o);
        *op = o;
    } else {
        void *o = NULL;
        rc = ((int (*)(user_fn *, int, void **))fn.op_create)(f, commute, &o);
        *op = (gm_mpi_handle)o;
    }
    return rc;
}

int gm_mpi_op_free(gm_mpi_handle *op) {
    int rc;
    if (INTH) {
        int o = I(*op);
        rc = ((int (*)(int *))fn.op_free)(&o);
        *op = o;
    } else {
        void *o = P(*op);
        rc = ((int (*)(void **))fn.op_free)(&o);
        *op = (gm_mpi_handle)o;
    }
    return rc;
}

/* Requests: the library writes its request (an int, or a pointer) into the start of *req, which the caller
 * zeroed; only MPI_Test reads it back, through the same pointer, so its width never matters here. */
int gm_mpi_ibarrier(gm_mpi_handle comm, gm_mpi_handle *req) {
    if (INTH) return ((int (*)(int, void *))fn.ibarrier)(I(comm), req);
    return ((int (*)(void *, void *))fn.ibarrier)(P(comm), req);
}

int gm_mpi_iallreduce(const void *send, void *recv, int count, gm_mpi_handle dt, gm_mpi_handle op,
                      gm_mpi_handle comm, gm_mpi_handle *req) {
    if (INTH)
        return ((int (*)(const void *, void *, int, int, int, int, void *))fn.iallreduce)(
            send, recv, count, I(dt), I(op), I(comm), req);
    return ((int (*)(const void *, void *, int, void *, void *, void *, void *))fn.iallreduce)(
        send, recv, count, P(dt), P(op), P(comm), req);
}

int gm_mpi_ibcast(void *buf, int count, gm_mpi_handle dt, int root, gm_mpi_handle comm, gm_mpi_handle *req) {
    if (INTH) return ((int (*)(void *, int, int, int, int, void *))fn.ibcast)(buf, count, I(dt), root, I(comm), req);
    return ((int (*)(void *, int, void *, int, void *, void *))fn.ibcast)(buf, count, P(dt), root, P(comm), req);
}

int gm_mpi_iallgather(const void *send, int count, gm_mpi_handle dt, void *recv, gm_mpi_handle comm,
                      gm_mpi_handle *req) {
    if (INTH)
        return ((int (*)(const void *, int, int, void *, int, int, int, void *))fn.iallgather)(
            send, count, I(dt), recv, count, I(dt), I(comm), req);
    return ((int (*)(const void *, int, void *, void *, int, void *, void *, void *))fn.iallgather)(
        send, count, P(dt), recv, count, P(dt), P(comm), req);
}

int gm_mpi_ireduce_scatter_block(const void *send, void *recv, int count, gm_mpi_handle dt, gm_mpi_handle op,
                                 gm_mpi_handle comm, gm_mpi_handle *req) {
    if (INTH)
        return ((int (*)(const void *, void *, int, int, int, int, void *))fn.ireduce_scatter_block)(
            send, recv, count, I(dt), I(op), I(comm), req);
    return ((int (*)(const void *, void *, int, void *, void *, void *, void *))fn.ireduce_scatter_block)(
        send, recv, count, P(dt), P(op), P(comm), req);
}

int gm_mpi_ireduce(const void *send, void *recv, int count, gm_mpi_handle dt, gm_mpi_handle op, int root,
                   gm_mpi_handle comm, gm_mpi_handle *req) {
    if (INTH)
        return ((int (*)(const void *, void *, int, int, int, int, int, void *))fn.ireduce)(
            send, recv, count, I(dt), I(op), root, I(comm), req);
    return ((int (*)(const void *, void *, int, void *, void *, int, void *, void *))fn.ireduce)(
        send, recv, count, P(dt), P(op), root, P(comm), req);
}

int gm_mpi_igather(const void *send, int count, gm_mpi_handle dt, void *recv, int root, gm_mpi_handle comm,
                   gm_mpi_handle *req) {
    if (INTH)
        return ((int (*)(const void *, int, int, void *, int, int, int, int, void *))fn.igather)(
            send, count, I(dt), recv, count, I(dt), root, I(comm), req);
    return ((int (*)(const void *, int, void *, void *, int, void *, int, void *, void *))fn.igather)(
        send, count, P(dt), recv, count, P(dt), root, P(comm), req);
}

int gm_mpi_iscatter(const void *send, int count, gm_mpi_handle dt, void *recv, int root, gm_mpi_handle comm,
                    gm_mpi_handle *req) {
    if (INTH)
        return ((int (*)(const void *, int, int, void *, int, int, int, int, void *))fn.iscatter)(
            send, count, I(dt), recv, count, I(dt), root, I(comm), req);
    return ((int (*)(const void *, int, void *, void *, int, void *, int, void *, void *))fn.iscatter)(
        send, count, P(dt), recv, count, P(dt), root, P(comm), req);
}

int gm_mpi_test(gm_mpi_handle *req, int *flag) {
    /* A status buffer larger than every ABI's MPI_Status (dist_mpi.h): no MPI_STATUS_IGNORE value to get right. */
    _Alignas(16) char status[64];
    return ((int (*)(void *, int *, void *))fn.test)(req, flag, status);
}
