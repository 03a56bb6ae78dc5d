"""memory_summary says when expandable segments would help (issue 15 item 4): on meta in caching mode, free space
scattered between live blocks (benchmarks/fragmentation.py's case, without the limit) gives the fragmentation
line with the reserved-but-unallocated bytes and the largest free block; once the scattered blocks are freed the
line goes."""
import gc

import gpumemnet as gm

MiB = 1 << 20


def test_memory_summary_reports_scattered_free_space_and_the_remedy():
    gc.collect()
    gm.memory.empty_cache("meta")
    assert gm.memory.get_allocator("meta") == "caching"
    base = gm.memory.fragmentation("meta")["reserved_unallocated"]  # 0 unless another test left a live block
    assert "fragmentation:" not in str(gm.memory.memory_summary("meta"))
    ts = [gm.empty(6 * MiB // 4, device="meta") for _ in range(9)]  # three to a 20 MiB segment
    for i in (1, 2, 4, 5, 7, 8):
        ts[i] = None
    fr = gm.memory.fragmentation("meta")
    assert fr["expandable_would_help"] and fr["largest_free_block"] == 14 * MiB
    assert fr["reserved_unallocated"] - base == 42 * MiB
    line = [s for s in str(gm.memory.memory_summary("meta")).splitlines() if "fragmentation:" in s]
    assert len(line) == 1 and "largest free block 14.00 MiB" in line[0] and "set_allocator('expandable')" in line[0]
    ts = None
    gm.memory.empty_cache("meta")
    assert not gm.memory.fragmentation("meta")["expandable_would_help"]
    assert "fragmentation:" not in str(gm.memory.memory_summary("meta"))
