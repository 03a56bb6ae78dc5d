"""gm.memory.set_allocator("expandable") on meta (issue 15, item 4): one growing segment per pool, memory mapped by
2 MiB granules (csrc/alloc_expand.c); the fragmentation case of benchmarks/fragmentation.py fails with the caching
allocator, says so (reserved but unallocated, largest free block, the expandable hint) and runs with expandable
segments. The same on CUDA (the driver's VMM API, emulated) is tests/test_cuda_expandable.py. Each case runs in a
fresh process: the allocator can only be switched while it holds nothing, and the figures assume an empty one."""
import json
import os
import subprocess
import sys

import pytest

import gpumemnet as gm

MiB = 1 << 20
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import fragmentation  # noqa: E402


def fresh(code):
    """Run code in a fresh process with this gpumemnet; it prints one JSON value, returned."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(gm.__file__))] +
                                                      os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    r = subprocess.run([sys.executable, "-c", "import json, gpumemnet as gm\n" + code], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_fragmentation_fails_with_the_caching_allocator_and_runs_with_expandable_segments():
    caching, expandable = (fragmentation.run_fresh("meta", m) for m in ("caching", "expandable"))
    # three 20 MiB segments, each keeping one live 6 MiB tensor: 42 MiB free in pieces of 14 MiB
    assert caching["reserved_after_nine"] == 60 * MiB
    assert (caching["allocated_after_free"], caching["reserved_after_free"]) == (18 * MiB, 60 * MiB)
    assert (caching["reserved_unallocated"], caching["largest_free_block"]) == (42 * MiB, 14 * MiB)
    assert caching["expandable_would_help"] and not caching["ok"]
    assert "tried to allocate 24.00 MiB" in caching["error"]
    assert any("42.00 MiB reserved but unallocated" in s and "largest free block is 14.00 MiB" in s and
               "set_allocator('expandable')" in s for s in caching["suggestions"])
    # one segment of nine 6 MiB tensors (27 granules); the 24 MiB request unmaps the 18 free granules and maps 12
    assert expandable["reserved_after_nine"] == 54 * MiB
    assert (expandable["reserved_unallocated"], expandable["largest_free_block"]) == (36 * MiB, 12 * MiB)
    assert not expandable["expandable_would_help"]
    assert expandable["ok"]
    assert (expandable["allocated_after"], expandable["reserved_after"]) == (42 * MiB, 42 * MiB)


def test_expandable_segments_map_granules_and_give_them_back():
    got = fresh("""
MiB = 1 << 20
gm.memory.set_allocator("expandable", device="meta")
out = {"mode": gm.memory.get_allocator("meta")}
a = gm.empty(100, device="meta")                   # a 512 B block: the small pool maps its first granule
out["small"] = gm.memory.memory_reserved("meta")
b = gm.empty(3 * MiB // 4, device="meta")          # 3 MiB: two granules of the large pool, 1 MiB left
c = gm.empty(3 * MiB // 4, device="meta")          # after b, in its 1 MiB and one more granule: 6 MiB
out["large"] = gm.memory.memory_reserved("meta")
s = gm.memory.memory_stats("meta")
out["stats"] = [s["allocator"], s["allocated"]["current"], s["num_segment_allocs"]]
del b
out["released"] = gm.memory.empty_cache("meta")    # b's first granule lies wholly in free space; its second not
out["after"] = gm.memory.memory_reserved("meta")
d = gm.empty(2 * MiB // 4, device="meta")          # best fit in b's hole: its first granule is mapped again
out["again"] = gm.memory.memory_reserved("meta")
try:
    gm.memory.set_allocator("caching", device="meta")
except RuntimeError as e:
    out["live"] = str(e)
del a, c, d
gm.memory.set_allocator("caching", device="meta")  # nothing live: switched back, every granule unmapped
out["back"] = [gm.memory.get_allocator("meta"), gm.memory.memory_reserved("meta")]
print(json.dumps(out))
""")
    assert got["mode"] == "expandable"
    assert got["small"] == 2 * MiB
    assert got["large"] == 2 * MiB + 6 * MiB
    assert got["stats"] == ["expandable", 512 + 6 * MiB, 1 + 3]
    assert got["released"] == 2 * MiB and got["after"] == 6 * MiB
    assert got["again"] == 8 * MiB
    assert "holds 5.00 MiB in live tensors" in got["live"]  # a, c and d
    assert got["back"] == ["caching", 0]


def test_set_allocator_arguments():
    with pytest.raises(ValueError, match="mode must be 'caching' or 'expandable'"):
        gm.memory.set_allocator("pooled", device="meta")
    with pytest.raises(ValueError, match="virtual memory management, which cpu has not"):
        gm.memory.set_allocator("expandable", device="cpu")
    assert gm.memory.get_allocator("cpu") == "caching"
    gm.memory.set_allocator("caching", device="cpu")  # already: nothing to do
