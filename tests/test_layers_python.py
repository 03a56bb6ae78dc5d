"""Imports in python/gpumemnet run down the layers only, and form no cycle (DESIGN.md, "Layers, bottom up").

Every module is read with `ast` (nothing is imported): each `import x` / `from x import y` / `from . import y`,
at module level or inside a function, is an edge to the module it actually imports (`from pkg import name`
goes to pkg.name when that is a module, else to pkg). The parent packages that Python runs implicitly on the
way (gpumemnet/__init__.py for `from gpumemnet.nn import x`) are not edges. Layers, bottom up:

    0  _C, _loader
    1  _core/
    2  the libraries: nn/, optim/, amp/, utils/, cuda/, accelerator, distributed/, futures, backends, serialization,
       linalg, func, special, distributions/, testing
    3  memory/, profiler/
    4  the package's face: gpumemnet/__init__.py, __main__, demo, and the re-exports autograd.py, random.py

Also: no python/gpumemnet/*.py over MAX_LINES lines (files stay readable in one sitting)."""
import ast
import os

PKG = "gpumemnet"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", PKG)
MAX_LINES = 800

LAYERS = {"_C": 0, "_loader": 0, "_core": 1,
          "nn": 2, "optim": 2, "amp": 2, "utils": 2, "cuda": 2, "backends": 2, "serialization": 2,
          "_serialization_pickle": 2, "_serialization_torch": 2, "_serialization_torch_write": 2, "compat": 2,
          "cpu": 2, "_func_transforms": 2,
          "distributed": 2, "futures": 2, "accelerator": 2, "linalg": 2, "func": 2, "special": 2, "distributions": 2,
          "testing": 2, "types": 2, "foreach": 2, "fft": 2, "sparse": 2, "_interop": 2,
          "multiprocessing": 2, "overrides": 2, "quasirandom": 2, "return_types": 2, "_pickle_names": 4, "__config__": 2,
          "_tensor_str": 2, "_utils": 2, "_segments": 2, "xpu": 2, "mps": 2, "signal": 2,
          "_device_modules": 4,
          "memory": 3, "profiler": 3, "functional": 4,
          "__main__": 4, "_aliases": 4, "demo": 4, "autograd": 4, "random": 4, "dropin": 4}
NAMES = ["C/loader", "core", "libraries", "memory", "face"]


def layer_of(module):
    """The layer of a module, from its path; the package itself is the face."""
    parts = module.split(".")
    if parts == [PKG]:
        return 4
    if parts[1] not in LAYERS:
        raise KeyError(f"{module}: no layer assigned; add python/{PKG}/{parts[1]} to LAYERS in {__file__}")
    return LAYERS[parts[1]]


def find_modules(root=ROOT):
    """{module name: path} of every .py file under root, plus the extension _C."""
    mods = {f"{PKG}._C": None}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)[:-3].split(os.sep)
            if rel[-1] == "__init__":
                rel = rel[:-1]
            mods[".".join([PKG] + rel)] = path
    return mods


def _resolve(importer, is_package, level, target):
    """The absolute name of `from <level dots><target> import ...` written in module importer."""
    if level == 0:
        return target
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[:-(level - 1)]
    return ".".join(base + ([target] if target else []))


def imports_of(name, path, mods):
    """[(imported module, line)] of one module: every import statement anywhere in it, inside the package."""
    tree = ast.parse(open(path).read(), path)
    is_package = os.path.basename(path) == "__init__.py"
    out = []

    def add(target, line):
        if target == PKG or target.startswith(PKG + "."):
            while target not in mods and "." in target:  # `import gpumemnet.x.attr`: the module is gpumemnet.x
                target = target.rsplit(".", 1)[0]
            out.append((target, line))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, is_package, node.level, node.module)
            for a in node.names:
                sub = f"{base}.{a.name}"
                add(sub if sub in mods else base, node.lineno)
    return out


def import_graph(root=ROOT):
    """{module: [(imported module, line)]} of the package under root (self-imports left out)."""
    mods = find_modules(root)
    graph = {m: sorted({(t, ln) for t, ln in imports_of(m, p, mods) if t != m}) for m, p in mods.items() if p}
    return graph, mods


def upward_edges(graph, layer=layer_of):
    return [(m, t, ln) for m, edges in graph.items() for t, ln in edges if layer(t) > layer(m)]


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    succ = {m: sorted({t for t, _ in edges if t in graph}) for m, edges in graph.items()}
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            if i < len(succ[v]):
                work.append((v, i + 1))
                w = succ[v][i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            for w in succ[v]:
                if w in on_stack:
                    low[v] = min(low[v], low[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _short(m):
    return m[len(PKG) + 1:] or PKG


def test_every_module_has_a_layer():
    graph, _ = import_graph()
    for m in graph:
        layer_of(m)  # raises, naming the module


def test_imports_run_down_only():
    graph, _ = import_graph()
    up = upward_edges(graph)
    lines = [f"  {_short(m)} ({NAMES[layer_of(m)]}) imports {_short(t)} ({NAMES[layer_of(t)]}) at line {ln}"
             for m, t, ln in sorted(up)]
    assert not up, f"{len(up)} upward import(s): a lower layer must not import a higher one (register a hook " \
                   f"in gpumemnet/_core/hooks.py instead):\n" + "\n".join(lines)


def test_no_import_cycles():
    graph, _ = import_graph()
    found = cycles(graph)
    lines = []
    for comp in found:
        members = set(comp)
        lines.append("  cycle among " + ", ".join(_short(m) for m in comp) + ":")
        lines += [f"    {_short(m)} -> {_short(t)} (line {ln})" for m in comp for t, ln in graph[m] if t in members]
    assert not found, "import cycles:\n" + "\n".join(lines)


def test_files_are_small():
    _, mods = import_graph()
    big = [(p, n) for p in mods.values() if p for n in [sum(1 for _ in open(p))] if n > MAX_LINES]
    assert not big, "files over %d lines: %s" % (MAX_LINES, ", ".join(f"{os.path.relpath(p, ROOT)} ({n})"
                                                                        for p, n in big))


def test_the_checker_sees_a_planted_upward_import(tmp_path):
    """The walk itself: an import inside a function of the core that reaches memory is an upward edge, and a
    pair of modules importing each other is a cycle."""
    pkg = tmp_path / PKG
    (pkg / "_core").mkdir(parents=True)
    (pkg / "memory").mkdir()
    (pkg / "__init__.py").write_text("from . import _core, memory\n")
    (pkg / "_core" / "__init__.py").write_text("")
    (pkg / "_core" / "a.py").write_text("def f():\n    from ..memory import b\n    return b\n")
    (pkg / "memory" / "__init__.py").write_text("")
    (pkg / "memory" / "b.py").write_text("from .._core import a\nfrom . import c\n")
    (pkg / "memory" / "c.py").write_text("import gpumemnet.memory.b\n")
    graph, _ = import_graph(str(pkg))
    assert (f"{PKG}._core.a", f"{PKG}.memory.b", 2) in upward_edges(graph)
    assert cycles(graph) == [[f"{PKG}._core.a", f"{PKG}.memory.b", f"{PKG}.memory.c"]]


