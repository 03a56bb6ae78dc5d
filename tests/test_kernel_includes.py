"""The backends do not know each other (DESIGN.md "Layers", kernels/README.md): a file in kernels/cpu includes only
kernels/*.h and kernels/cpu, a file in kernels/cuda (emu/ included) only kernels/*.h and kernels/cuda, and a shared
kernels/*.h only other kernels/*.h. Reads the sources; needs no build."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "kernels")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
SOURCES = (".h", ".c", ".cu", ".cuh", ".cpp")


def quoted_includes():
    """(file, the file it includes, resolved as the compilers do: next to the file, then -Ikernels)."""
    for d, _, files in os.walk(KERNELS):
        for f in sorted(files):
            if not f.endswith(SOURCES):
                continue
            path = os.path.join(d, f)
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            for inc in INCLUDE.findall(text):
                here = os.path.normpath(os.path.join(d, inc))
                target = here if os.path.exists(here) else os.path.normpath(os.path.join(KERNELS, inc))
                yield path, target


def folder(path):
    rel = os.path.relpath(path, KERNELS).split(os.sep)
    return rel[0] if len(rel) > 1 else ""


def test_each_backend_includes_only_its_folder_and_the_shared_headers():
    bad = []
    for src, target in quoted_includes():
        if not target.startswith(KERNELS + os.sep) and target != KERNELS:
            continue  # outside kernels/: not for this test (a kernel including csrc/ would fail to build anyway)
        have, want = folder(src), folder(target)
        if src.endswith(".c") and os.path.samefile(src, target):
            continue  # kernels/cpu/conv.c includes itself to stamp out its dtypes
        if want and want != have:
            bad.append(f"{os.path.relpath(src, ROOT)} includes {os.path.relpath(target, ROOT)}")
    assert not bad, "cross-backend includes (kernels/README.md):\n" + "\n".join(bad)


def test_every_quoted_include_in_kernels_exists():
    missing = [f"{os.path.relpath(s, ROOT)}: {os.path.relpath(t, ROOT)}" for s, t in quoted_includes()
               if not os.path.exists(t)]
    assert not missing, "\n".join(missing)
