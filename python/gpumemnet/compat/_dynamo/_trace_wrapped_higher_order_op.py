"""torch._dynamo._trace_wrapped_higher_order_op: TransformGetItemToIndex, the mode under which PyTorch's compiler
turns tensor indexing into index() calls (Hugging Face's masking utilities enter it around vmap'ed mask functions).
Indexing needs no transform here, so entering it changes nothing."""


class TransformGetItemToIndex:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
