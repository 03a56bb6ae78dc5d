"""torch.utils._pytree: nested containers flattened into their leaves and a spec that rebuilds them. Libraries
written for PyTorch use it (torchvision's transforms.v2 flattens each sample to find its images and boxes).

Containers are lists, tuples, named tuples, dicts and OrderedDicts (in their own key order), and any type
registered with register_pytree_node; everything else, None included, is a leaf, as in PyTorch 2.15."""
import collections

__all__ = ["TreeSpec", "LeafSpec", "tree_flatten", "tree_unflatten", "tree_leaves", "tree_structure", "tree_map",
           "register_pytree_node", "MappingKey", "SequenceKey"]


class NodeDef(collections.namedtuple("NodeDef", ["type", "flatten_fn", "unflatten_fn", "flatten_with_keys_fn"])):
    """A registered node type, PyTorch's record: flatten_fn(node) -> (children, context), unflatten_fn(children,
    context) -> node (Lightning's apply_to_collection reads SUPPORTED_NODES[_get_node_type(x)].flatten_fn)."""


# node type -> NodeDef; named tuples are all under collections.namedtuple (_get_node_type), as in PyTorch
_NODES = {}
SUPPORTED_NODES = _NODES  # PyTorch's name for the registry
PyTree = object  # PyTorch's type alias for any tree (used in annotations)


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None, to_dumpable_context=None,
                         from_dumpable_context=None, flatten_with_keys_fn=None):
    """Make instances of cls containers: flatten_fn(node) -> (children, context), unflatten_fn(children, context)
    -> node."""
    if cls in _NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    _NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)


def _list_flatten(d):
    return d, None


def _list_unflatten(values, context):
    return list(values)


def _tuple_flatten(d):
    return list(d), None


def _tuple_unflatten(values, context):
    return tuple(values)


def _dict_flatten(d):
    """A dict's values and its keys as the context (PyTorch's; diffusers' BaseOutput registers its outputs with
    these two)."""
    return list(d.values()), list(d.keys())


def _dict_unflatten(values, context):
    return dict(zip(context, values, strict=True))


register_pytree_node(list, _list_flatten, _list_unflatten)
register_pytree_node(tuple, _tuple_flatten, _tuple_unflatten)
register_pytree_node(dict, _dict_flatten, _dict_unflatten)
register_pytree_node(collections.OrderedDict, lambda x: (list(x.values()), list(x)),
                     lambda xs, keys: collections.OrderedDict(zip(keys, xs)))


class MappingKey(collections.namedtuple("MappingKey", ["key"])):
    """The path entry of a dict child (tree_flatten_with_path's keys), as PyTorch's."""

    def __str__(self):
        return f"[{self.key!r}]"


class SequenceKey(collections.namedtuple("SequenceKey", ["idx"])):
    def __str__(self):
        return f"[{self.idx!r}]"


def _dict_flatten_with_keys(d):
    """A dict's children with their MappingKeys, and its keys as the context (a flatten_with_keys_fn that Hugging
    Face's ModelOutput registers)."""
    return [(MappingKey(k), v) for k, v in d.items()], list(d)


def _get_node_type(tree):
    """The registry key of tree's node type: its class, or collections.namedtuple for a named tuple."""
    return _NamedTuple if _is_namedtuple(tree) else type(tree)


def _is_leaf(tree, is_leaf=None):
    """Whether tree is a leaf: is_leaf says so, or its node type is not registered (PyTorch's)."""
    return (is_leaf is not None and is_leaf(tree)) or _get_node_type(tree) not in _NODES


tree_is_leaf = _is_leaf


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


class TreeSpec:
    """How a tree was built: its node type, the node's context (dict keys, the named tuple's class) and one spec
    per child; num_leaves counts the leaves below."""

    def __init__(self, type, context, children_specs):  # noqa: A002  (PyTorch's field name)
        self.type = type
        self.context = context
        self.children_specs = list(children_specs)
        self.num_leaves = sum(c.num_leaves for c in self.children_specs)
        self.num_children = len(self.children_specs)

    def is_leaf(self):
        return False

    def __eq__(self, other):
        return (isinstance(other, TreeSpec) and other.is_leaf() == self.is_leaf() and other.type == self.type and
                other.context == self.context and other.children_specs == self.children_specs)

    def __repr__(self):
        name = "namedtuple" if self.type is _NamedTuple else self.type.__name__
        return f"TreeSpec({name}, {self.context}, {self.children_specs})"

    def unflatten(self, leaves):
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers to "
                             f"a pytree that holds {self.num_leaves} items ({self}).")
        return self._build(iter(leaves))

    def _build(self, it):
        children = [c._build(it) for c in self.children_specs]
        if self.type is _NamedTuple:
            return self.context(*children)
        return _NODES[self.type].unflatten_fn(children, self.context)


class LeafSpec(TreeSpec):
    def __init__(self):
        super().__init__(None, None, [])
        self.num_leaves = 1

    def is_leaf(self):
        return True

    def __repr__(self):
        return "*"

    def _build(self, it):
        return next(it)


_NamedTuple = collections.namedtuple  # the node type of every named tuple (its context is the class)
_NODES[_NamedTuple] = NodeDef(_NamedTuple, lambda t: (list(t), type(t)), lambda values, cls: cls(*values), None)


def tree_flatten(tree, is_leaf=None):
    """(leaves in order, TreeSpec). is_leaf(x) True stops the descent at x."""
    leaves = []

    def spec(t):
        if is_leaf is not None and is_leaf(t):
            leaves.append(t)
            return LeafSpec()
        if _is_namedtuple(t):
            return TreeSpec(_NamedTuple, type(t), [spec(c) for c in t])
        node = _NODES.get(type(t))
        if node is None:
            leaves.append(t)
            return LeafSpec()
        children, context = node.flatten_fn(t)
        return TreeSpec(type(t), context, [spec(c) for c in children])
    return leaves, spec(tree)


def tree_unflatten(leaves, treespec):
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"tree_unflatten(leaves, treespec): Expected `treespec` to be instance of TreeSpec but got "
                        f"item of type {type(treespec)}.")
    return treespec.unflatten(leaves)


def tree_leaves(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func, tree, *rests, is_leaf=None):
    """The same tree with func applied to each leaf (and to the matching leaves of rests, trees of its shape)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [tree_flatten(r, is_leaf)[0] for r in rests]
    return spec.unflatten(func(*xs) for xs in zip(leaves, *others))
