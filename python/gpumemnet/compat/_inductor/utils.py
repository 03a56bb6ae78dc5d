"""torch._inductor.utils: helpers of the compiler backend that libraries import (torch-optimi). gpumemnet has no
Triton kernels to map types for."""

__all__ = ["triton_type_to_torch"]


def triton_type_to_torch(dtype):
    raise NotImplementedError("torch._inductor.utils.triton_type_to_torch: gpumemnet has no Triton kernels")
