"""gm.einsum: Einstein summation over tensors, composed of existing ops (diagonal, sum, permute, reshape, matmul),
so it is differentiable, runs on every device and is priced on meta.

The operands are contracted left to right, two at a time: the labels both share and that something later still
needs (another operand or the output) are batch dims, the shared ones nothing needs are summed by one batched
matmul, and a label only one operand has and nothing needs is summed before that. A label repeated within one
operand takes its diagonal. '...' stands for the dims not named, broadcast across operands from the right; a dim
of size 1 broadcasts against a label's size elsewhere, as in PyTorch."""
import math
import string

from .. import _C
from . import hooks
from .dtype import DTYPES, SCALAR_TYPE_NAMES
from .functions import result_code

_LETTERS = set(string.ascii_letters)


def _parse(equation, operands):
    """(input label lists, output label list) with each '...' spelled as digits, one per broadcast dim."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise RuntimeError(f"einsum(): {len(terms)} operand subscript(s) in {equation!r} but {len(operands)} "
                         f"operand(s) given")
    labels, ell = [], 0
    for i, (term, t) in enumerate(zip(terms, operands)):
        named = term.replace("...", "")
        bad = [c for c in named if c not in _LETTERS]
        if bad or term.count("...") > 1 or "." in named:
            raise RuntimeError(f"einsum(): invalid subscript {term!r} for operand {i}: use letters and at most "
                             f"one '...'")
        k = t.ndim - len(named)
        if k < 0 or (k > 0 and "..." not in term):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(named)}) does not match "
                               f"the number of dimensions ({t.ndim}) for operand {i}"
                               f"{'' if '...' in term else ' and no ellipsis was given'}")
        ell = max(ell, k)
        labels.append((term, k))
    digits = [str(d) for d in range(ell)]  # the broadcast dims, right-aligned: operand with k gets the last k

    def spell(term, k):
        head, dots, tail = term.partition("...")
        return list(head) + (digits[ell - k:] if dots else []) + list(tail)

    inputs = [spell(term, k) for term, k in labels]
    if arrow:
        if rhs.count("...") > 1 or any(c not in _LETTERS for c in rhs.replace("...", "")):
            raise RuntimeError(f"einsum(): invalid output subscript {rhs!r}")
        output = spell(rhs, ell) if "..." in rhs else list(rhs)  # no '...' in it: the broadcast dims are summed
        for c in output:
            if sum(c in ls for ls in inputs) == 0:
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input "
                                 f"operand")
            if output.count(c) > 1:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
    else:
        counts = {}
        for ls in inputs:
            for c in ls:
                counts[c] = counts.get(c, 0) + 1
        output = digits + sorted(c for c, n in counts.items() if n == 1 and c in _LETTERS)
    return inputs, output


def _take_diagonals(t, labels):
    """A label repeated within one operand: its diagonal (a view), the label once, at the end."""
    labels = list(labels)
    while True:
        rep = next((c for c in labels if labels.count(c) > 1), None)
        if rep is None:
            return t, labels
        i = labels.index(rep)
        j = labels.index(rep, i + 1)
        if t.shape[i] != t.shape[j]:  # diagonal() would take the shorter side's
            raise RuntimeError(f"einsum(): subscript {rep} is repeated for operand but the sizes don't match, "
                               f"{t.shape[j]} != {t.shape[i]}")
        t = t.diagonal(0, i, j)
        labels = [c for k, c in enumerate(labels) if k not in (i, j)] + [rep]


def _sum_unneeded(t, labels, needed):
    dims = tuple(i for i, c in enumerate(labels) if c not in needed)
    if not dims:
        return t, labels
    return t.sum(dims), [c for c in labels if c in needed]


def _contract(a, la, b, lb, needed):
    """a (labels la) times b (labels lb), summing the shared labels not in `needed`: one batched matmul."""
    size = {}
    for t, ls in ((a, la), (b, lb)):
        for c, s in zip(ls, t.shape):
            if size.get(c, 1) != s and s != 1 and size.get(c, 1) != 1:
                raise RuntimeError(f"einsum(): operands do not broadcast with remapped shapes: subscript {c} has "
                                   f"size {s} in one operand and {size[c]} in another")
            if s != 1 or c not in size:  # a size-1 dim broadcasts against any, 0 included (an empty contraction)
                size[c] = s
    shared = [c for c in la if c in lb]
    batch = [c for c in shared if c in needed]
    summed = [c for c in shared if c not in needed]
    a_only = [c for c in la if c not in lb]
    b_only = [c for c in lb if c not in la]

    def arrange(t, ls, order):
        t = t.permute([ls.index(c) for c in order])
        full = tuple(size[c] for c in order)
        return t if tuple(t.shape) == full else t.expand(full)

    n = lambda cs: math.prod(size[c] for c in cs)  # noqa: E731
    x = arrange(a, la, batch + a_only + summed).reshape(n(batch), n(a_only), n(summed))
    y = arrange(b, lb, batch + summed + b_only).reshape(n(batch), n(summed), n(b_only))
    out = x.matmul(y).reshape(tuple(size[c] for c in batch + a_only + b_only))
    return out, batch + a_only + b_only


def _promoted(operands, inputs, output):
    """Operands of several dtypes: PyTorch's einsum multiplies (and so promotes) where no label is contracted
    between two operands over more than one entry (an outer product, x-transformers' position grid), and refuses a
    contraction, which it runs as a matrix product of one dtype."""
    sizes = {}
    for t, ls in zip(operands, inputs):
        for c, n in zip(ls, t.shape):
            sizes.setdefault(c, []).append(n)
    if any(c not in output and len(ns) > 1 and max(ns) > 1 for c, ns in sizes.items()):
        a, b = (SCALAR_TYPE_NAMES.get(t._dtype, str(t.dtype)) for t in operands[:2])
        raise RuntimeError(f"expected scalar type {a} but found {b}")
    code = result_code(operands)
    return tuple(t if t._dtype == code else t.to(DTYPES[code]) for t in operands)


def _sublist_form(args):
    """PyTorch's sublist form, einsum(x, [0, 1], y, [1, 2], [0, 2]) (integers in [0, 52) name the dims, Ellipsis
    the broadcast ones; a last list without its operand is the output's), as an equation and its operands."""
    out = args[-1] if len(args) % 2 else None  # (op, sub, ..., op, sub, out): the last list is the output's
    pairs = args[:-1] if len(args) % 2 else args
    ops, subs = pairs[0::2], pairs[1::2]

    def letters(sub):
        if not isinstance(sub, (list, tuple)):
            raise TypeError(f"einsum(): expected a list of dims after each operand, got {type(sub).__name__}")
        for d in sub:
            if d is not Ellipsis and not (isinstance(d, int) and 0 <= d < 52):
                raise ValueError(f"einsum(): subscript in subscript list is not within the valid range [0, 52), "
                                 f"got {d!r}")
        return "".join("..." if d is Ellipsis else string.ascii_letters[d] for d in sub)

    equation = ",".join(letters(s) for s in subs) + ("" if out is None else "->" + letters(out))
    return equation, tuple(ops)


def einsum(equation, *operands):
    """torch.einsum(equation, *operands) (operands may also come as one list), or PyTorch's sublist form
    einsum(x, [0, 1], y, [1, 2], [0, 2])."""
    if isinstance(equation, _C.TensorBase) and operands and isinstance(operands[0], (list, tuple)):
        equation, operands = _sublist_form((equation,) + operands)
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): equation must be a str, got {type(equation).__name__}")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for i, t in enumerate(operands):
        if not isinstance(t, _C.TensorBase):
            if getattr(t, "is_complex", None) is not None and t.is_complex():
                return hooks.get("complex").einsum(einsum, equation, operands)
            raise TypeError(f"einsum(): operand {i} must be a Tensor, got {type(t).__name__}")
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    inputs, output = _parse(equation, operands)
    if len({t._dtype for t in operands}) > 1:
        operands = _promoted(operands, inputs, output)
    terms = []
    for k, (t, ls) in enumerate(zip(operands, inputs)):
        t, ls = _take_diagonals(t, ls)
        later = {c for other in inputs[:k] + inputs[k + 1:] for c in other} | set(output)
        terms.append(_sum_unneeded(t, ls, later))
    t, ls = terms[0]
    for k in range(1, len(terms)):
        b, lb = terms[k]
        needed = {c for _, rest in terms[k + 1:] for c in rest} | set(output)
        t, ls = _contract(t, ls, b, lb, needed)
    t, ls = _sum_unneeded(t, ls, set(output))
    if ls == output and t is not operands[0]:
        return t
    return t.permute([ls.index(c) for c in output])  # a view, as PyTorch's einsum of one operand is
