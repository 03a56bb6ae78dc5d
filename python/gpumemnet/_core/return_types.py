"""The named tuples PyTorch's multi-result ops return, with its names (torch.return_types.max, .kthvalue, ...):
code reads `x.max(1).indices` and `x.topk(5).values` as well as unpacking them, some checks
`isinstance(r, torch.return_types.max)`, and notebooks print them as PyTorch does."""
import collections

__all__ = []


def _result_type(name, fields):
    base = collections.namedtuple(name, fields)

    def __repr__(self):  # PyTorch's: torch.return_types.max(\nvalues=...,\nindices=...)
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self))
        return f"torch.return_types.{name}(\n{body})"
    cls = type(name, (base,), {"__slots__": (), "__repr__": __repr__, "__module__": "gpumemnet.return_types"})
    globals()[name] = cls
    __all__.append(name)
    return cls


ValuesIndices = {name: _result_type(name, ["values", "indices"])
                 for name in ("max", "min", "sort", "topk", "kthvalue", "median", "nanmedian", "mode", "cummax",
                              "cummin")}
MinMax = _result_type("aminmax", ["min", "max"])
SignLogAbsDet = _result_type("slogdet", ["sign", "logabsdet"])
LinalgSignLogAbsDet = _result_type("linalg_slogdet", ["sign", "logabsdet"])
Histogram = _result_type("histogram", ["hist", "bin_edges"])
SVD = _result_type("svd", ["U", "S", "V"])
LinalgSVD = _result_type("linalg_svd", ["U", "S", "Vh"])
LinalgQR = _result_type("linalg_qr", ["Q", "R"])
LinalgEigh = _result_type("linalg_eigh", ["eigenvalues", "eigenvectors"])
Lstsq = _result_type("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
