/* csrc/dist_mpi.h — the MPI library as gpumemnet reaches it: loaded at run time with dlopen (never linked at build
 * time, so that `import gpumemnet` works on a machine without MPI), behind calls that hide which ABI the library
 * has. Shared by dist_mpi_lib.c (loading, the ABI, the wrapped calls) and dist_mpi.c (the Python face).
 *
 * The ABI question. An MPI program normally compiles against its library's mpi.h, and the three ABIs in use
 * disagree on what a handle (communicator, datatype, op, request) is and on the values of the constants:
 *   MPICH ABI     handles are C ints with fixed values (MPI_COMM_WORLD 0x44000000, MPI_FLOAT 0x4c00040a, ...):
 *                 MPICH and its derivatives (Intel MPI, MVAPICH, Cray MPICH), libmpi.so.12 / libmpich.so.12,
 *                 the `mpich` PyPI wheel's lib/libmpi.so.12, Debian's libmpich-dev.
 *   MPI 5 ABI     the standard ABI: handles are pointers to incomplete structs with small fixed values
 *                 (MPI_COMM_WORLD 0x101, MPI_FLOAT 0x210, ...): the wheel's lib/libmpi_abi.so.1 (MPICH >= 4.2),
 *                 and any library that implements MPI 5's ABI (MPI_Abi_get_version reports major >= 1).
 *   Open MPI      handles are pointers to the library's exported predefined objects (MPI_COMM_WORLD is
 *                 &ompi_mpi_comm_world): their values are read from the library with dlsym.
 * We keep every handle as an intptr_t and, at each call, pass it as the type the loaded library takes (an int for
 * the MPICH ABI, a pointer for the other two), through a function-pointer type of the right signature, so that no
 * call goes through a mismatched prototype. Handles returned through pointers (requests, duplicated communicators,
 * user ops) are written by the library into zeroed intptr_t storage and read back with the library's width. The
 * constants of the MPICH and MPI 5 ABIs are copied from their mpi.h / mpi_abi.h (MPICH 5.0.2), which fix them for
 * good; Open MPI's come from the library itself. Any other library (one that is none of the three) is refused with
 * a message that names what is supported. Status objects are never read: MPI_Test gets a 64-byte buffer, larger
 * than any of the three MPI_Status layouts (20, 24 and 32 bytes).
 * Tested: the MPICH ABI (the wheel's libmpi.so.12, which gpumemnet loads by default, tests/test_distributed_*.py) and
 * the MPI 5 ABI (the wheel's libmpi_abi.so.1, test_the_mpi_5_standard_abi_too), and Open MPI 4.1.4 (Debian 12's
 * openmpi-bin, libmpi.so.40: every distributed test passes under its mpiexec; .ci/run runs a subset). Its handles
 * are the ompi_mpi_* objects, MPI_IN_PLACE is (void *)1, thread levels 0..3. Its mpiexec must launch it (another
 * launcher starts every rank as a world of 1: refused by name). */
#ifndef GM_DIST_MPI_H
#define GM_DIST_MPI_H

#include <stdint.h>

typedef intptr_t gm_mpi_handle;

enum { GM_MPI_ABI_MPICH = 1, GM_MPI_ABI_STANDARD = 2, GM_MPI_ABI_OPENMPI = 3 };
/* MPI_UNDEFINED: -32766 in all three (MPICH's mpi.h, mpi_abi.h, Open MPI's mpi.h). */
enum { GM_MPI_UNDEFINED = -32766 };

/* The datatypes gpumemnet's tensors travel as (float16 and bfloat16 as uint16 with user-defined reduce ops; bool
 * as uint8). */
enum { GM_MPI_F32, GM_MPI_F64, GM_MPI_U8, GM_MPI_I8, GM_MPI_I16, GM_MPI_U16, GM_MPI_I32, GM_MPI_I64, GM_MPI_NDT };
/* Reduce ops, in ReduceOp's order in python/gpumemnet/distributed (AVG is SUM then a division, in Python). */
enum { GM_MPI_SUM, GM_MPI_PRODUCT, GM_MPI_MIN, GM_MPI_MAX, GM_MPI_NOPS };

typedef struct {
    int abi;           /* GM_MPI_ABI_* */
    const char *abi_name;
    void *lib;         /* dlopen handle; NULL until loaded */
    gm_mpi_handle comm_world, errors_return, dt[GM_MPI_NDT], op[GM_MPI_NOPS];
    void *in_place;    /* MPI_IN_PLACE */
    int thread_multiple;
} gm_mpi_lib;

extern gm_mpi_lib gm_mpi;

/* dist_mpi_lib.c. Every call below returns the MPI error code (0 = MPI_SUCCESS) and must be made holding
 * gm_mpi_lock (MPI is asked for MPI_THREAD_MULTIPLE, but a library may give less: the lock makes any level safe). */
void gm_mpi_lock(void);
void gm_mpi_unlock(void);
/* dlopen path and learn its ABI. 0, or -1 + RuntimeError saying what is wrong and how to get a supported MPI. */
int gm_mpi_load(const char *path);
/* The library's MPI_Get_library_version text (first line kept short by the caller). */
int gm_mpi_library_version(char *buf, int buflen);
/* The library's text for an error code. */
void gm_mpi_error_string(int code, char *buf, int buflen);
int gm_mpi_initialized(int *flag);
int gm_mpi_finalized(int *flag);
int gm_mpi_init_thread(int *provided);
int gm_mpi_finalize(void);
int gm_mpi_abort(gm_mpi_handle comm, int code);
int gm_mpi_comm_rank(gm_mpi_handle comm, int *rank);
int gm_mpi_comm_size(gm_mpi_handle comm, int *size);
int gm_mpi_comm_dup(gm_mpi_handle comm, gm_mpi_handle *out);
/* color GM_MPI_UNDEFINED: not a member (*out is then the library's MPI_COMM_NULL, never used). */
int gm_mpi_comm_split(gm_mpi_handle comm, int color, int key, gm_mpi_handle *out);
int gm_mpi_comm_free(gm_mpi_handle *comm);
int gm_mpi_comm_set_errhandler(gm_mpi_handle comm, gm_mpi_handle handler);
int gm_mpi_op_create(void (*fn)(void *, void *, int *, void *), int commute, gm_mpi_handle *op);
int gm_mpi_op_free(gm_mpi_handle *op);
/* Non-blocking collectives; *req is zeroed storage the library writes its request into. */
int gm_mpi_ibarrier(gm_mpi_handle comm, gm_mpi_handle *req);
int gm_mpi_iallreduce(const void *send, void *recv, int count, gm_mpi_handle dt, gm_mpi_handle op,
                      gm_mpi_handle comm, gm_mpi_handle *req);
int gm_mpi_ibcast(void *buf, int count, gm_mpi_handle dt, int root, gm_mpi_handle comm, gm_mpi_handle *req);
int gm_mpi_iallgather(const void *send, int count, gm_mpi_handle dt, void *recv, gm_mpi_handle comm,
                      gm_mpi_handle *req);
int gm_mpi_ireduce_scatter_block(const void *send, void *recv, int count, gm_mpi_handle dt, gm_mpi_handle op,
                                 gm_mpi_handle comm, gm_mpi_handle *req);
int gm_mpi_ireduce(const void *send, void *recv, int count, gm_mpi_handle dt, gm_mpi_handle op, int root,
                   gm_mpi_handle comm, gm_mpi_handle *req);
int gm_mpi_igather(const void *send, int count, gm_mpi_handle dt, void *recv, int root, gm_mpi_handle comm,
                   gm_mpi_handle *req);
int gm_mpi_iscatter(const void *send, int count, gm_mpi_handle dt, void *recv, int root, gm_mpi_handle comm,
                    gm_mpi_handle *req);
int gm_mpi_test(gm_mpi_handle *req, int *flag);

#endif
