"""The default DDP communication hooks, with PyTorch's names and results (layer 2, distributed).

A hook is hook(state, bucket) -> Future of the bucket's reduced tensor, registered with
DistributedDataParallel.register_comm_hook(state, hook); state is the process group (None: the default one).
The bucket's buffer arrives as the sum of this rank's gradients, not divided by the world size: the hook divides.
  allreduce_hook        what DDP does without a hook: divide by the group's size, all-reduce (sum) in place;
  fp16_compress_hook    a float16 copy of the buffer divided by the size, all-reduced in float16 (half the bytes
                        on the wire), then copied back into the buffer; bf16_compress_hook the same in bfloat16.
                        Over MPI, 16-bit floats are summed in float32 and rounded once per pair (dist_mpi.c);
  fp16_compress_wrapper(hook), bf16_compress_wrapper(hook): run hook on a compressed copy of the bucket and cast
                        its result back.
The compressed copies are allocated while DDP calls the hook, in the allocator category `communication`, and
freed when DDP collects the bucket's result at the end of backward (gpumemnet.futures: callbacks run then)."""
from ...._core import dtype as _dtype
from ... import collectives as _collectives
from ... import process_group as _pg

__all__ = ["allreduce_hook", "fp16_compress_hook", "bf16_compress_hook", "fp16_compress_wrapper",
           "bf16_compress_wrapper"]


def _group(process_group):
    return process_group if process_group is not None else _pg.group.WORLD


def _size(group):
    if group is None:
        raise RuntimeError("DDP communication hook: no process group (state is None and the default group is not "
                           "initialized)")
    return group.size()


def _all_reduce_future(group, tensor):
    group_arg = None if group is _pg.group.WORLD else group
    return _collectives.all_reduce(tensor, group=group_arg, async_op=True).get_future()


def allreduce_hook(process_group, bucket):
    """Average the bucket over the group by an all-reduce: the same result as DDP without a hook."""
    group = _group(process_group)
    buf = bucket.buffer()
    buf.div_(_size(group))
    return _all_reduce_future(group, buf).then(lambda fut: fut.value()[0])


def _compress_hook(dtype, process_group, bucket):
    group = _group(process_group)
    buf = bucket.buffer()
    compressed = buf.to(dtype).div_(_size(group))

    def decompress(fut):
        buf.copy_(fut.value()[0])  # back into the bucket itself: no second full-precision copy
        return buf
    return _all_reduce_future(group, compressed).then(decompress)


def fp16_compress_hook(process_group, bucket):
    """All-reduce a float16 copy of the bucket divided by the group's size; the result cast back into it."""
    return _compress_hook(_dtype.float16, process_group, bucket)


def bf16_compress_hook(process_group, bucket):
    """All-reduce a bfloat16 copy of the bucket divided by the group's size; the result cast back into it."""
    return _compress_hook(_dtype.bfloat16, process_group, bucket)


def _compress_wrapper(dtype, hook):
    def wrapped(hook_state, bucket):
        bucket.set_buffer(bucket.buffer().to(dtype))
        fut = hook(hook_state, bucket)

        def decompress(f):
            out = bucket.buffer()
            out.copy_(f.value())
            return out
        return fut.then(decompress)
    return wrapped


def fp16_compress_wrapper(hook):
    """hook run on a float16 copy of the bucket, its result cast back to the bucket's dtype."""
    wrapped = _compress_wrapper(_dtype.float16, hook)
    wrapped.__name__ = wrapped.__qualname__ = "fp16_compress_wrapper_hook"
    return wrapped


def bf16_compress_wrapper(hook):
    """hook run on a bfloat16 copy of the bucket, its result cast back to the bucket's dtype."""
    wrapped = _compress_wrapper(_dtype.bfloat16, hook)
    wrapped.__name__ = wrapped.__qualname__ = "bf16_compress_wrapper_hook"
    return wrapped
