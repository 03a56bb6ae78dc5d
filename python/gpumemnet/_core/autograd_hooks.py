"""Gradient hooks: on tensors (Tensor.register_hook, register_post_accumulate_grad_hook) and on graph nodes
(grad_fn.register_prehook / register_hook). The engine (csrc/autograd_engine.c) runs them; this module files them.

A node's hook dict (`_pre_hooks`) holds the tensors' hooks under their output_nr and the node's own under two
negative keys, which the engine reads in PyTorch's order: the tensors' hooks, the node's pre-hooks, the node, the
node's post-hooks."""

NODE_PRE_HOOKS = -1   # fn(grad_outputs) -> None or new grad_outputs
NODE_POST_HOOKS = -2  # fn(grad_inputs, grad_outputs) -> None or new grad_inputs


class RemovableHandle:
    __slots__ = ("_list", "_fn")

    def __init__(self, lst, fn):
        self._list = lst
        self._fn = fn

    def remove(self):
        if self._fn in self._list:
            self._list.remove(self._fn)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _hook_list(node, key):
    if node._pre_hooks is None:
        node._pre_hooks = {}
    return node._pre_hooks.setdefault(key, [])


def register_node_hook(node, key, fn):
    """Node.register_prehook (key NODE_PRE_HOOKS) and Node.register_hook (NODE_POST_HOOKS). DeepSpeed, Horovod and
    apex find a parameter's accumulator as p.expand_as(p).grad_fn.next_functions[0][0] and hook it there."""
    if not callable(fn):
        raise TypeError(f"register_hook: expected a callable hook, got {type(fn).__name__}")
    hooks = _hook_list(node, key)
    hooks.append(fn)
    return RemovableHandle(hooks, fn)


def register_post_accumulate_grad_hook(t, fn):
    """PyTorch's Tensor.register_post_accumulate_grad_hook: fn(t) after t.grad was updated in a backward
    (DistributedDataParallel launches a bucket's all-reduce from it, while backward goes on)."""
    if not t.requires_grad or t.grad_fn is not None:
        raise RuntimeError("register_post_accumulate_grad_hook: post accumulate grad hooks can only be registered "
                           "on leaf tensors that require grad")
    # A slot of their own (the Tensor's _post_acc_hooks, read by the engine in C after .grad is written), apart
    # from the pre-accumulation hooks in _hooks.
    if t._post_acc_hooks is None:
        t._post_acc_hooks = []
    t._post_acc_hooks.append(fn)
    return RemovableHandle(t._post_acc_hooks, fn)


def register_tensor_hook(t, fn):
    if not t.requires_grad:
        raise RuntimeError("register_hook: cannot register a hook on a tensor that does not require grad")
    if t.grad_fn is None:
        # A leaf keeps its own hooks: its accumulator node lives only as long as some graph uses it.
        if t._hooks is None:
            t._hooks = []
        hooks = t._hooks
    else:
        hooks = _hook_list(t.grad_fn, t._output_nr)
    if hooks and getattr(hooks[-1], "retains_grad", False):  # retain_grad's hook stays last
        hooks.insert(len(hooks) - 1, fn)
    else:
        hooks.append(fn)
    return RemovableHandle(hooks, fn)
