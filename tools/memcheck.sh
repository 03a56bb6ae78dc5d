#!/usr/bin/env bash
# valgrind memcheck over one training step (tools/memcheck_step.py): zero errors in gpumemnet's code.
#
#   bash tools/memcheck.sh            # ~2 minutes on 2 cores; exit status 0 when no error touches gpumemnet
#
# CPython itself (a build without --with-valgrind, as pyenv's and most distributions' are) reports uninitialised
# reads in its own interpreter loop under memcheck, with or without gpumemnet: a control run of
# `python -c "import numpy"` shows hundreds. So the verdict counts the errors whose stack passes through
# gpumemnet's extension (_C*.so) or the libraries only it calls into here (OpenBLAS, libgomp), read from
# valgrind's XML, and prints the interpreter's own count beside it.
#
# valgrind 3.19 decodes AVX2 but not AVX-512: OpenBLAS is held to its Haswell kernels and NumPy to AVX2 under it.
# PYTHONMALLOC=malloc sends every Python allocation through malloc, where memcheck can see it.
set -euo pipefail
py=${PYTHON:-python3}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
command -v valgrind >/dev/null || { echo "memcheck: valgrind is not installed (Debian: apt-get install valgrind)" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHONMALLOC=malloc OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
NPY_DISABLE_CPU_FEATURES="AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR" \
    valgrind --tool=memcheck --leak-check=no --num-callers=40 --xml=yes --xml-file="$out/memcheck.xml" \
    "$py" "$here/memcheck_step.py"
"$py" - "$out/memcheck.xml" <<'PY'
import sys
import xml.etree.ElementTree as ET

ours = ("_C.cpython", "_C.abi3", "libscipy_openblas", "libopenblas", "libgomp")
# Leak records (valgrind's XML lists them even with --leak-check=no) are left out: a CPython extension's types
# and interned strings live until exit by design, and gpumemnet's own frees are counted exactly by its allocator
# (tests/test_oom_recover.py, test_memory_*). What counts: invalid reads/writes/frees, uninitialised values.
errors = [e for e in ET.parse(sys.argv[1]).getroot().findall("error")
          if not (e.findtext("kind") or "").startswith("Leak_")]
mine = []
for e in errors:
    objs = [f.findtext("obj") or "" for f in e.iter("frame")]
    if any(any(tag in o for tag in ours) for o in objs):
        mine.append(e)
print(f"memcheck: {len(errors)} error contexts in all (leaks aside), {len(mine)} through gpumemnet's code "
      "(the rest are the interpreter's own, seen without gpumemnet too)")
for e in mine[:20]:
    print("  ", e.findtext("kind"), e.findtext("what") or e.findtext("xwhat/text"))
    for f in list(e.iter("frame"))[:8]:
        print("      ", f.findtext("fn"), f.findtext("file"), f.findtext("line"), f.findtext("obj"))
sys.exit(1 if mine else 0)
PY
