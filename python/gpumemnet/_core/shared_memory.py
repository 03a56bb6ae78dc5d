"""Tensor.share_memory_'s memory (_core/tensor_misc_extra.py's method): a memfd mapped MAP_SHARED, so that a forked
child sees the same pages and the fd can be passed to a spawned one (multiprocessing's DupFd: spawn, forkserver,
Queues), which maps the same file. The mapping is made through libc rather than Python's mmap, which keeps its own
dup of the fd: one fd per shared tensor, as PyTorch's file_descriptor strategy (kept open while the memory lives,
for later sends). Also restored(), what unpickling a tensor gives back besides its values (both forms)."""
import bisect
import ctypes
import os
import threading
import weakref

import numpy as np

from .. import _C

_BF16_CODE, _I16_CODE = 3, 8
_PROT_RW, _MAP_SHARED = 0x3, 0x01
_LIBC = []
_BLOCKS_LOCK = threading.RLock()  # re-entrant: a collection inside a locked section may release a block
_STARTS = []   # sorted start addresses of the live shared blocks
_BLOCKS = {}   # start address -> weakref to its _SharedMemory
_BY_FD = set()  # tensor classes whose multiprocessing pickling passes shared memory by fd


def _libc():
    if not _LIBC:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.mmap.restype = ctypes.c_void_p
        lib.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                             ctypes.c_long)
        lib.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
        _LIBC.append(lib)
    return _LIBC[0]


def _new_memfd(nbytes):
    if not hasattr(os, "memfd_create"):
        raise RuntimeError("share_memory_: needs memfd_create (Linux); this platform has no shared memory for "
                           "gpumemnet tensors")
    fd = os.memfd_create("gpumemnet_shared", os.MFD_CLOEXEC)  # CLOEXEC: a spawned child gets it only when sent
    try:
        os.ftruncate(fd, max(nbytes, 1))
    except OSError:
        os.close(fd)
        raise
    return fd


def _release(addr, nbytes, fd):
    with _BLOCKS_LOCK:
        _BLOCKS.pop(addr, None)
        i = bisect.bisect_left(_STARTS, addr)
        if i < len(_STARTS) and _STARTS[i] == addr:
            del _STARTS[i]
    _libc().munmap(addr, nbytes)
    os.close(fd)


class _SharedMemory:
    """One shared block: fd (owned: closed with the block), address, size. It lives as long as an array over it
    (array()): a tensor's storage keeps it mapped. Pickled by multiprocessing, it travels as its fd."""
    __slots__ = ("fd", "addr", "nbytes", "__weakref__")

    def __init__(self, fd, nbytes):
        size = max(nbytes, 1)  # an empty tensor still gets a block, so that is_shared() holds for it
        addr = _libc().mmap(None, size, _PROT_RW, _MAP_SHARED, fd, 0)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            err = ctypes.get_errno()
            os.close(fd)
            raise OSError(err, f"share_memory_: mmap of {size} bytes failed: {os.strerror(err)}")
        self.fd, self.addr, self.nbytes = fd, addr, size
        weakref.finalize(self, _release, addr, size, fd)
        ref = weakref.ref(self)
        with _BLOCKS_LOCK:
            bisect.insort(_STARTS, addr)
            _BLOCKS[addr] = ref

    def array(self):
        """A uint8 NumPy array over the whole block, keeping the block alive (a ctypes buffer over the address
        cannot hold a reference; an instance of a Python subclass of it can)."""
        buf = type("_SharedBytes", (ctypes.c_ubyte * self.nbytes,), {}).from_address(self.addr)
        buf.block = self
        return np.frombuffer(buf, np.uint8)

    def __reduce__(self):
        from multiprocessing import reduction  # only multiprocessing's pickler reaches here (_pass_by_fd)
        return _attach_block, (reduction.DupFd(self.fd), self.nbytes)


def _attach_block(dup_fd, nbytes):
    """_SharedMemory.__reduce__'s inverse, in the receiving process: the fd sent becomes this block's own."""
    return _SharedMemory(dup_fd.detach(), nbytes)


def shared_block(t):
    """The live shared block a CPU tensor's memory lies in, or None."""
    if t._device != "cpu":
        return None
    ptr = t.data_ptr()
    with _BLOCKS_LOCK:
        i = bisect.bisect_right(_STARTS, ptr) - 1
        if i < 0:
            return None
        block = _BLOCKS[_STARTS[i]]()
    return block if block is not None and ptr < block.addr + block.nbytes else None


def pass_by_fd(cls):
    """Make multiprocessing pickle tensors of class cls (a spawned child's arguments, a Queue, a Pipe) with their
    shared memory passed by fd: the receiver maps the same memory instead of getting a copy that it alone
    trains. Pickling for files (torch.save, pickle.dump) is untouched: the values, as before."""
    if cls in _BY_FD:
        return
    from multiprocessing.reduction import ForkingPickler
    ForkingPickler.register(cls, _reduce_for_process)
    _BY_FD.add(cls)


def _reduce_for_process(t):
    block = shared_block(t)
    if block is None:
        return t.__reduce_ex__(4)
    d = t.detach()
    offset, rest = divmod(d.data_ptr() - block.addr, d.element_size())
    if rest:
        raise RuntimeError("sending a shared tensor to another process: its memory is not aligned to its dtype "
                           "within the shared block (a view of it as another dtype); send .clone() instead")
    np_name = "int16" if d._dtype == _BF16_CODE else d.dtype.name
    # the block (one object however many of its tensors are sent) is pickled once: its fd is passed once
    return _rebuild_shared, (type(t), block, np_name, d._dtype, tuple(d.shape), tuple(d._strides), offset,
                             t.requires_grad, t._is_param, getattr(t, "__dict__", None) or None)


def restored(t, cls, is_param, requires_grad, state):
    """t given back what a pickled tensor carries besides its values: its class, parameter flag, requires_grad and
    attributes."""
    if cls is not type(t):
        t = t.as_subclass(cls)
    t._is_param = is_param
    if requires_grad:
        t.requires_grad_()
    if state:
        t.__dict__.update(state)
    return t


def _rebuild_shared(cls, block, np_name, code, shape, strides, offset, requires_grad, is_param, state):
    """_reduce_for_process's inverse: a tensor over the block received (the sender's memory)."""
    itemsize = np.dtype(np_name).itemsize
    whole = _C.from_numpy_shared(block.array()[:block.nbytes // itemsize * itemsize].view(np_name))
    if code == _BF16_CODE:
        whole = whole._view_dtype(_BF16_CODE)
    t = restored(whole._as_strided(shape, strides, offset), cls, is_param, requires_grad, state)
    pass_by_fd(type(t))  # it can be sent on (to a grandchild, back through a Queue) shared as well
    return t


def share(t):
    """Tensor.share_memory_(): t's values moved into a new shared block, in place (t._set_data keeps the object,
    requires_grad, .grad and the parameter flag); t itself when already shared or on CUDA."""
    if t._device == "meta":
        raise RuntimeError("share_memory_: only available on CPU (a meta tensor has no memory)")
    if t._device != "cpu" or shared_block(t) is not None:
        return t
    host = t.detach()
    values = (host._view_dtype(_I16_CODE) if host._dtype == _BF16_CODE else host).numpy()  # bf16 as its bits
    block = _SharedMemory(_new_memfd(values.nbytes), values.nbytes)
    array = block.array()[:values.nbytes].view(values.dtype).reshape(values.shape)
    array[...] = values
    src = _C.from_numpy_shared(array)  # the tensor over the shared pages; its storage keeps them mapped
    t._set_data(src._view_dtype(_BF16_CODE) if host._dtype == _BF16_CODE else src)
    pass_by_fd(type(t))
    return t
