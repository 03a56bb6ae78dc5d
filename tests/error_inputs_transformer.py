"""Error cases of nn/modules/transformer.py (the Transformer layers): B(...) is run against PyTorch too
(error_inputs.py explains the table). EXEMPT: public callables with no bad input (test_error_coverage.py): none."""
from error_inputs import B, z


LAYERS = [
    B("TransformerEncoderLayer d_model not divisible by nhead", lambda d, l: l.nn.TransformerEncoderLayer(
      6, 4, 8, device=d), AssertionError, r"embed_dim must be divisible by num_heads"),
    B("TransformerEncoderLayer unknown activation", lambda d, l: l.nn.TransformerEncoderLayer(
      4, 2, 8, activation="tanh", device=d), RuntimeError, r"activation should be relu/gelu, not tanh"),
    B("TransformerEncoderLayer rank-4 input", lambda d, l: l.nn.TransformerEncoderLayer(4, 2, 8, device=d)(
      z(d, l, 3, 1, 1, 4)), AssertionError,
      r"query should be unbatched 2D or batched 3D tensor but received 4-D query tensor"),
    B("TransformerEncoderLayer int64 src_mask", lambda d, l: l.nn.TransformerEncoderLayer(4, 2, 8, device=d)(
      z(d, l, 3, 1, 4), src_mask=z(d, l, 3, 3, dtype="int64")), AssertionError,
      r"only bool and floating types of src_mask are supported"),
    B("TransformerDecoderLayer unknown activation", lambda d, l: l.nn.TransformerDecoderLayer(
      4, 2, 8, activation="sigmoid", device=d), RuntimeError, r"activation should be relu/gelu, not sigmoid"),
    B("TransformerDecoderLayer int64 memory_key_padding_mask", lambda d, l: l.nn.TransformerDecoderLayer(
      4, 2, 8, device=d)(z(d, l, 2, 1, 4), z(d, l, 3, 1, 4), memory_key_padding_mask=z(d, l, 1, 3,
      dtype="int64")), AssertionError, r"only bool and floating types of key_padding_mask are supported"),
    B("TransformerEncoder int64 mask", lambda d, l: l.nn.TransformerEncoder(l.nn.TransformerEncoderLayer(
      4, 2, 8, device=d), 1, enable_nested_tensor=False)(z(d, l, 3, 1, 4), mask=z(d, l, 3, 3, dtype="int64")),
      AssertionError, r"only bool and floating types of mask are supported"),
    B("TransformerEncoder is_causal without a mask", lambda d, l: l.nn.TransformerEncoder(
      l.nn.TransformerEncoderLayer(4, 2, 8, device=d), 1, enable_nested_tensor=False)(z(d, l, 3, 1, 4),
      is_causal=True), RuntimeError, r"(?i)need attn_mask if specifying the is_causal hint"),
    B("TransformerDecoder int64 tgt_mask", lambda d, l: l.nn.TransformerDecoder(l.nn.TransformerDecoderLayer(
      4, 2, 8, device=d), 1)(z(d, l, 2, 1, 4), z(d, l, 3, 1, 4), tgt_mask=z(d, l, 2, 2, dtype="int64")),
      RuntimeError, r"value cannot be converted to type int64_t without overflow"),
    B("TransformerDecoder int64 memory_mask", lambda d, l: l.nn.TransformerDecoder(l.nn.TransformerDecoderLayer(
      4, 2, 8, device=d), 1)(z(d, l, 2, 1, 4), z(d, l, 3, 1, 4), memory_mask=z(d, l, 2, 3, dtype="int64")),
      AssertionError, r"only bool and floating types of attn_mask are supported"),
    B("Transformer d_model not divisible by nhead", lambda d, l: l.nn.Transformer(6, 4, 1, 1, 8, device=d),
      AssertionError, r"embed_dim must be divisible by num_heads"),
    B("Transformer src and tgt batch sizes differ", lambda d, l: l.nn.Transformer(4, 2, 1, 1, 8, device=d)(
      z(d, l, 3, 2, 4), z(d, l, 2, 3, 4)), RuntimeError, r"the batch number of src and tgt must be equal"),
    B("Transformer batch_first src and tgt batch sizes differ", lambda d, l: l.nn.Transformer(
      4, 2, 1, 1, 8, batch_first=True, device=d)(z(d, l, 2, 3, 4), z(d, l, 3, 2, 4)), RuntimeError,
      r"the batch number of src and tgt must be equal"),
    B("Transformer tgt features differ from d_model", lambda d, l: l.nn.Transformer(
      4, 2, 1, 1, 8, batch_first=True, device=d)(
      z(d, l, 2, 3, 4), z(d, l, 2, 2, 6)), RuntimeError,
      r"the feature number of src and tgt must be equal to d_model"),
]

CASES = LAYERS
EXEMPT = {}
