/* csrc/alloc_mirror.c — an estimate's meta run laid out as the device holds the model (allocator.c's policy, here
 * apart to keep allocator.c to one concern). Uses the allocator's internals (allocator.h), nothing else. */
#include "allocator.h"

#include <stdlib.h>

/* ---- mirroring a device's layout on meta (estimate) ----------------------------------------------------------
 * The meta copy of a model laid out compactly is not where the device has it: a builder's temporaries leave free
 * holes between parameters in segments that stay in use (empty_cache cannot return them), and a later request of
 * the step may then find a different free block on the device than on meta, and the peaks part. So an estimate
 * for the device the model lives on starts meta from the device's layout: every segment holding one of the
 * model's blocks gets a meta twin of the same size and pool (in the order the device made them, so best fit
 * breaks ties the same way), each model block a twin at the same offset, held (mirror = 1, not counted) until the meta
 * copy of its tensor claims it; the rest of the segment, the builder's holes and whatever else the device holds
 * there, is free, as it is for a process holding only the model. */
typedef struct { char *base; size_t size; int pool; int64_t serial; } seg_key;

static int seg_key_less(const void *a, const void *b) {
    const seg_key *x = a, *y = b;
    return (x->serial > y->serial) - (x->serial < y->serial);
}

/* b's first `size` bytes stay b; the rest becomes a new free block after it (on no free list), or NULL. */
static gm_block *split_block(gm_allocator *A, gm_block *b, size_t size) {
    gm_block *r = gm_new_block(A, b->seg, b->addr + size, b->size - size, b->pool);
    if (!r) return NULL;
    r->prev = b;
    r->next = b->next;
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = size;
    return r;
}

int gm_meta_mirror(gm_block **blocks, int n) {
    gm_allocator *S = n > 0 && blocks[0] ? blocks[0]->owner : NULL, *M = gm_allocator_meta();
    if (!S || S == M || S->pinned || S->expandable || M->expandable || gm_no_caching()) return 0;
    for (int i = 0; i < n; i++)
        if (!blocks[i] || blocks[i]->owner != S) return 0;
    seg_key *segs = calloc((size_t)n, sizeof *segs);
    size_t *off = calloc((size_t)n, sizeof *off), *sz = calloc((size_t)n, sizeof *sz);
    gm_block **mirrors = calloc((size_t)n, sizeof *mirrors);
    char **base = calloc((size_t)n, sizeof *base);
    if (!segs || !off || !sz || !mirrors || !base) {
        free(segs), free(off), free(sz), free(mirrors), free(base);
        return -1;
    }
    int nseg = 0;
    gm_lock(S); /* copied out, so that the two locks are never held together */
    for (int i = 0; i < n; i++) {
        gm_segment *g = blocks[i]->seg;
        base[i] = g->base;
        off[i] = (size_t)(blocks[i]->addr - g->base);
        sz[i] = blocks[i]->size;
        int k = 0;
        while (k < nseg && segs[k].base != g->base) k++;
        if (k == nseg) segs[nseg++] = (seg_key){g->base, g->size, g->pool, g->serial};
    }
    gm_unlock(S);
    qsort(segs, (size_t)nseg, sizeof *segs, seg_key_less);
    int mirrored = 0;
    gm_lock(M);
    for (int k = 0; k < nseg; k++) {
        gm_block *cur = gm_new_segment(M, segs[k].size, segs[k].pool);
        if (!cur) break; /* over the estimate's limit: the rest of the model is laid out as before */
        gm_free_list_remove(M, cur);
        size_t pos = 0;
        for (;;) { /* the segment's model blocks by offset; cur is the free rest of the segment from pos */
            int j = -1;
            for (int i = 0; i < n; i++)
                if (base[i] == segs[k].base && off[i] >= pos && (j < 0 || off[i] < off[j])) j = i;
            if (j < 0 || off[j] + sz[j] > segs[k].size) break;
            if (off[j] > pos) {
                gm_block *m = split_block(M, cur, off[j] - pos);
                if (!m) break;
                gm_free_list_insert(M, cur);
                cur = m;
            }
            gm_block *rest = off[j] + sz[j] < segs[k].size ? split_block(M, cur, sz[j]) : NULL;
            if (!rest && off[j] + sz[j] < segs[k].size) break;
            cur->allocated = 1;
            cur->mirror = 1;
            for (int i = 0; i < n; i++) /* every tensor of that block (a storage shared by two tensors) */
                if (base[i] == segs[k].base && off[i] == off[j]) {
                    mirrors[i] = cur;
                    mirrored++;
                }
            pos = off[j] + sz[j];
            cur = rest;
            if (!cur) break;
        }
        if (cur) gm_free_list_insert(M, cur);
    }
    free(M->mirrors);
    M->mirrors = mirrors;
    M->nmirrors = n;
    M->claim = NULL;
    gm_unlock(M);
    free(segs), free(off), free(sz), free(base);
    return mirrored;
}

void gm_meta_claim(int i) {
    gm_allocator *M = gm_allocator_meta();
    gm_lock(M);
    M->claim = i >= 0 && i < M->nmirrors ? M->mirrors[i] : NULL;
    M->claim_thread = pthread_self();
    gm_unlock(M);
}

void gm_meta_mirror_end(void) {
    gm_allocator *M = gm_allocator_meta();
    gm_lock(M);
    for (int i = 0; i < M->nmirrors; i++) {
        gm_block *b = M->mirrors[i];
        if (!b) continue;
        for (int j = i; j < M->nmirrors; j++) /* before b may be merged away */
            if (M->mirrors[j] == b) M->mirrors[j] = NULL;
        b->mirror = 0; /* never counted: free it without the statistics */
        b->allocated = 0;
        if (b->next && !b->next->allocated) {
            gm_free_list_remove(M, b->next);
            gm_merge_next(b);
        }
        if (b->prev && !b->prev->allocated) {
            b = b->prev;
            gm_free_list_remove(M, b);
            gm_merge_next(b);
        }
        gm_free_list_insert(M, b);
    }
    free(M->mirrors);
    M->mirrors = NULL;
    M->nmirrors = 0;
    M->claim = NULL;
    gm_unlock(M);
}
