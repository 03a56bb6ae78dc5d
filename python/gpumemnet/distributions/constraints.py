"""torch.distributions.constraints: the regions a distribution's parameters and values live in.

A constraint's check(value) gives a bool tensor of value's shape less the constraint's event_dim rightmost
dimensions: True where the value satisfies it. Distributions check their arguments and (with validation on) the
values given to log_prob against these."""
from . import _ops as T
from ..linalg import cholesky_ex, eigvalsh, vector_norm

__all__ = ["Constraint", "MixtureSameFamilyConstraint",
           "boolean", "cat", "corr_cholesky", "dependent", "dependent_property", "greater_than",
           "greater_than_eq", "independent", "integer_interval", "interval", "half_open_interval", "is_dependent",
           "less_than", "lower_cholesky", "lower_triangular", "multinomial", "nonnegative", "nonnegative_integer",
           "one_hot", "positive", "positive_semidefinite", "positive_definite", "positive_integer", "real",
           "real_vector", "simplex", "square", "stack", "symmetric", "unit_interval"]


class Constraint:
    """Base class: a region of values. is_discrete says whether the region is countable, event_dim how many
    rightmost dimensions together make one point of it."""
    is_discrete = False
    event_dim = 0

    def check(self, value):
        """A bool tensor of value's batch shape: True where value satisfies the constraint."""
        raise NotImplementedError

    def __repr__(self):
        return self.__class__.__name__[1:] + "()"


class _Dependent(Constraint):
    """A placeholder for a constraint that depends on other arguments (Uniform's low and high); not checkable."""

    def __init__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        self._is_discrete = is_discrete
        self._event_dim = event_dim
        super().__init__()

    @property
    def is_discrete(self):
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self):
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        """A copy with the given static attributes."""
        if is_discrete is NotImplemented:
            is_discrete = self._is_discrete
        if event_dim is NotImplemented:
            event_dim = self._event_dim
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, x):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint):
    """Whether constraint is a dependent one (cannot be checked on its own)."""
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """A property that is also a dependent constraint: on the class it stands for the constraint, on an instance
    it computes the actual one (Uniform.support -> interval(low, high))."""

    def __init__(self, fn=None, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        property.__init__(self, fn)
        self._is_discrete = is_discrete
        self._event_dim = event_dim

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


class _IndependentConstraint(Constraint):
    """base_constraint with reinterpreted_batch_ndims more of the rightmost dimensions taken as the event."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        # PyTorch asserts both: AssertionError, as there
        if not isinstance(base_constraint, Constraint):
            raise AssertionError(f"independent: base_constraint must be a Constraint, got "
                                 f"{type(base_constraint).__name__}")
        if not isinstance(reinterpreted_batch_ndims, int) or reinterpreted_batch_ndims < 0:
            raise AssertionError(f"independent: reinterpreted_batch_ndims must be a nonnegative int, got "
                                 f"{reinterpreted_batch_ndims!r}")
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__()

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        n = self.reinterpreted_batch_ndims
        if result.dim() < n:
            raise ValueError(f"Expected value.dim() >= {self.base_constraint.event_dim + n} but got {value.dim()}")
        for _ in range(n):  # (reshape(..., -1) cannot infer the size of an empty tensor)
            result = result.all(-1)
        return result

    def __repr__(self):
        return f"{self.__class__.__name__[1:]}({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class MixtureSameFamilyConstraint(Constraint):
    """A MixtureSameFamily's support: the component distribution's, checked with the component dimension added
    back."""

    def __init__(self, base_constraint):
        if not isinstance(base_constraint, Constraint):
            raise AssertionError(f"base_constraint must be a Constraint, got {type(base_constraint).__name__}")
        self.base_constraint = base_constraint
        super().__init__()

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim

    def check(self, value):
        result = self.base_constraint.check(value.unsqueeze(-1 - self.event_dim))
        if value.dim() < self.event_dim:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.dim()}")
        keep = value.dim() - self.event_dim
        for _ in range(result.dim() - keep):
            result = result.all(-1)
        return result

    def __repr__(self):
        return f"{self.__class__.__name__}({self.base_constraint!r})"


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        is_boolean = (value == 0) | (value == 1)
        return is_boolean.all(-1) & value.sum(-1).eq(1)


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value):
        return (value % 1 == 0) & (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self):
        return f"{self.__class__.__name__[1:]}(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerLessThan(Constraint):
    is_discrete = True

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value):
        return (value % 1 == 0) & (value <= self.upper_bound)

    def __repr__(self):
        return f"{self.__class__.__name__[1:]}(upper_bound={self.upper_bound})"


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound
        super().__init__()

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound)

    def __repr__(self):
        return f"{self.__class__.__name__[1:]}(lower_bound={self.lower_bound})"


class _Real(Constraint):
    def check(self, value):
        return value == value  # False only for NaN


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound
        super().__init__()

    def check(self, value):
        return self.lower_bound < value

    def __repr__(self):
        return f"{self.__class__.__name__[1:]}(lower_bound={self.lower_bound})"


class _GreaterThanEq(_GreaterThan):
    def check(self, value):
        return self.lower_bound <= value


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value):
        return value < self.upper_bound

    def __repr__(self):
        return f"{self.__class__.__name__[1:]}(upper_bound={self.upper_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value):
        return (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self):
        return f"{self.__class__.__name__[1:]}(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _HalfOpenInterval(_Interval):
    def check(self, value):
        return (self.lower_bound <= value) & (value < self.upper_bound)


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _Multinomial(Constraint):
    """Nonnegative integer vectors summing to at most upper_bound."""
    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, x):
        return (x >= 0).all(dim=-1) & (x.sum(dim=-1) <= self.upper_bound)


def _all_true(valid):
    """Whether every entry of a check's result holds. Meta tensors have no values: they pass (the memory
    estimator runs models on meta, where the real run would check)."""
    if not isinstance(valid, T.Tensor):
        return bool(valid)
    if valid.device.type == "meta":
        return True
    return bool(valid.all())


def _flat_all(t):
    """t (..., n, n) -> (...,): all over the last two dimensions."""
    return t.all(-1).all(-1)


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        return _flat_all(value.tril() == value)


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        positive_diagonal = (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)
        return _flat_all(value.tril() == value) & positive_diagonal


class _CorrCholesky(Constraint):
    """Lower Cholesky factors of correlation matrices: rows of unit norm."""
    event_dim = 2

    def check(self, value):
        tol = T.finfo(value.dtype).eps * value.shape[-1] * 10
        row_norm = vector_norm(value.detach(), dim=-1)
        unit_row_norm = ((row_norm - 1.0).abs() <= tol).all(-1)
        return _LowerCholesky().check(value) & unit_row_norm


class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        return T.full(tuple(value.shape[:-2]), value.shape[-2] == value.shape[-1], dtype=T.bool_,
                      device=value.device)


class _Symmetric(_Square):
    def check(self, value):
        square_check = super().check(value)
        if not _all_true(square_check):
            return square_check
        return _flat_all(T.isclose(value, value.mT, atol=1e-6))


class _PositiveDefinite(_Symmetric):
    def check(self, value):
        sym_check = super().check(value)
        if not _all_true(sym_check):
            return sym_check
        return cholesky_ex(value).info.eq(0)


class _PositiveSemidefinite(_Symmetric):
    """Symmetric matrices whose eigenvalues are all >= 0."""

    def check(self, value):
        sym_check = super().check(value)
        if not _all_true(sym_check):
            return sym_check
        return eigvalsh(value).ge(0).all(-1)


class _Cat(Constraint):
    """Constraints cseq applied to consecutive slices of lengths `lengths` along dim."""

    def __init__(self, cseq, dim=0, lengths=None):
        if not all(isinstance(c, Constraint) for c in cseq):  # PyTorch asserts: AssertionError, as there
            raise AssertionError("All elements of cseq must be Constraint instances")
        self.cseq = list(cseq)
        if lengths is None:
            lengths = [1] * len(self.cseq)
        self.lengths = list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise AssertionError(f"lengths ({len(self.lengths)}) must match cseq ({len(self.cseq)})")
        self.dim = dim
        super().__init__()

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        checks, start = [], 0
        for constr, length in zip(self.cseq, self.lengths):
            checks.append(constr.check(value.narrow(self.dim, start, length)))
            start += length
        return T.cat(checks, self.dim)


class _Stack(Constraint):
    """Constraints cseq applied to the consecutive entries along dim."""

    def __init__(self, cseq, dim=0):
        if not all(isinstance(c, Constraint) for c in cseq):
            raise AssertionError("All elements of cseq must be Constraint instances")
        self.cseq = list(cseq)
        self.dim = dim
        super().__init__()

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        dim = max(c.event_dim for c in self.cseq)
        if self.dim + dim < 0:
            dim += 1
        return dim

    def check(self, value):
        vs = [value.select(self.dim, i) for i in range(value.size(self.dim))]
        return T.stack([c.check(v) for v, c in zip(vs, self.cseq)], self.dim)


# Public interface, the names PyTorch gives them.
dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
multinomial = _Multinomial
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
corr_cholesky = _CorrCholesky()
square = _Square()
symmetric = _Symmetric()
positive_definite = _PositiveDefinite()
positive_semidefinite = _PositiveSemidefinite()
cat = _Cat
stack = _Stack
