/* kernels/cuda/emu/emu_launch.cpp — the CUDA emulator's kernel launches: one block at a time, each CUDA thread
 * of the block a cooperative fiber on the launching OS thread.
 *
 * The scheduler. A launch runs the blocks of the grid one after another, by default in order (x fastest, then
 * y, then z; GPUMEMNET_EMU_SCHEDULE=reverse or random:SEED permute blocks and threads, see order_threads).
 * Within a block:
 *  - round one: a fiber starts the first thread and runs it until it returns or calls __syncthreads(). If it returns,
 *    the same fiber goes straight on with the next thread (a kernel that never synchronises therefore runs its
 *    whole block on one fiber, one thread after another, with no switches at all). If it waits at the barrier,
 *    it stays suspended there and a new fiber takes the next thread. After round one every thread has either
 *    returned or is waiting at its first barrier;
 *  - if some threads wait while others have returned, the block can never pass the barrier (on a GPU: a hang
 *    or garbage): the launch stops and the device gets the sticky cudaErrorLaunchFailure naming the block and
 *    the counts (a "divergent __syncthreads()");
 *  - if all wait, the barrier opens: each waiting fiber is resumed in thread order and runs to its next barrier
 *    or its end; then the same check again, until every thread has returned.
 * Blocks run one after another, so a `static` (__shared__) is the shared memory of the block that runs; fibers
 * switch only inside __syncthreads(), so atomics are plain read-modify-writes (cuda_runtime.h).
 *
 * Fibers and their stacks (256 KiB each, mmap'ed with a guard page below so that an overflow faults instead of
 * corrupting a neighbour) are pooled for the life of the process: a launch allocates nothing once the pool
 * holds as many fibers as a block ever had waiting at once. The switch: on x86-64 a few instructions below
 * (callee-saved registers and the SSE/x87 control words, as the ABI requires across a call); elsewhere glibc's
 * swapcontext, which is correct but makes a system call per switch (about 30 times slower).
 * One launch at a time (a mutex): csrc may launch from several Python threads with the GIL released, and the
 * built-in variables and the shared-memory statics are process-wide. */
#include "emu_internal.h"

#include <exception>
#include <mutex>
#include <utility>
#include <vector>

#include <atomic>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
#include <cxxabi.h>
#include <dlfcn.h> /* dladdr is in libc itself since glibc 2.34: no -ldl needed */
#include <stdlib.h>
#define GM_EMU_HAVE_DLADDR 1
#endif

extern "C" {
uint3 gm_emu_thread_idx, gm_emu_block_idx;
dim3 gm_emu_block_dim, gm_emu_grid_dim;
}

namespace gm_emu {
namespace {

const size_t kStackBytes = 256 << 10;

/* ---- context switch ----------------------------------------------------------------------------------------
 * Ctx is a suspended stack. ctx_init(c, stack, size, fn) prepares c to start fn() (which must never return) on
 * that stack; ctx_swap(from, to) saves the running context in *from and resumes *to. */
#if defined(__x86_64__) && !defined(GM_EMU_UCONTEXT)
struct Ctx {
    void *sp;
};
extern "C" void gm_emu_ctx_switch(void **save_sp, void *to_sp);
/* A switch is a call: the caller already saved the caller-saved registers, so only rbp, rbx, r12-r15, MXCSR
 * and the x87 control word travel (System V ABI). */
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        ".hidden gm_emu_ctx_switch\n"
        ".globl gm_emu_ctx_switch\n"
        ".type gm_emu_ctx_switch, @function\n"
        "gm_emu_ctx_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size gm_emu_ctx_switch, .-gm_emu_ctx_switch\n"
        ".popsection\n");

void ctx_init(Ctx *c, void *stack, size_t size, void (*fn)()) {
    /* The frame gm_emu_ctx_switch pops: control words, six registers (zero), then `ret` into fn with the
     * stack as after a call (rsp = 8 mod 16), above it a null return address that ends backtraces. */
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(top - 72);
    uint32_t mxcsr;
    uint16_t fpcw;
    __asm__ __volatile__("stmxcsr %0" : "=m"(mxcsr));
    __asm__ __volatile__("fnstcw %0" : "=m"(fpcw));
    /* the launching thread's floating-point modes (flush-to-zero, rounding), as a CPU kernel would see them */
    sp[0] = (uint64_t)mxcsr | ((uint64_t)fpcw << 32);
    for (int i = 1; i <= 6; i++) sp[i] = 0;
    sp[7] = (uint64_t)(uintptr_t)fn;
    sp[8] = 0;
    c->sp = sp;
}
inline void ctx_swap(Ctx *from, Ctx *to) { gm_emu_ctx_switch(&from->sp, to->sp); }
#else
struct Ctx {
    ucontext_t uc;
    bool made = false;
};
void ctx_init(Ctx *c, void *stack, size_t size, void (*fn)()) {
    if (!c->made) { /* getcontext once per fiber (a system call); makecontext only re-points it */
        getcontext(&c->uc);
        c->made = true;
    }
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = nullptr;
    makecontext(&c->uc, fn, 0);
}
inline void ctx_swap(Ctx *from, Ctx *to) { swapcontext(&from->uc, &to->uc); }
#endif

enum FiberState { RUNNING, WAITING, DONE };

struct Fiber {
    Ctx ctx;
    void *stack = nullptr;
    void *map = nullptr; /* guard page + stack */
    uint3 tid;
    FiberState state = DONE;
};

/* Everything about the launch in progress; only touched with g_launch_mu held, by the launching thread. */
struct Launch {
    void (*fn)(void *) = nullptr;
    void *closure = nullptr;
    unsigned nthreads = 0, next_thread = 0; /* threads in a block; the next one round one has not started */
    std::vector<unsigned> order;             /* the block's threads (linear ids) in the order they start */
    unsigned returned = 0;                   /* threads that returned in the current round */
    uint3 first_returned;
    Fiber *current = nullptr;
    Ctx scheduler;
    std::vector<Fiber *> waiting; /* at the barrier, in arrival order */
    std::vector<Fiber *> pool;    /* idle fibers */
    std::vector<Fiber *> all;
    const char *trap = nullptr; /* why the running kernel must stop (a __trap, an exception) */
    char trap_buf[256];
};

std::mutex g_launch_mu;
Launch g_L;
thread_local bool tl_in_launch = false; /* this OS thread is running a kernel (so __syncthreads is a barrier) */
std::atomic<unsigned long long> g_launches{0};

uint3 thread_of(unsigned t) {
    const dim3 &b = gm_emu_block_dim;
    return uint3{t % b.x, (t / b.x) % b.y, t / (b.x * b.y)};
}

/* The body of every fiber: run threads of the block until one of them waits at a barrier (then this fiber
 * stays with it) or none is left to start. */
void fiber_main() {
    Launch &L = g_L;
    Fiber *f = L.current;
    for (;;) {
        try {
            L.fn(L.closure);
        } catch (const std::exception &e) {
            snprintf(L.trap_buf, sizeof L.trap_buf, "the kernel threw a C++ exception (%s)", e.what());
            L.trap = L.trap_buf;
        } catch (...) {
            L.trap = "the kernel threw a C++ exception";
        }
        if (L.trap) break;
        if (L.returned++ == 0) L.first_returned = f->tid;
        if (L.next_thread >= L.nthreads) break;
        f->tid = thread_of(L.order[L.next_thread++]);
        gm_emu_thread_idx = f->tid;
    }
    f->state = DONE;
    ctx_swap(&f->ctx, &L.scheduler); /* never comes back: the scheduler recycles this fiber */
}

Fiber *new_fiber() {
    Fiber *f = new (std::nothrow) Fiber;
    if (!f) return nullptr;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *m = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED) {
        delete f;
        return nullptr;
    }
    mprotect(m, page, PROT_NONE); /* the guard: stacks grow down into it */
    f->map = m;
    f->stack = (char *)m + page;
    g_L.all.push_back(f);
    return f;
}

/* After a fiber switched back: it is idle again if it finished, or if it trapped (then it is still RUNNING and
 * will never be resumed); a fiber waiting at the barrier stays out of the pool. */
void recycle_if_stopped(Fiber *f) {
    if (f->state == DONE || (f->state == RUNNING && g_L.trap)) {
        f->state = DONE;
        g_L.pool.push_back(f);
    }
}

/* Starts a fiber on thread t and runs it until it waits or the block's threads are all started. */
bool start_fiber(unsigned t) {
    Launch &L = g_L;
    Fiber *f;
    if (!L.pool.empty()) {
        f = L.pool.back();
        L.pool.pop_back();
    } else if (!(f = new_fiber())) {
        return false;
    }
    ctx_init(&f->ctx, f->stack, kStackBytes, fiber_main);
    f->tid = thread_of(t);
    f->state = RUNNING;
    L.current = f;
    gm_emu_thread_idx = f->tid;
    ctx_swap(&L.scheduler, &f->ctx);
    recycle_if_stopped(f);
    return true;
}

void resume_fiber(Fiber *f) {
    Launch &L = g_L;
    f->state = RUNNING;
    L.current = f;
    gm_emu_thread_idx = f->tid;
    ctx_swap(&L.scheduler, &f->ctx);
    recycle_if_stopped(f);
}

/* Fibers abandoned by a failed block go back to the pool (their stacks are simply reused). */
void abandon_waiting() {
    Launch &L = g_L;
    for (Fiber *f : L.waiting) {
        f->state = DONE;
        L.pool.push_back(f);
    }
    L.waiting.clear();
}

void describe_kernel(const void *kernel, char *out, size_t n) {
    snprintf(out, n, "kernel %p", kernel);
#ifdef GM_EMU_HAVE_DLADDR
    Dl_info info;
    /* only an exact match names it: a static kernel is not in the dynamic symbol table, and the nearest
     * exported symbol below it would be another function */
    if (dladdr(kernel, &info) && info.dli_sname && info.dli_saddr == kernel) {
        int st = 0;
        char *dm = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &st);
        snprintf(out, n, "kernel %s", st == 0 && dm ? dm : info.dli_sname);
        free(dm);
    }
#endif
}

/* Runs one block; false (with why) when the launch must stop. */
bool run_block(char *why, size_t n) {
    Launch &L = g_L;
    L.next_thread = 0;
    L.returned = 0;
    L.waiting.clear();
    L.trap = nullptr;
    while (L.next_thread < L.nthreads) { /* round one */
        if (!start_fiber(L.order[L.next_thread++])) {
            abandon_waiting();
            snprintf(why, n, "the emulator could not allocate a fiber stack (%zu KiB)", kStackBytes >> 10);
            return false;
        }
        if (L.trap) break;
    }
    for (;;) {
        if (L.trap) {
            abandon_waiting();
            snprintf(why, n, "%s", L.trap);
            return false;
        }
        if (L.waiting.empty()) return true; /* every thread returned */
        if (L.returned) {
            uint3 w = L.waiting[0]->tid, r = L.first_returned;
            snprintf(why, n,
                     "divergent __syncthreads(): %zu thread(s) wait at a barrier (the first: thread (%u,%u,%u)) while "
                     "%u returned without reaching it (the first: thread (%u,%u,%u)); every thread of a block must "
                     "reach every __syncthreads()",
                     L.waiting.size(), w.x, w.y, w.z, L.returned, r.x, r.y, r.z);
            abandon_waiting();
            return false;
        }
        /* everyone arrived: open the barrier, in arrival order (the schedule's order) */
        std::vector<Fiber *> batch;
        batch.swap(L.waiting);
        L.returned = 0;
        for (size_t i = 0; i < batch.size(); i++) {
            resume_fiber(batch[i]);
            if (L.trap) { /* the rest of the batch was never resumed: recycle it with the others */
                L.waiting.insert(L.waiting.end(), batch.begin() + i + 1, batch.end());
                break;
            }
        }
    }
}

/* ---- the order of blocks and threads ------------------------------------------------------------------------
 * A GPU runs blocks and threads in no defined order; kernels must not depend on one. Forward order hides some
 * such bugs (a missing __syncthreads between a write and another thread's read "works" when the writer happens
 * to run first), so GPUMEMNET_EMU_SCHEDULE=reverse or random:SEED runs the same tests in other orders. */
uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t gcd(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Block k of `total` in launch order -> the linear block index to run: an affine permutation (a*k + c) mod total
 * with a coprime to total, so a huge grid needs no table. */
struct BlockOrder {
    Schedule mode;
    uint64_t total, a = 1, c = 0;
    BlockOrder(Schedule m, uint64_t n, uint64_t *rng) : mode(m), total(n) {
        if (mode != SCHEDULE_RANDOM || n < 2) return;
        c = splitmix64(rng) % n;
        do a = splitmix64(rng) % n; while (a == 0 || gcd(a, n) != 1);
    }
    uint64_t at(uint64_t k) const {
        if (mode == SCHEDULE_REVERSE) return total - 1 - k;
        if (mode == SCHEDULE_RANDOM) return (uint64_t)(((unsigned __int128)a * k + c) % total);
        return k;
    }
};

void order_threads(std::vector<unsigned> &order, unsigned n, Schedule mode, uint64_t *rng) {
    order.resize(n);
    for (unsigned i = 0; i < n; i++) order[i] = mode == SCHEDULE_REVERSE ? n - 1 - i : i;
    if (mode == SCHEDULE_RANDOM)
        for (unsigned i = n - 1; i > 0; i--) std::swap(order[i], order[splitmix64(rng) % (i + 1)]);
}

bool bad_config(const dim3 &g, const dim3 &b) {
    unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    return b.x < 1 || b.y < 1 || b.z < 1 || b.x > 1024 || b.y > 1024 || b.z > 64 || threads > 1024 || g.x < 1 ||
           g.y < 1 || g.z < 1 || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535;
}

} // namespace
} // namespace gm_emu

using namespace gm_emu;

extern "C" {

void gm_emu_syncthreads(void) {
    if (!tl_in_launch) return; /* host code: nothing to wait for */
    Launch &L = g_L;
    Fiber *f = L.current;
    f->state = WAITING;
    L.waiting.push_back(f);
    ctx_swap(&f->ctx, &L.scheduler);
    /* resumed by the scheduler, which has set gm_emu_thread_idx back to f->tid */
}

void gm_emu_trap(const char *why) {
    if (!tl_in_launch) {
        int dev = 0;
        (void)cudaGetDevice(&dev);
        set_sticky(dev, cudaErrorLaunchFailure, why);
        return;
    }
    Launch &L = g_L;
    snprintf(L.trap_buf, sizeof L.trap_buf, "%s", why);
    L.trap = L.trap_buf;
    Fiber *f = L.current;
    f->state = RUNNING; /* neither waiting nor done: the scheduler recycles it */
    ctx_swap(&f->ctx, &L.scheduler);
}

void gm_emu_run(const dim3 *grid, const dim3 *block, void (*fn)(void *), void *closure, const void *kernel,
                const void *const *pointer_args, const int *pointer_arg_numbers, int npointers) {
    if (tl_in_launch) {
        fail(cudaErrorNotSupported, "a kernel launched a kernel: dynamic parallelism is not emulated");
        return;
    }
    int dev;
    if (ready(&dev)) return; /* no device, or it crashed: the launch does not run */
    if (!fn || !kernel) {
        fail(cudaErrorInvalidDeviceFunction, "launch of a NULL kernel");
        return;
    }
    const dim3 g = *grid, b = *block;
    if (bad_config(g, b)) {
        char name[256];
        describe_kernel(kernel, name, sizeof name);
        fail(cudaErrorInvalidConfiguration,
             "%s launched with grid (%u,%u,%u) and block (%u,%u,%u): a block has 1 to 1024 threads (x, y <= 1024, "
             "z <= 64) and every grid dimension is at least 1 (y, z <= 65535)",
             name, g.x, g.y, g.z, b.x, b.y, b.z);
        return;
    }
    char why[512] = "";
    if (cudaError_t e = check_kernel_pointers(pointer_args, pointer_arg_numbers, npointers, dev, why, sizeof why)) {
        char name[256], msg[768];
        describe_kernel(kernel, name, sizeof name);
        snprintf(msg, sizeof msg, "%s: %s", name, why);
        set_sticky(dev, e, msg); /* as the fault the GPU would take: sticky, and nothing runs */
        return;
    }
    std::lock_guard<std::mutex> lock(g_launch_mu);
    const unsigned long long launch = g_launches++;
    unsigned long long seed;
    const Schedule mode = schedule(&seed);
    uint64_t rng = seed ^ (launch * 0xD1B54A32D192ED03ull);
    Launch &L = g_L;
    L.fn = fn;
    L.closure = closure;
    L.nthreads = b.x * b.y * b.z;
    gm_emu_grid_dim = g;
    gm_emu_block_dim = b;
    tl_in_launch = true;
    bool ok = true;
    const uint64_t nblocks = (uint64_t)g.x * g.y * g.z;
    const BlockOrder blocks(mode, nblocks, &rng);
    for (uint64_t k = 0; ok && k < nblocks; k++) {
        const uint64_t i = blocks.at(k);
        gm_emu_block_idx = uint3{(unsigned)(i % g.x), (unsigned)(i / g.x % g.y), (unsigned)(i / ((uint64_t)g.x * g.y))};
        order_threads(L.order, L.nthreads, mode, &rng);
        ok = run_block(why, sizeof why);
    }
    tl_in_launch = false;
    if (!ok) {
        char name[256], msg[768];
        describe_kernel(kernel, name, sizeof name);
        const uint3 bi = gm_emu_block_idx;
        snprintf(msg, sizeof msg, "%s, block (%u,%u,%u) of grid (%u,%u,%u) with (%u,%u,%u) threads: %s", name, bi.x,
                 bi.y, bi.z, g.x, g.y, g.z, b.x, b.y, b.z, why);
        set_sticky(dev, cudaErrorLaunchFailure, msg);
    }
}

unsigned long long gm_emu_launch_count(void) { return g_launches.load(); }

} /* extern "C" */
