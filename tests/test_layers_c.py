"""The C side keeps its layers (DESIGN.md "Layers, bottom up"): csrc/ files call one way (tools/c_layers.py computes
the graph), the two kernel backends do not include each other, and no source file grows past what one reads in a
sitting. These read the repository's sources next to this file; an installed package without them skips."""
import importlib.util
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CSRC = ROOT / "csrc"
TOOL = ROOT / "tools" / "c_layers.py"
MAX_LINES = 800

pytestmark = pytest.mark.skipif(not CSRC.is_dir() or not TOOL.is_file(),
                                reason="the C sources (csrc/, tools/) are not next to the tests: installed package")


def c_layers():
    spec = importlib.util.spec_from_file_location("c_layers", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def describe(edges, comps):
    lines = []
    for comp in comps:
        lines.append("cycle: " + " <-> ".join(comp))
        for f in comp:
            for d, syms in sorted(edges[f].items()):
                if d in comp:
                    lines.append(f"  {f} -> {d}: {', '.join(syms)}")
    return "\n".join(lines)


def test_csrc_files_call_one_way():
    tool = c_layers()
    edges = tool.graph(CSRC)
    comps = tool.cycles(edges)
    assert not comps, "csrc/ has dependency cycles (file A uses a symbol file B defines):\n" + describe(edges, comps)
    assert tool.layers(edges)[-1] == ["module.c"], "module.c gathers everything: it alone is the top layer"


def test_a_planted_cycle_is_found(tmp_path):
    """The check is not vacuous: a file that both uses the allocator and is used by it closes a cycle, also when the
    use hides in a header macro."""
    tool = c_layers()
    shutil.copytree(CSRC, tmp_path / "csrc")
    planted = tmp_path / "csrc" / "planted.c"
    planted.write_text('#include "gm.h"\n'
                       "static int helper(void) { return 1; }\n"
                       "int gm_planted_hook(void) { return helper() + (gm_alloc((gm_device){0, 0}, 1) != NULL); }\n")
    assert tool.cycles(tool.graph(tmp_path / "csrc")) == [], "a file that only calls down makes no cycle"
    (tmp_path / "csrc" / "planted.h").write_text("#define GM_PLANTED() gm_planted_hook()\n")
    allocator = tmp_path / "csrc" / "allocator.c"
    allocator.write_text(allocator.read_text() + "\nstatic int use_planted(void) { return GM_PLANTED(); }\n")
    comps = tool.cycles(tool.graph(tmp_path / "csrc"))
    assert any("planted.c" in comp and allocator.name in comp for comp in comps), comps


def test_definitions_are_the_non_static_ones():
    tool = c_layers()
    src = """
    #include "gm.h"
    #define LOCAL(x) (x)
    static int hidden(void) { return 0; }
    static int hidden_var = 3;
    int exported(int a) { return a; }
    int prototype_only(int a);
    extern int declared_elsewhere;
    const char *const names[GM_NCAT] = {"a", "b"};
    PyMethodDef table[] = {{NULL}};
    struct tag { int x; };
    typedef struct { int y; } type_t;
    enum { A_CONST, B_CONST };
    static _Thread_local int per_thread;
    int counter = 1, other_counter;
    gm_block *returns_pointer(const char *s /* ) { */) { return NULL; }
    """
    assert tool.definitions(src) == {"exported", "names", "table", "counter", "other_counter", "returns_pointer"}


def _includes(path):
    text = path.read_text(encoding="utf8", errors="replace")
    return re.findall(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', text, flags=re.M)


def _resolve(path, name):
    """Where an #include of a kernels/ file lands: beside the including file, or from kernels/ or the repository."""
    for base in (path.parent, ROOT / "kernels", ROOT):
        cand = (base / name).resolve()
        if cand.is_file():
            return cand
    return None


def test_kernel_backends_do_not_include_each_other():
    cpu, cuda = (ROOT / "kernels" / "cpu").resolve(), (ROOT / "kernels" / "cuda").resolve()
    crossing = []
    for here, there in ((cuda, cpu), (cpu, cuda)):
        for path in sorted(here.rglob("*")):
            if path.suffix not in (".c", ".h", ".cu", ".cuh", ".cpp") or not path.is_file():
                continue
            for name in _includes(path):
                target = _resolve(path, name)
                if target and there in target.parents:
                    crossing.append(f"{path.relative_to(ROOT)} includes {target.relative_to(ROOT)}")
    assert not crossing, "a backend includes the other's files (shared structs belong in kernels/*.h):\n  " + \
        "\n  ".join(crossing)


def test_no_source_file_is_too_long():
    long_files = []
    for top in ("csrc", "kernels", "python", "tests", "benchmarks", "examples", "tools"):
        for path in sorted((ROOT / top).rglob("*")):
            rel = path.relative_to(ROOT)
            if path.suffix not in (".c", ".h", ".cu", ".cuh", ".cpp", ".py") or not path.is_file():
                continue
            if rel.parts[:3] == ("kernels", "cuda", "emu"):  # the emulator stands in for CUDA's own headers
                continue
            n = len(path.read_text(encoding="utf8", errors="replace").splitlines())
            if n > MAX_LINES:
                long_files.append(f"{rel}: {n} lines")
    assert not long_files, f"files over {MAX_LINES} lines (split them by concern):\n  " + "\n  ".join(long_files)
