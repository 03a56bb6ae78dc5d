/* csrc/alloc_expand.c — expandable segments (gm.memory.set_allocator("expandable"), PyTorch's
 * expandable_segments:True): below the core, which calls it from alloc_block and gm_release_cached.
 *
 * Why: the caching allocator can only give memory back a whole segment at a time (cudaFree of a segment that holds no
 * live block). When every segment keeps one live block, the free space between them is reserved but unusable for a
 * request larger than any one hole, and the step fails although the device has room (story 002's "reserved but
 * unallocated" with the expandable_segments hint). Here each pool has one segment: address space for the whole
 * device reserved once (cuMemAddressReserve), with physical memory mapped a granule at a time (2 MiB: cuMemCreate +
 * cuMemMap) only under blocks in use or cached. A request no free block holds grows the segment at its end; when
 * that would pass the limit, the granules lying wholly in free blocks are unmapped first (their memory returns to the
 * device) and mapped again where they are needed. Blocks never move, so nothing is copied.
 *
 * Figures: `reserved` counts mapped granules; the address space is not counted anywhere (it costs no memory). The
 * policy inside a pool (rounding, best fit, splitting, merging) is the caching allocator's, so meta (fake addresses,
 * nothing mapped) predicts cuda byte for byte here too. */
#include "allocator.h"

/* The pool's segment, reserving its address space on first use: NULL with A->source_failed when the device cannot. */
static gm_segment *pool_segment(gm_allocator *A, int pool) {
    if (A->xseg[pool]) return A->xseg[pool];
    size_t G = A->granule;
    size_t vsize = (A->capacity + G - 1) / G * G;
    gm_segment *seg = calloc(1, sizeof *seg);
    if (!seg) return NULL;
    seg->base = gm_vm_reserve(A->dev, vsize);
    if (!seg->base) {
        free(seg);
        A->source_failed = 1;
        return NULL;
    }
    seg->vsize = vsize;
    seg->pool = pool;
    seg->expandable = 1;
    seg->serial = ++A->segment_serial;
    seg->snext = A->segments;
    if (A->segments) A->segments->sprev = seg;
    A->segments = seg;
    A->xseg[pool] = seg;
    return seg;
}

static gm_block *tail_block(gm_segment *seg) {
    gm_block *b = seg->head;
    while (b && b->next) b = b->next;
    return b;
}

/* Extend seg at its end so that its last block is free and holds size bytes: that block, or NULL when the address
 * space is used up (the device cannot hold it either) or the host is out of memory. Maps nothing. */
static gm_block *grow(gm_allocator *A, gm_segment *seg, size_t size) {
    size_t G = A->granule;
    gm_block *tail = tail_block(seg);
    size_t have = tail && !tail->allocated ? tail->size : 0;
    size_t add = (size - have + G - 1) / G * G;
    if (add > seg->vsize - seg->size) return NULL;
    size_t n_old = seg->size / G, n_new = (seg->size + add) / G;
    void **handles = realloc(seg->handles, n_new * sizeof *handles);
    if (!handles) return NULL;
    memset(handles + n_old, 0, (n_new - n_old) * sizeof *handles);
    seg->handles = handles;
    gm_block *b;
    if (have) {
        b = tail;
        gm_free_list_remove(A, b);
        b->size += add;
    } else {
        b = gm_new_block(A, seg, seg->base + seg->size, add, seg->pool);
        if (!b) return NULL;
        b->prev = tail;
        if (tail) tail->next = b; else seg->head = b;
    }
    seg->size += add;
    gm_free_list_insert(A, b);
    return b;
}

/* Map every granule under [addr, addr + size) that is not mapped: 0, or -1 when the limit or the capacity would be
 * passed or the device is full (granules mapped before the failure stay mapped: cached, released later). */
static int map_range(gm_allocator *A, gm_segment *seg, char *addr, size_t size) {
    size_t G = A->granule, first = (size_t)(addr - seg->base) / G, last = (size_t)(addr + size - 1 - seg->base) / G;
    size_t need = 0;
    for (size_t i = first; i <= last; i++) need += seg->handles[i] == NULL;
    size_t reserved = (size_t)A->reserved.current;
    if ((A->limit && reserved + need * G > A->limit) || reserved + need * G > A->capacity) return -1;
    for (size_t i = first; i <= last; i++) {
        if (seg->handles[i]) continue;
        int oom = 0;
        void *h = gm_vm_map(A->dev, seg->base + i * G, G, &oom);
        if (!h) {
            if (!oom) A->source_failed = 1;
            return -1;
        }
        seg->handles[i] = h;
        stat_add(&A->reserved, (int64_t)G);
        A->num_segment_allocs++;
    }
    return 0;
}

gm_block *gm_expandable_fit(gm_allocator *A, int pool, size_t size) {
    gm_segment *seg = pool_segment(A, pool);
    if (!seg) return NULL;
    gm_block *b = A->free_list[pool];
    while (b && b->size < size) b = b->fnext;
    if (!b) b = grow(A, seg, size);
    if (!b || map_range(A, seg, b->addr, size) < 0) return NULL;
    return b;
}

size_t gm_expandable_release(gm_allocator *A) {
    size_t G = A->granule, released = 0;
    int synced = 0;
    for (int p = 0; p < 2; p++) {
        gm_segment *seg = A->xseg[p];
        if (!seg) continue;
        for (gm_block *b = seg->head; b; b = b->next) {
            if (b->allocated) continue;
            /* the granules wholly inside the free block */
            size_t off = (size_t)(b->addr - seg->base), first = (off + G - 1) / G, end = (off + b->size) / G;
            for (size_t i = first; i < end; i++) {
                if (!seg->handles[i]) continue;
                if (!synced) {
                    gm_vm_sync(A->dev); /* the device may still read the last blocks that lay there */
                    synced = 1;
                }
                gm_vm_unmap(A->dev, seg->base + i * G, G, seg->handles[i]);
                seg->handles[i] = NULL;
                stat_add(&A->reserved, -(int64_t)G);
                A->num_segment_frees++;
                released += G;
            }
        }
    }
    return released;
}

void gm_expandable_drop(gm_allocator *A) {
    gm_expandable_release(A);
    for (int p = 0; p < 2; p++) {
        gm_segment *seg = A->xseg[p];
        if (!seg) continue;
        for (gm_block *b = seg->head, *next; b; b = next) { /* all free (the caller checked): one block, merged */
            next = b->next;
            gm_free_list_remove(A, b);
            free(b);
        }
        gm_vm_release(A->dev, seg->base, seg->vsize);
        if (seg->sprev) seg->sprev->snext = seg->snext; else A->segments = seg->snext;
        if (seg->snext) seg->snext->sprev = seg->sprev;
        free(seg->handles);
        free(seg);
        A->xseg[p] = NULL;
    }
}
