/* csrc/alloc_report.c — the OutOfMemoryError that explains (DESIGN.md "The allocator"): bytes requested, for what
 * (category, scope), capacity, limit, use per category, cached-but-free and the largest free block, the largest
 * live tensors by name, and suggestions ranked by what dominates. Two steps, because of the allocator's lock
 * (allocator.h): gm_oom_snapshot copies the figures out of the allocator while the lock is held and touches no
 * Python object; gm_oom_raise makes the exception from the copy after the lock is released. */
#include "allocator.h"
#include "meta_target.h"

#ifdef GM_WITH_CUDA
int gm_cuda_mem_info(int i, size_t *free_bytes, size_t *total); /* cuda.c */
#endif

const char *gm_allocator_name(const gm_allocator *A, char *buf) {
    if (A->pinned) return strcpy(buf, "cpu-pinned");
    if (A->host) return strcpy(buf, "meta-host");
    return gm_device_str(A->dev, buf);
}

const char *gm_format_bytes(double b, char *buf) {
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (b >= 1024.0 && u < 5) { b /= 1024.0; u++; }
    if (u == 0) snprintf(buf, 32, "%.0f B", b); else snprintf(buf, 32, "%.2f %s", b, units[u]);
    return buf;
}

size_t gm_largest_free_block(const gm_allocator *A) {
    size_t best = 0;
    for (int p = 0; p < 2; p++)
        for (const gm_block *b = A->free_list[p]; b; b = b->fnext)
            if (b->size > best) best = b->size;
    return best;
}

/* The n largest live blocks (n <= GM_TOP_BLOCKS), largest first. */
static int largest_live_blocks(const gm_allocator *A, const gm_block **top) {
    int n = 0;
    for (const gm_segment *sg = A->segments; sg; sg = sg->snext) {
        for (const gm_block *b = sg->head; b; b = b->next) {
            if (!b->allocated) continue;
            int i = n < GM_TOP_BLOCKS ? n++ : GM_TOP_BLOCKS;
            if (i == GM_TOP_BLOCKS) {
                if (b->size <= top[GM_TOP_BLOCKS - 1]->size) continue;
                i = GM_TOP_BLOCKS - 1;
            }
            while (i > 0 && top[i - 1]->size < b->size) { top[i] = top[i - 1]; i--; }
            top[i] = b;
        }
    }
    return n;
}

/* "fc1.weight" (interned: outlives the block), or what it is and where it was made, written into buf:
 * "activation from features.3 forward". */
static const char *block_description(const gm_block *b, char *buf, size_t len) {
    if (b->label) return b->label;
    snprintf(buf, len, "%s%s%s", gm_category_names[b->category], b->scope[0] ? " from " : "", b->scope);
    return buf;
}

/* Suggestions ranked by what holds the memory: each names the share it addresses and the API that helps. */
static int oom_suggestions(const gm_allocator *A, size_t nbytes, size_t cached, size_t largest,
                           char out[GM_MAX_SUGGESTIONS][240]) {
    double used = (double)(A->allocated.current > 0 ? A->allocated.current : 1);
    double states = (double)(A->cat[GM_CAT_PARAMETER].current + A->cat[GM_CAT_GRADIENT].current +
                             A->cat[GM_CAT_OPTIMIZER].current) / used;
    double acts = (double)A->cat[GM_CAT_ACTIVATION].current / used;
    double ws = (double)A->cat[GM_CAT_WORKSPACE].current / used;
    struct suggestion { double share; char text[240]; } s[GM_MAX_SUGGESTIONS];
    int n = 0;
    if (states >= 0.4) {
        s[n].share = states;
        snprintf(s[n++].text, 240, "parameters, gradients and optimizer state are %.0f%% of use: a global pooling head "
                 "(nn.GlobalAvgPool2d) instead of a huge Linear removes most of its weights; SGD keeps half of "
                 "Adam's state", 100 * states);
    }
    if (acts >= 0.3) {
        s[n].share = acts;
        snprintf(s[n++].text, 240, "activations saved for backward are %.0f%% of use: checkpointing "
                 "(gm.utils.checkpoint_sequential), autocast (half the bytes), or a smaller micro-batch with "
                 "gradient accumulation (gm.memory.plan picks one)", 100 * acts);
    }
    if (ws >= 0.2) {
        s[n].share = ws;
        snprintf(s[n++].text, 240, "kernel workspace is %.0f%% of use: lower it with "
                 "gpumemnet._C.set_conv_workspace_limit", 100 * ws);
    }
    /* Reserved but unallocated bytes sit between live blocks once the cache was released (as it was before this
     * error): with the room left under the cap they would hold the request, but no free block does. */
    size_t cap = A->limit ? A->limit : A->capacity, reserved = (size_t)A->reserved.current;
    size_t headroom = cap > reserved ? cap - reserved : 0;
    /* meta offers expandable segments where it stands for CUDA (an estimate for the CPU: the CPU's advice) */
    int vmm = A->dev.type == GM_DEV_CUDA || gm_meta_as_cuda(A->dev);
    if (largest < nbytes && cached + headroom >= nbytes && cached > 0 && !A->expandable) {
        char c[32], l[32];
        s[n].share = (double)cached / used;
        if (vmm)
            snprintf(s[n++].text, 240, "fragmentation: %s reserved but unallocated lies between live blocks, the "
                     "largest free block is %s: gm.memory.set_allocator('expandable') maps memory where it is needed "
                     "and would serve this request", gm_format_bytes((double)cached, c),
                     gm_format_bytes((double)largest, l));
        else
            snprintf(s[n++].text, 240, "fragmentation: %s reserved but unallocated lies between live blocks, the "
                     "largest free block is %s: freeing the long-lived tensors made between the short-lived ones "
                     "lets their segments go", gm_format_bytes((double)cached, c), gm_format_bytes((double)largest, l));
    }
    for (int i = 1; i < n; i++) /* largest share first */
        for (int j = i; j > 0 && s[j].share > s[j - 1].share; j--) {
            struct suggestion tmp = s[j];
            s[j] = s[j - 1];
            s[j - 1] = tmp;
        }
    for (int i = 0; i < n; i++) memcpy(out[i], s[i].text, 240);
    return n;
}

void gm_oom_snapshot(const gm_allocator *A, size_t nbytes, gm_oom_report *r) {
    gm_allocator_name(A, r->device);
    r->is_cuda = A->dev.type == GM_DEV_CUDA;
    r->cuda_index = A->dev.index;
    r->requested = nbytes;
    r->capacity = A->capacity;
    r->limit = A->limit;
    r->allocated = A->allocated.current;
    r->reserved = A->reserved.current;
    r->cached = (size_t)(A->reserved.current - A->allocated.current);
    r->largest = gm_largest_free_block(A);
    for (int i = 0; i < GM_NCAT; i++) r->by_category[i] = A->cat[i].current;
    r->category = gm_current_category();
    r->scope = gm_current_scope();
    const gm_block *top[GM_TOP_BLOCKS];
    r->ntop = largest_live_blocks(A, top);
    for (int i = 0; i < r->ntop; i++) {
        r->top_label[i] = block_description(top[i], r->top_name[i], sizeof r->top_name[i]);
        if (r->top_label[i] == r->top_name[i]) r->top_label[i] = NULL; /* the copy lives in the report */
        r->top_size[i] = top[i]->size;
    }
    r->nsugg = oom_suggestions(A, nbytes, r->cached, r->largest, r->suggestions);
}

static const char *top_name(const gm_oom_report *r, int i) {
    return r->top_label[i] ? r->top_label[i] : r->top_name[i];
}

void gm_oom_raise(const gm_oom_report *r) {
    char a[32], c[32], l[32], u[32], f[32], g[32];
    const char *prefix = r->is_cuda ? "CUDA out of memory" : "out of memory";
    char cats[512] = "";
    size_t pos = 0;
    for (int i = 0; i < GM_NCAT; i++) {
        if (r->by_category[i] == 0) continue;
        pos += snprintf(cats + pos, sizeof cats - pos, "%s%s %s", pos ? " · " : "", gm_category_names[i],
                        gm_format_bytes((double)r->by_category[i], u));
        if (pos >= sizeof cats) break;
    }
    char tops[640] = "";
    size_t tpos = 0;
    for (int i = 0; i < r->ntop && tpos < sizeof tops; i++) {
        char sz[32];
        tpos += snprintf(tops + tpos, sizeof tops - tpos, "%s%s %s", i ? " · " : "\n  largest tensors: ",
                         top_name(r, i), gm_format_bytes((double)r->top_size[i], sz));
    }
    char sugs[GM_MAX_SUGGESTIONS * 250 + 8] = "";
    size_t spos = 0;
    for (int i = 0; i < r->nsugg && spos < sizeof sugs; i++)
        spos += snprintf(sugs + spos, sizeof sugs - spos, "\n    - %s", r->suggestions[i]);
    /* On a GPU the driver's view matters too: other processes (or another framework in this one) hold memory
     * that our capacity figure does not show. */
    char driver[128] = "", rs[32], df[32];
    snprintf(driver, sizeof driver, "; reserved %s", gm_format_bytes((double)r->reserved, rs));
#ifdef GM_WITH_CUDA
    size_t dfree, dtotal;
    if (r->is_cuda && gm_cuda_mem_info(r->cuda_index, &dfree, &dtotal) == 0)
        snprintf(driver, sizeof driver, "; reserved %s, free on the device %s", gm_format_bytes((double)r->reserved, rs),
                 gm_format_bytes((double)dfree, df));
#endif
    (void)df;
    PyObject *msg = PyUnicode_FromFormat(
        "%s on %s: tried to allocate %s (%s%s%s)\n"
        "  capacity %s, limit %s%s; in use %s%s%s\n"
        "  cached but free %s (largest free block %s)%s%s%s",
        prefix, r->device, gm_format_bytes((double)r->requested, a), gm_category_names[r->category],
        r->scope[0] ? " in " : "", r->scope, gm_format_bytes((double)r->capacity, c),
        r->limit ? gm_format_bytes((double)r->limit, l) : "none", driver, gm_format_bytes((double)r->allocated, g),
        pos ? ": " : "", cats, gm_format_bytes((double)r->cached, f), gm_format_bytes((double)r->largest, u), tops,
        r->nsugg ? "\n  suggestions:" : "", sugs);
    if (!msg) return;
    PyObject *exc = PyObject_CallOneArg(GM_OutOfMemoryError, msg);
    Py_DECREF(msg);
    if (!exc) return;
    PyObject *bycat = PyDict_New();
    for (int i = 0; bycat && i < GM_NCAT; i++) {
        PyObject *v = PyLong_FromLongLong(r->by_category[i]);
        if (v) PyDict_SetItemString(bycat, gm_category_names[i], v);
        Py_XDECREF(v);
    }
    PyObject *limit = r->limit ? PyLong_FromSize_t(r->limit) : Py_NewRef(Py_None);
    PyObject *suggestion_list = PyList_New(0);
    for (int i = 0; suggestion_list && i < r->nsugg; i++) {
        PyObject *item = PyUnicode_FromString(r->suggestions[i]);
        if (item) PyList_Append(suggestion_list, item);
        Py_XDECREF(item);
    }
    PyObject *largest_list = PyList_New(0);
    for (int i = 0; largest_list && i < r->ntop; i++) {
        PyObject *item = Py_BuildValue("(sn)", top_name(r, i), (Py_ssize_t)r->top_size[i]);
        if (item) PyList_Append(largest_list, item);
        Py_XDECREF(item);
    }
    /* The fields are attributes too, so tools need not parse the text. */
    struct { const char *name; PyObject *value; } attrs[] = {
        {"requested_bytes", PyLong_FromSize_t(r->requested)},
        {"device", PyUnicode_FromString(r->device)},
        {"capacity", PyLong_FromSize_t(r->capacity)},
        {"limit", limit},
        {"allocated_bytes", PyLong_FromLongLong(r->allocated)},
        {"reserved_bytes", PyLong_FromLongLong(r->reserved)},
        {"cached_free_bytes", PyLong_FromSize_t(r->cached)},
        {"largest_free_block", PyLong_FromSize_t(r->largest)},
        {"by_category", bycat},
        {"largest_tensors", largest_list},
        {"suggestions", suggestion_list},
        {"category", PyUnicode_FromString(gm_category_names[r->category])},
        {"scope", PyUnicode_FromString(r->scope)},
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        if (attrs[i].value) PyObject_SetAttrString(exc, attrs[i].name, attrs[i].value);
        Py_XDECREF(attrs[i].value);
    }
    PyErr_Clear(); /* a failed attribute is not worth hiding the OOM for */
    PyErr_SetObject(GM_OutOfMemoryError, exc);
    Py_DECREF(exc);
}
