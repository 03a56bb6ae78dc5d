"""The named tuples PyTorch's multi-result ops return (torch.return_types.max...): code reads
`x.max(1).indices` and `x.topk(5).values` as well as unpacking them."""
import collections

ValuesIndices = {name: collections.namedtuple(name, ["values", "indices"]) for name in ("max", "min", "sort", "topk")}
