/* kernels/cuda/conv_plan.cu — convolution through cuDNN's graph (backend) API: for each geometry an operation
 * graph of one convolution, the engine heuristics' configurations finalized into execution plans once, and those
 * plans kept for the process; a call then only packs its pointers (a variant pack) and executes.
 *
 * Why: cuDNN 9's legacy calls (cudnnConvolutionForward & co., conv.cu) finalize an execution plan on every call,
 * cuBLASLt's heuristics included. On an H200 a 1x1 128->128 28x28 forward cost 48 µs of host time per call
 * against PyTorch's 13 (which caches plans like this); py-spy put 34 % of the call in ExecutionPlan::finalize and
 * 27 % in cublasLtMatmulAlgoGetHeuristic, 14 % in the execution itself (benchmarks/cuda_conv_overhead.py). Training
 * steps of small models on a GPU are bound by that host time.
 *
 * The plans are built with beta = 0 (conv.cu adds a bias afterwards) and 16-byte aligned operands (conv_plan_run
 * refuses others, and conv.cu takes a legacy algorithm for them). Keyed by the device, the pass, the dtype, whether
 * float32 may use TF32 and the whole conv_geom (input strides included): the key of csrc's algorithm cache, so a
 * candidate index csrc cached stays valid. The plans are never freed: a network has a few dozen geometries. A mutex
 * guards the table (the passes run with the GIL released). */
#include <cudnn.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "conv_plan.h"

namespace {

struct Plan {
    cudnnBackendDescriptor_t plan;
    size_t ws;
    bool tensor_core, nondet;
};

struct Key {
    int device, pass, dtype, tf32;
    conv_geom g;
};

std::mutex table_mu;
std::unordered_map<std::string, std::unique_ptr<std::vector<Plan>>> table;

std::string key_of(const conv_geom *g, gm_dtype dt, conv_pass pass, const gm_cuda_ctx *ctx) {
    Key k;
    memset(&k, 0, sizeof k); /* padding bytes too: the key is compared as bytes */
    k.device = ctx->device, k.pass = (int)pass, k.dtype = (int)dt;
    k.tf32 = dt == GM_F32 && ctx->cudnn_allow_tf32;
    k.g = *g;
    return std::string((const char *)&k, sizeof k);
}

/* A backend descriptor destroyed with its scope unless released. */
struct Desc {
    cudnnBackendDescriptor_t d = nullptr;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    Desc() = default;
    explicit Desc(cudnnBackendDescriptorType_t type) { st = cudnnBackendCreateDescriptor(type, &d); }
    ~Desc() {
        if (d) cudnnBackendDestroyDescriptor(d);
    }
    Desc(const Desc &) = delete;
    Desc &operator=(const Desc &) = delete;
    cudnnBackendDescriptor_t release() {
        cudnnBackendDescriptor_t r = d;
        d = nullptr;
        return r;
    }
};

/* The first failing status of a chain of calls, with where it failed for ctx->err. */
struct Status {
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    const char *where = "";
    bool ok() const { return st == CUDNN_STATUS_SUCCESS; }
    void check(cudnnStatus_t s, const char *w) {
        if (ok() && s != CUDNN_STATUS_SUCCESS) st = s, where = w;
    }
};

void set(Status &s, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
         int64_t count, const void *value, const char *what) {
    if (s.ok()) s.check(cudnnBackendSetAttribute(d, name, type, count, value), what);
}

enum { UID_X = 1, UID_W = 2, UID_Y = 3 };

cudnnBackendDescriptor_t tensor(Status &s, int64_t uid, cudnnDataType_t t, const int64_t dim[4],
                                const int64_t stride[4]) {
    Desc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    s.check(d.st, "tensor descriptor");
    const int64_t align = 16;
    set(s, d.d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &t, "tensor data type");
    set(s, d.d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim, "tensor dimensions");
    set(s, d.d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride, "tensor strides");
    set(s, d.d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor id");
    set(s, d.d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
    if (s.ok()) s.check(cudnnBackendFinalize(d.d), "tensor finalize");
    return s.ok() ? d.release() : nullptr;
}

/* The operation graph of one pass over g: x (N, C, H, W) through g->xs where the pass reads the input (forward,
 * weight gradient; a dim of size 1 gets its packed stride), contiguous where it writes it; y and w contiguous. */
cudnnBackendDescriptor_t op_graph(Status &s, const conv_geom *g, cudnnDataType_t t, gm_dtype dt, conv_pass pass,
                                  cudnnHandle_t h) {
    const int64_t xd[4] = {g->N, g->C, g->H, g->W}, yd[4] = {g->N, g->K, g->P, g->Q};
    const int64_t wd[4] = {g->K, g->C / g->G, g->R, g->S};
    int64_t xst[4], yst[4] = {g->K * g->P * g->Q, g->P * g->Q, g->Q, 1};
    const int64_t wst[4] = {wd[1] * g->R * g->S, g->R * g->S, g->S, 1};
    int64_t packed = 1;
    for (int i = 3; i >= 0; i--) {
        xst[i] = pass == CONV_BACKWARD_DATA || xd[i] == 1 ? packed : g->xs[i];
        packed = xst[i] * xd[i];
    }
    Desc x, y, w;
    x.d = tensor(s, UID_X, t, xd, xst), w.d = tensor(s, UID_W, t, wd, wst), y.d = tensor(s, UID_Y, t, yd, yst);

    Desc conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    s.check(conv.st, "convolution descriptor");
    const cudnnDataType_t comp = dt == GM_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    const int64_t dims = 2, dil[2] = {g->dh, g->dw}, str[2] = {g->sh, g->sw}, pad[2] = {g->ph, g->pw};
    set(s, conv.d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp, "conv comp type");
    set(s, conv.d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, "conv mode");
    set(s, conv.d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims, "conv dims");
    set(s, conv.d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil, "conv dilations");
    set(s, conv.d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str, "conv strides");
    set(s, conv.d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad, "conv pre paddings");
    set(s, conv.d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad, "conv post paddings");
    if (s.ok()) s.check(cudnnBackendFinalize(conv.d), "conv finalize");

    static const cudnnBackendDescriptorType_t op_type[3] = {
        CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
        CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
        CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
    /* per pass: alpha, beta, conv, the filter-side operand, the input side, the output side */
    static const cudnnBackendAttributeName_t attr[3][6] = {
        {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY}};
    Desc op(op_type[pass]);
    s.check(op.st, "operation descriptor");
    const cudnnBackendAttributeName_t *a = attr[pass];
    const double one64 = 1.0, zero64 = 0.0;
    const float one32 = 1.0f, zero32 = 0.0f;
    if (dt == GM_F64) {
        set(s, op.d, a[0], CUDNN_TYPE_DOUBLE, 1, &one64, "alpha");
        set(s, op.d, a[1], CUDNN_TYPE_DOUBLE, 1, &zero64, "beta");
    } else {
        set(s, op.d, a[0], CUDNN_TYPE_FLOAT, 1, &one32, "alpha");
        set(s, op.d, a[1], CUDNN_TYPE_FLOAT, 1, &zero32, "beta");
    }
    set(s, op.d, a[2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv.d, "op conv");
    set(s, op.d, a[3], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w.d, "op w");
    set(s, op.d, a[4], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x.d, "op x");
    set(s, op.d, a[5], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y.d, "op y");
    if (s.ok()) s.check(cudnnBackendFinalize(op.d), "operation finalize");

    Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    s.check(graph.st, "operation graph descriptor");
    set(s, graph.d, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op.d, "graph ops");
    set(s, graph.d, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "graph handle");
    if (s.ok()) s.check(cudnnBackendFinalize(graph.d), "graph finalize");
    return s.ok() ? graph.release() : nullptr;
}

/* The engine configurations the heuristics propose for graph in `mode`, best first (owned by the caller). */
std::vector<cudnnBackendDescriptor_t> configs(Status &s, cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode) {
    std::vector<cudnnBackendDescriptor_t> cfgs;
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    s.check(heur.st, "heuristics descriptor");
    set(s, heur.d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, "heur graph");
    set(s, heur.d, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heur mode");
    if (s.ok()) s.check(cudnnBackendFinalize(heur.d), "heuristics finalize");
    int64_t count = 0;
    if (s.ok())
        s.check(cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                         &count, nullptr), "heuristics count");
    if (!s.ok() || count <= 0) return cfgs;
    cfgs.resize((size_t)count, nullptr);
    for (auto &c : cfgs) s.check(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &c), "config");
    int64_t got = 0;
    if (s.ok())
        s.check(cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                         &got, cfgs.data()), "heuristics results");
    for (size_t i = s.ok() ? (size_t)got : 0; i < cfgs.size(); i++)
        if (cfgs[i]) cudnnBackendDestroyDescriptor(cfgs[i]);
    cfgs.resize(s.ok() ? (size_t)got : 0);
    return cfgs;
}

/* Whether the engine of cfg has note `which` (numerical or behaviour). */
template <typename Note>
bool has_note(cudnnBackendDescriptor_t cfg, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
              int max, Note which) {
    Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    int64_t n = 0;
    if (engine.st != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine.d) !=
            CUDNN_STATUS_SUCCESS)
        return false;
    std::vector<Note> notes((size_t)max);
    if (cudnnBackendGetAttribute(engine.d, name, type, max, &n, notes.data()) != CUDNN_STATUS_SUCCESS) return false;
    for (int64_t i = 0; i < n; i++)
        if (notes[(size_t)i] == which) return true;
    return false;
}

bool numerical(cudnnBackendDescriptor_t cfg, cudnnBackendNumericalNote_t which) {
    return has_note(cfg, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
                    which);
}

bool behaviour(cudnnBackendDescriptor_t cfg, cudnnBackendBehaviorNote_t which) {
    return has_note(cfg, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT,
                    which);
}

/* At most this many plans per geometry: finalizing one can take milliseconds (more for engines compiled at run
 * time, which are left out), and beyond the heuristics' first few the list only serves as workspace fallbacks. */
const size_t kMaxPlans = 8;

/* Build the plans of one geometry (see conv_plan.h for which engines are taken). */
int build(const conv_geom *g, gm_dtype dt, conv_pass pass, gm_cuda_ctx *ctx, std::vector<Plan> &plans) {
    cudnnDataType_t t;
    switch (dt) {
    case GM_F32: t = CUDNN_DATA_FLOAT; break;
    case GM_F64: t = CUDNN_DATA_DOUBLE; break;
    case GM_F16: t = CUDNN_DATA_HALF; break;
    case GM_BF16: t = CUDNN_DATA_BFLOAT16; break;
    default: return GM_ERR_ARG;
    }
    cudnnHandle_t h = (cudnnHandle_t)ctx->cudnn;
    Status s;
    Desc graph;
    graph.d = op_graph(s, g, t, dt, pass, h);
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
        if (!s.ok() || !plans.empty()) break;
        std::vector<cudnnBackendDescriptor_t> cfgs = configs(s, graph.d, mode);
        for (cudnnBackendDescriptor_t cfg : cfgs) {
            if (s.ok() && plans.size() < kMaxPlans) {
                /* TF32 engines note tensor cores and down-converted inputs (PyTorch filters the same two) */
                const bool tc = numerical(cfg, CUDNN_NUMERICAL_NOTE_TENSOR_CORE);
                const bool narrow = tc || numerical(cfg, CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS);
                bool skip = behaviour(cfg, CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION);
                skip = skip || (narrow && ((dt == GM_F32 && !ctx->cudnn_allow_tf32) || dt == GM_F64));
                skip = skip || numerical(cfg, CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION);
                Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
                int64_t ws = 0, one = 0;
                /* an engine that cannot run this graph fails its finalize: skipped, not an error */
                if (!skip && plan.st == CUDNN_STATUS_SUCCESS &&
                    cudnnBackendSetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) ==
                        CUDNN_STATUS_SUCCESS &&
                    cudnnBackendSetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg) == CUDNN_STATUS_SUCCESS &&
                    cudnnBackendFinalize(plan.d) == CUDNN_STATUS_SUCCESS &&
                    cudnnBackendGetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                             &one, &ws) == CUDNN_STATUS_SUCCESS && ws >= 0)
                    plans.push_back({plan.release(), (size_t)ws, tc,
                                     numerical(cfg, CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)});
            }
            cudnnBackendDestroyDescriptor(cfg);
        }
    }
    if (!s.ok()) {
        for (Plan &p : plans) cudnnBackendDestroyDescriptor(p.plan);
        plans.clear();
        /* a graph cuDNN does not support is no error: the legacy API is asked instead */
        if (s.st == CUDNN_STATUS_NOT_SUPPORTED || s.st == CUDNN_STATUS_BAD_PARAM) return GM_OK;
        snprintf(ctx->err, sizeof ctx->err, "cuDNN graph API: %s failed: %s", s.where, cudnnGetErrorString(s.st));
        return GM_ERR_BACKEND;
    }
    /* deterministic first (conv.cu says why), each group in the heuristics' order */
    std::stable_partition(plans.begin(), plans.end(), [](const Plan &p) { return !p.nondet; });
    return GM_OK;
}

/* The plans of a geometry, built on first use; nullptr on failure (ctx->err says why). */
const std::vector<Plan> *plans_for(const conv_geom *g, gm_dtype dt, conv_pass pass, gm_cuda_ctx *ctx, int *rc) {
    const std::string key = key_of(g, dt, pass, ctx);
    std::lock_guard<std::mutex> lock(table_mu);
    auto it = table.find(key);
    if (it != table.end()) return it->second.get();
    std::unique_ptr<std::vector<Plan>> plans(new std::vector<Plan>());
    if ((*rc = build(g, dt, pass, ctx, *plans)) != GM_OK) return nullptr;
    return (table[key] = std::move(plans)).get();
}

}  // namespace

int conv_plan_candidates(const conv_geom *g, gm_dtype dt, conv_pass pass, cuda_conv_algo *algos, int max, int *n,
                         gm_cuda_ctx *ctx) {
    int rc = GM_OK;
    const std::vector<Plan> *plans = plans_for(g, dt, pass, ctx, &rc);
    if (!plans) return rc;
    for (size_t i = 0; i < plans->size() && *n < max; i++) {
        const Plan &p = (*plans)[i];
        algos[(*n)++] = {CONV_PLAN_BASE + (int)i, p.tensor_core ? (int)CUDNN_TENSOR_OP_MATH : (int)CUDNN_FMA_MATH,
                         p.ws};
    }
    return GM_OK;
}

int conv_plan_run(const conv_geom *g, gm_dtype dt, conv_pass pass, const cuda_conv_algo *algo, void *x, void *y,
                  void *w, void *ws, gm_cuda_ctx *ctx) {
    const void *ptrs[3] = {x, w, y};
    for (const void *p : ptrs)
        if ((uintptr_t)p % 16) return 1;
    int rc = GM_OK;
    const std::vector<Plan> *plans = plans_for(g, dt, pass, ctx, &rc);
    if (!plans) return rc;
    const size_t i = (size_t)(algo->algo - CONV_PLAN_BASE);
    if (algo->algo < CONV_PLAN_BASE || i >= plans->size()) {
        snprintf(ctx->err, sizeof ctx->err, "cuDNN graph API: plan %zu of %zu for this geometry", i, plans->size());
        return GM_ERR_BACKEND;
    }
    Status s;
    Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    s.check(pack.st, "variant pack");
    const int64_t uids[3] = {UID_X, UID_W, UID_Y};
    set(s, pack.d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids, "pack ids");
    set(s, pack.d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs, "pack pointers");
    set(s, pack.d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws, "pack workspace");
    if (s.ok()) s.check(cudnnBackendFinalize(pack.d), "pack finalize");
    if (s.ok()) s.check(cudnnBackendExecute((cudnnHandle_t)ctx->cudnn, (*plans)[i].plan, pack.d), "execute");
    if (!s.ok()) {
        snprintf(ctx->err, sizeof ctx->err, "cuDNN graph API: %s failed: %s", s.where, cudnnGetErrorString(s.st));
        return GM_ERR_BACKEND;
    }
    return GM_OK;
}
