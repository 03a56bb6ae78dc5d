"""The file-level dependency graph of the C core (csrc/*.c), and its cycles.

File A depends on file B when A uses a non-static function or variable that B defines. The graph is read from
the sources, not from compiled objects, so that the test (tests/test_layers_c.py) runs wherever the sources are,
with no compiler: each file's top-level non-static definitions are collected, then every other file's identifiers
are matched against them. A use hidden in a header's macro or static inline function (GM_KERNEL calling
gm_kernel_status, gm_is_tensor reading GMTensor_Base) counts for the file that uses the macro or function. Code in
every #if branch counts: CI builds the CPU, emulator and CUDA configurations, and each must be acyclic.

    python tools/c_layers.py [ROOT]          edges, cycles and layers (exit status 1 when there is a cycle)
"""
import re
import sys
from pathlib import Path

_TOKEN = re.compile(
    r"""(?P<comment>/\*.*?\*/|//[^\n]*)
      | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
      | (?P<ident>[A-Za-z_]\w*)
      | (?P<number>\d[\w.]*)
      | (?P<punct>\S)""",
    re.S | re.X,
)
_KEYWORDS = {"static", "extern", "typedef", "struct", "union", "enum", "inline", "return", "if", "while", "for",
             "switch", "sizeof", "do", "else", "case", "default", "goto", "break", "continue"}


def _lines_without_includes(text):
    """The text with #include lines blanked (a header name is not a use) and line continuations joined."""
    text = text.replace("\\\n", " ")
    return re.sub(r"^[ \t]*#[ \t]*include[^\n]*", "", text, flags=re.M)


def tokens(text):
    """C tokens of text (comments and string literals dropped; preprocessor lines kept as ordinary tokens)."""
    out = []
    for m in _TOKEN.finditer(_lines_without_includes(text)):
        kind = m.lastgroup
        if kind in ("comment", "string"):
            continue
        out.append(m.group())
    return out


def _preprocessor_free(text):
    """The text with every preprocessor line blanked: what the top-level parser walks."""
    text = text.replace("\\\n", " ")
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"^[ \t]*#[^\n]*", "", text, flags=re.M)


def definitions(text):
    """Names of the top-level non-static functions and variables a .c file defines."""
    toks = tokens(_preprocessor_free(text))
    names, stmt, i = set(), [], 0

    def skip_braces(i):  # i at '{': index after its matching '}'
        depth = 0
        while i < len(toks):
            depth += toks[i] == "{"
            depth -= toks[i] == "}"
            i += 1
            if depth == 0:
                break
        return i

    while i < len(toks):
        t = toks[i]
        if t == "{":
            if stmt and stmt[-1] == ")" and "=" not in stmt:  # a function body
                depth, j = 0, len(stmt) - 1
                while j >= 0:  # the '(' matching the declarator's last ')'
                    depth += stmt[j] == ")"
                    depth -= stmt[j] == "("
                    if depth == 0:
                        break
                    j -= 1
                if j > 0 and re.match(r"[A-Za-z_]\w*$", stmt[j - 1]) and "static" not in stmt:
                    names.add(stmt[j - 1])
                i = skip_braces(i)
                stmt = []
                continue
            stmt.append("<init>" if stmt and stmt[-1] == "=" else "{}")  # an initializer, or a struct/enum body
            i = skip_braces(i)
            continue
        if t == ";":
            if stmt and not {"static", "extern", "typedef"} & set(stmt):
                if "{}" in stmt:  # `struct tag {...} x`: only what follows the body declares variables
                    stmt = stmt[len(stmt) - stmt[::-1].index("{}"):]
                decls, depth, cur = [], 0, []
                for x in stmt:  # `int a = f(1, 2), b[4]`: split at the commas outside parentheses
                    depth += (x == "(") - (x == ")")
                    if x == "," and depth == 0:
                        decls.append(cur)
                        cur = []
                    else:
                        cur.append(x)
                decls.append(cur)
                for decl in decls:
                    head = decl[: decl.index("=")] if "=" in decl else decl
                    head = head[: head.index("[")] if "[" in head else head
                    if "(" in head:  # a prototype
                        break
                    idents = [x for x in head if re.match(r"[A-Za-z_]\w*$", x) and x not in _KEYWORDS]
                    if idents:
                        names.add(idents[-1])
            stmt = []
        else:
            stmt.append(t)
        i += 1
    return names


def header_expansions(headers):
    """For each macro and static inline function of the headers: the identifiers its body uses."""
    uses = {}
    for text in headers:
        flat = text.replace("\\\n", " ")
        for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)([^\n]*)", flat, flags=re.M):
            uses.setdefault(m.group(1), set()).update(tokens(m.group(2)))
        clean = _preprocessor_free(text)
        for m in re.finditer(r"static\s+inline\b[^;{]*?\b(\w+)\s*\([^;{]*\)\s*\{", clean):
            depth, j = 0, m.end() - 1
            while j < len(clean):
                depth += clean[j] == "{"
                depth -= clean[j] == "}"
                j += 1
                if depth == 0:
                    break
            uses.setdefault(m.group(1), set()).update(tokens(clean[m.end(): j]))
    return uses


def graph(csrc):
    """{file: {dependency: sorted symbols}} over csrc's .c files (names without the directory)."""
    csrc = Path(csrc)
    sources = {p.name: p.read_text(encoding="utf8") for p in sorted(csrc.glob("*.c"))}
    expand = header_expansions(p.read_text(encoding="utf8") for p in sorted(csrc.glob("*.h")))
    owner = {}
    for name, text in sources.items():
        for sym in definitions(text):
            owner.setdefault(sym, set()).add(name)
    edges = {}
    for name, text in sources.items():
        used, todo = set(), list(set(tokens(text)))
        while todo:  # close over the header macros and inline functions the file uses
            sym = todo.pop()
            if sym in used:
                continue
            used.add(sym)
            todo.extend(expand.get(sym, ()))
        deps = {}
        for sym in used:
            for other in owner.get(sym, ()):
                if other != name:
                    deps.setdefault(other, set()).add(sym)
        edges[name] = {d: sorted(s) for d, s in deps.items()}
    return edges


def cycles(edges):
    """Strongly connected components with more than one file (Tarjan), each sorted; sorted by first file."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(1000, 4 * len(edges)))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def layers(edges):
    """Files by layer, bottom first (a file's layer is one above its highest dependency); None with a cycle."""
    if cycles(edges):
        return None
    level = {}

    def depth(v):
        if v not in level:
            level[v] = 1 + max((depth(w) for w in edges.get(v, {})), default=-1)
        return level[v]

    for v in edges:
        depth(v)
    return [sorted(v for v in level if level[v] == k) for k in range(max(level.values(), default=-1) + 1)]


def main(argv):
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    edges = graph(root / "csrc")
    for f in sorted(edges):
        for d, syms in sorted(edges[f].items()):
            print(f"{f} -> {d}: {', '.join(syms[:6])}{' ...' if len(syms) > 6 else ''}")
    found = cycles(edges)
    print(f"\n{len(found)} cycle(s)")
    for comp in found:
        print("  cycle:", " <-> ".join(comp))
    order = layers(edges)
    if order:
        print("\nlayers, bottom first:")
        for k, files in enumerate(order):
            print(f"  {k}: {' '.join(files)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
