"""torch.utils.data._utils.collate: PyTorch's extensible `collate(batch, collate_fn_map=...)`, its per-type
functions and default_collate_fn_map, for code that builds its own collate from them or registers a type in the map
(default_collate reads it, as PyTorch's). They live in utils/data/_collate.py, the same objects as gm.utils.data's."""
from .._collate import (collate, collate_float_fn, collate_int_fn, collate_numpy_array_fn,  # noqa: F401
                        collate_numpy_scalar_fn, collate_str_fn, collate_tensor_fn, default_collate,
                        default_collate_err_msg_format, default_collate_fn_map, default_convert,
                        np_str_obj_array_pattern)

__all__ = ["collate", "default_collate", "default_convert", "default_collate_fn_map", "collate_tensor_fn",
           "collate_numpy_array_fn", "collate_numpy_scalar_fn", "collate_float_fn", "collate_int_fn",
           "collate_str_fn", "default_collate_err_msg_format", "np_str_obj_array_pattern"]
