"""torch.nested: nested (ragged) tensors. gpumemnet has none: the names are here for the modules that import them
(vit-pytorch's NaViT variants), and making one raises; pad the sequences (torch.nn.utils.rnn.pad_sequence) instead."""

__all__ = ["nested_tensor", "as_nested_tensor", "to_padded_tensor", "narrow"]


def _refuse(name):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"torch.nested.{name}: gpumemnet has no nested tensors; pad the sequences "
                                  f"(torch.nn.utils.rnn.pad_sequence) and mask instead")
    fn.__name__ = name
    return fn


nested_tensor = _refuse("nested_tensor")
as_nested_tensor = _refuse("as_nested_tensor")
to_padded_tensor = _refuse("to_padded_tensor")
narrow = _refuse("narrow")
