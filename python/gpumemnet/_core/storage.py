"""Tensor.untyped_storage() and Tensor.storage(): the memory under a tensor, as the libraries that ask for it use it
(safetensors.torch finds tensors that share memory by storage pointer and size). A storage here is a read-only
description of the tensor's block (its start, its size, its device) that keeps the tensor alive; gpumemnet's
storages cannot be resized, filled or made on their own."""
import warnings

import numpy as np

from .. import _C
from .dtype import device_of

_U8 = 6


class UntypedStorage:
    def __init__(self, source=0, *, device=None, _bytes=None):
        """UntypedStorage(n) is n new bytes, UntypedStorage([ints]) those bytes, as PyTorch's; Tensor.untyped_storage()
        passes the tensor (its whole storage: a view of its bytes keeps the memory alive, as PyTorch's storage does),
        and slicing a storage exactly the byte tensor `_bytes`."""
        if _bytes is None:
            if isinstance(source, _C.TensorBase):
                whole = source._as_strided((source._storage_nbytes // source.element_size(),), (1,), 0)
                _bytes = whole if whole._dtype == _U8 else whole._view_dtype(_U8)
            elif isinstance(source, int) and not isinstance(source, bool):
                _bytes = _C.empty((source,), _U8, "cpu" if device is None else str(device))
            elif isinstance(source, (list, tuple)) and all(isinstance(v, int) for v in source):
                _bytes = _C.from_numpy(np.asarray(source, dtype=np.uint8), None, "cpu" if device is None else
                                       str(device))
            else:
                raise RuntimeError(f"torch.UntypedStorage(): expected a number of bytes or a sequence of ints, got "
                                   f"{type(source).__name__}")
        self._data = _bytes  # the storage as a 1-D uint8 tensor over the same memory

    @classmethod
    def from_file(cls, filename, shared=False, nbytes=0):
        """The first nbytes of a file (all of it for 0), read into memory (PyTorch maps it; safetensors.torch
        loads through here). shared=True, which writes back to the file, is not supported."""
        if shared:
            raise NotImplementedError("UntypedStorage.from_file(shared=True): gpumemnet reads the file into its own "
                                      "memory; writes would not reach the file")
        try:
            data = np.fromfile(filename, dtype=np.uint8, count=nbytes if nbytes else -1)
        except OSError as e:
            raise RuntimeError(f"unable to open file <{filename}> in read-only mode: {e.strerror} ({e.errno})") from e
        if nbytes and data.size < nbytes:
            raise RuntimeError(f"from_file: {filename} has {data.size} bytes, fewer than the {nbytes} asked for")
        return cls(_C.from_numpy(data, None, "cpu"))

    def untyped(self):
        return self

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return UntypedStorage(_bytes=self._data[idx])
        return int(self._data[idx])

    def data_ptr(self):
        return self._data.data_ptr()

    def nbytes(self):
        return self._data.numel()

    def size(self):
        return self.nbytes()

    def __len__(self):
        return self.nbytes()

    def __sizeof__(self):  # sys.getsizeof counts the bytes held, as PyTorch's (torchinfo sums inputs with it)
        return object.__sizeof__(self) + self.nbytes()

    def element_size(self):
        return 1

    @property
    def device(self):
        return device_of(self._data._device)

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    def __eq__(self, other):  # two tensors' storages compare equal when they are the same memory
        return isinstance(other, UntypedStorage) and (self.data_ptr(), self.nbytes(), str(self.device)) == \
            (other.data_ptr(), other.nbytes(), str(other.device))

    def __hash__(self):
        return hash((self.data_ptr(), self.nbytes(), str(self.device)))

    def __repr__(self):
        return f"gpumemnet.UntypedStorage(nbytes={self.nbytes()}, device={self.device})"


class TypedStorage(UntypedStorage):
    """Tensor.storage(): the same memory counted in elements of the tensor's dtype (deprecated in PyTorch)."""

    def __init__(self, tensor):
        if not isinstance(tensor, _C.TensorBase):
            raise TypeError(f"new(): invalid data type '{type(tensor).__name__}'")
        warnings.warn("TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the "
                      "only storage class. This should only matter to you if you are using storages directly.  To "
                      "access UntypedStorage directly, use tensor.untyped_storage() instead of tensor.storage()",
                      UserWarning, stacklevel=3)
        super().__init__(tensor)
        self.dtype = tensor.dtype

    def element_size(self):
        return self.dtype.itemsize

    def size(self):
        return self.nbytes() // self.element_size()

    def __len__(self):
        return self.size()

    def untyped(self):
        return UntypedStorage(_bytes=self._data)

    def _elements(self):
        """The memory as a 1-D tensor of the storage's dtype."""
        return self._data._view_dtype(self.dtype.code)

    def __getitem__(self, idx):  # in elements, as PyTorch's (the byte indexing of UntypedStorage gave raw bytes)
        e = self._elements()[idx]
        return e.tolist() if e.ndim == 0 else e.clone()

    def __iter__(self):
        return iter(self._elements().tolist())

    def tolist(self):
        return self._elements().tolist()
