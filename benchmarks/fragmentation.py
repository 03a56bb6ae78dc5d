"""A fragmentation case that fails with the caching allocator and runs with expandable segments (issue 15).

Under a limit of 60 MiB, nine 6 MiB tensors are made and two of every three freed: the caching allocator put them
three to a 20 MiB segment, so each segment keeps one live tensor and 42 MiB is reserved but unallocated, in pieces of
at most 14 MiB. A 24 MiB request needs a segment of its own, the limit has no room for one, and no segment can be
given back: OutOfMemoryError, although 42 MiB sits free. With expandable segments the tensors lie in one growing
segment mapped by 2 MiB granules; the request unmaps the granules under the freed tensors and maps them again at
the end, and runs. Byte counts are exact (tests/test_expandable.py, tests/test_cuda_expandable.py assert them).

    python benchmarks/fragmentation.py [--device meta|cuda] [--json]
Run each mode in a fresh process (this script does): the case assumes an allocator with nothing in it yet."""
import argparse
import json
import os
import subprocess
import sys

MiB = 1 << 20


def case(device, mode):
    """The figures of the case on device under mode ('caching' or 'expandable'): a dict."""
    import gpumemnet as gm
    if device == "meta":  # meta stands for a GPU here: its OOM advice is CUDA's (expandable segments)
        gm._C._set_meta_target("cuda")
    gm.memory.set_allocator(mode, device=device)
    base, base_alloc = gm.memory.memory_reserved(device), gm.memory.memory_allocated(device)
    gm.memory.set_limit(device, base + 60 * MiB)
    try:
        ts = [gm.empty(6 * MiB // 4, device=device) for _ in range(9)]
        before = gm.memory.memory_stats(device)
        for i in (1, 2, 4, 5, 7, 8):
            ts[i] = None
        frag = gm.memory.fragmentation(device)
        out = {"device": device, "mode": mode, "limit": 60 * MiB,
               "reserved_after_nine": before["reserved"]["current"] - base,
               "allocated_after_free": gm.memory.memory_allocated(device) - base_alloc,
               "reserved_after_free": gm.memory.memory_reserved(device) - base,
               "reserved_unallocated": frag["reserved_unallocated"], "largest_free_block": frag["largest_free_block"],
               "expandable_would_help": frag["expandable_would_help"], "request": 24 * MiB}
        try:
            big = gm.empty(24 * MiB // 4, device=device)
            out.update(ok=True, allocated_after=gm.memory.memory_allocated(device) - base_alloc,
                       reserved_after=gm.memory.memory_reserved(device) - base)
            del big
        except gm.OutOfMemoryError as e:
            out.update(ok=False, error=str(e).splitlines()[0], suggestions=list(e.suggestions))
        del ts
        return out
    finally:
        gm.memory.set_limit(device, None)


def run_fresh(device, mode):
    """case() in a fresh process (the allocator empty), with the gpumemnet this process imports."""
    import gpumemnet as gm
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(gm.__file__))] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    code = (f"import json, sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
            f"import fragmentation; print(json.dumps(fragmentation.case({device!r}, {mode!r})))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    if r.returncode:
        raise RuntimeError(f"the {mode} case on {device} failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="meta")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = [run_fresh(args.device, m) for m in ("caching", "expandable")]
    if args.json:
        print(json.dumps(results, indent=1))
        return
    mib = lambda n: f"{n / MiB:.0f} MiB"  # noqa: E731
    print(f"fragmentation case on {args.device}: limit 60 MiB, nine 6 MiB tensors, two of three freed, then 24 MiB")
    for r in results:
        print(f"  {r['mode']:<10} after freeing: allocated {mib(r['allocated_after_free'])}, reserved "
              f"{mib(r['reserved_after_free'])}, reserved but unallocated {mib(r['reserved_unallocated'])}, largest "
              f"free block {mib(r['largest_free_block'])}")
        if r["ok"]:
            print(f"  {'':<10} 24 MiB request: runs; allocated {mib(r['allocated_after'])}, reserved "
                  f"{mib(r['reserved_after'])}")
        else:
            print(f"  {'':<10} 24 MiB request: {r['error']}")
            for s in r["suggestions"]:
                print(f"  {'':<12}- {s}")


if __name__ == "__main__":
    main()
