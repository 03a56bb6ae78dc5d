"""PyTorch's Transformer layers (nn.Transformer, TransformerEncoder / Decoder and their layers), built from
MultiheadAttention, Linear, LayerNorm and Dropout with PyTorch's constructor arguments, submodule and parameter
names (a PyTorch state_dict loads unchanged), masks (bool: True is masked out; float: added), batch_first and
unbatched inputs; nn imports __all__.

PyTorch's inference "fast path" (eval mode with autograd off or nothing requiring grad: a fused encoder-layer
kernel and, in TransformerEncoder with a src_key_padding_mask, nested tensors) is an optimisation; here the
ordinary ops compute the same values. Its visible effect is kept: where PyTorch's encoder turns the padded batch
into a nested tensor, the padded positions come out as zeros before the final norm, here too. Not reproduced:
nested tensor inputs (gpumemnet has none); the fused kernel reading a float mask as a bool one (nonzero = masked
out, so additive masks other than 0 / -inf give other values or NaN there: pytorch/pytorch#118628), here a
float mask is always added; and a query whose keys are all masked out, which PyTorch's attention answers with
zeros (its fused kernel with NaN), as gpumemnet's scaled_dot_product_attention does everywhere. On meta, which has no
values (PyTorch fails there), a mask of the causal mask's shape counts as causal and key padding as left-aligned,
so that a meta run takes the CPU's path and allocates the same bytes."""
import copy
import warnings

from ..._core.autocast import is_autocast_enabled
from ..._core.autograd import is_grad_enabled
from ..._core.creation import arange, full
from ..._core.dtype import bool_
from .. import _functional_extra as FX
from .. import functional as F
from .. import init
from .activation import GELU, ReLU
from .container import ModuleList
from .dropout import Dropout
from .extra import MultiheadAttention
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
           "TransformerDecoderLayer"]


def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    """The causal mask: -inf above the diagonal (a position may not attend to later ones), 0 elsewhere."""
    return full((sz, sz), float("-inf"), dtype=dtype, device=device).triu(1)


def _get_seq_len(src, batch_first):
    if src.dim() == 2:  # unbatched (S, E)
        return src.size(0)
    return src.size(1 if batch_first else 0)


def _detect_is_causal_mask(mask, is_causal=None, size=None):
    """is_causal when given; else whether mask equals the causal mask of its size (PyTorch compares with ==, which
    broadcasts, and only a mask of exactly the causal mask's shape counts)."""
    if is_causal is not None or mask is None:
        return is_causal is True
    sz = size if size is not None else mask.size(-2)
    if not mask.dtype.is_floating_point and mask.dtype != bool_:
        # PyTorch builds the causal mask in the mask's dtype, and -inf does not fit an integer one
        c_type = {"int32": "int"}.get(mask.dtype.name, mask.dtype.name + "_t")
        raise RuntimeError(f"value cannot be converted to type {c_type} without overflow")
    if tuple(mask.size()) != (sz, sz):
        return False
    if mask.device.type == "meta":
        # no values to compare (PyTorch fails here on meta): a mask of the causal mask's shape is taken to be
        # one, as it nearly always is, so that an estimate on meta takes the CPU's path
        return True
    causal = _generate_square_subsequent_mask(sz, device=mask.device, dtype=mask.dtype)
    return bool((mask == causal).all())


def _get_clones(module, n):
    # independent copies: every layer starts with the same values but owns its parameters
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _get_activation_fn(activation):
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


class Transformer(Module):
    """The encoder-decoder Transformer of "Attention Is All You Need": an encoder (num_encoder_layers
    TransformerEncoderLayer and a final LayerNorm) and a decoder (num_decoder_layers TransformerDecoderLayer and a
    final LayerNorm), or custom_encoder / custom_decoder. Every parameter of more than one dimension is
    re-initialised Xavier-uniform, as PyTorch does."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation=F.relu, custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        factory = {"device": device, "dtype": dtype}
        super().__init__()
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            encoder_layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                                    layer_norm_eps, batch_first, norm_first, bias, **factory)
            encoder_norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
            self.encoder = TransformerEncoder(encoder_layer, num_encoder_layers, encoder_norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            decoder_layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                                    layer_norm_eps, batch_first, norm_first, bias, **factory)
            decoder_norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
            self.decoder = TransformerDecoder(decoder_layer, num_decoder_layers, decoder_norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        """src (S, N, E) / (N, S, E) with batch_first / (S, E) unbatched, tgt likewise with T: the decoder's
        output for tgt attending to the encoded src, shaped as tgt."""
        # PyTorch's checks, in its order (the batch sizes are compared only for batched input)
        is_batched = src.dim() == 3
        if is_batched and src.size(0 if self.batch_first else 1) != tgt.size(0 if self.batch_first else 1):
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """A (sz, sz) causal mask: -inf above the diagonal, 0.0 elsewhere (dtype: the default float dtype)."""
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer applied in turn, then norm (when given). enable_nested_tensor and
    mask_check keep PyTorch's meaning for which inputs take its nested-tensor path (see the module docstring:
    the values are the same, with zeros at padded positions)."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor  # what was asked for
        self.use_nested_tensor = enable_nested_tensor     # whether it applies: PyTorch's conditions, and warning
        self.mask_check = mask_check
        why_not = _why_not_nested(encoder_layer)
        if enable_nested_tensor and why_not:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False because {why_not}",
                          stacklevel=2)
            self.use_nested_tensor = False

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        """src as in Transformer; mask (S, S) or (N * nhead, S, S); src_key_padding_mask (N, S) or (S,)."""
        src_key_padding_mask = FX._canonical_mask(src_key_padding_mask, "src_key_padding_mask", mask, "mask",
                                                  src.dtype)
        mask = FX._canonical_mask(mask, "mask", None, "", src.dtype)
        first_layer = self.layers[0]
        padded = self._nested_padding(src, mask, src_key_padding_mask, first_layer)
        # On PyTorch's nested path each sequence is computed from its kept tokens alone, which is what a key
        # padding mask over the padded ones gives; the padded positions come back as zeros
        layers_kpm = src_key_padding_mask if padded is None else padded
        is_causal = _detect_is_causal_mask(mask, is_causal, _get_seq_len(src, first_layer.self_attn.batch_first))
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=is_causal, src_key_padding_mask=layers_kpm)
        if padded is not None:
            output = output.masked_fill(padded.unsqueeze(-1), 0.0)
        if self.norm is not None:
            output = self.norm(output)
        return output

    def _nested_padding(self, src, mask, kpm, first_layer):
        """Where PyTorch would take its nested-tensor path, the (N, S) bool mask of the positions it drops (after
        each row's count of kept tokens: PyTorch keeps the first ones); else None."""
        # PyTorch's conditions (torch.is_autocast_enabled() with no argument asks about CUDA; meta stands for the
        # CPU or CUDA here, as in an estimate)
        if (not getattr(self, "use_nested_tensor", False) or first_layer.training or src.dim() != 3 or kpm is None
                or mask is not None or is_autocast_enabled("cuda")
                or src.device.type not in ("cpu", "cuda", "meta")):
            return None
        attn = first_layer.self_attn
        params = (attn.in_proj_weight, attn.in_proj_bias, attn.out_proj.weight, attn.out_proj.bias,
                  first_layer.norm1.weight, first_layer.norm1.bias, first_layer.norm2.weight, first_layer.norm2.bias,
                  first_layer.linear1.weight, first_layer.linear1.bias, first_layer.linear2.weight,
                  first_layer.linear2.bias)
        if is_grad_enabled() and any(t is not None and t.requires_grad for t in (src,) + params):
            return None
        dropped = kpm != 0  # PyTorch's logical_not() test: a float mask keeps exactly its zeros
        kept = dropped.logical_not().sum(1, keepdim=True)
        padded = arange(kpm.size(1), device=kpm.device).unsqueeze(0) >= kept
        if getattr(self, "mask_check", True) and src.device.type != "meta" and not bool((padded == dropped).all()):
            return None  # not left-aligned: PyTorch checks this and takes the ordinary path (meta: no values)
        return padded


def _why_not_nested(layer):
    """PyTorch's reason (its words) for not using nested tensors with this encoder layer, or ''."""
    name = "encoder_layer"
    if not isinstance(layer, TransformerEncoderLayer):
        return f"{name} was not TransformerEncoderLayer"
    if layer.norm_first:
        return f"{name}.norm_first was True"
    if not layer.self_attn.batch_first:
        return f"{name}.self_attn.batch_first was not True(use batch_first for better inference performance)"
    if not layer.self_attn._qkv_same_embed_dim:
        return f"{name}.self_attn._qkv_same_embed_dim was not True"
    if layer.self_attn.in_proj_bias is None:
        return f"{name}.self_attn was passed bias=False"
    if not layer.activation_relu_or_gelu:
        return f"{name}.activation_relu_or_gelu was not True"
    if layer.norm1.eps != layer.norm2.eps:
        return f"{name}.norm1.eps was not equal to {name}.norm2.eps"
    if layer.self_attn.num_heads % 2 == 1:
        return f"{name}.self_attn.num_heads is odd"
    return ""


class TransformerDecoder(Module):
    """num_layers copies of decoder_layer applied in turn to tgt (each attending to memory), then norm."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        seq_len = _get_seq_len(tgt, self.layers[0].self_attn.batch_first)
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len)
        output = tgt
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward network, each with a residual connection and a LayerNorm, after the
    residual sum (norm_first=False, the paper's) or before each block (norm_first=True)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        factory = {"device": device, "dtype": dtype}
        super().__init__()
        # registration order = PyTorch's, so state_dict keys and repr come in the same order
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            **factory)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            activation = _get_activation_fn(activation)
        # PyTorch records whether the activation is one its fused kernel has (1 relu, 2 gelu, 0 other); the
        # encoder's nested-tensor decision reads it
        if activation is F.relu or isinstance(activation, ReLU):
            self.activation_relu_or_gelu = 1
        elif activation is F.gelu or isinstance(activation, GELU):
            self.activation_relu_or_gelu = 2
        else:
            self.activation_relu_or_gelu = 0
        self.activation = activation  # a Module activation is a submodule (in repr), as in PyTorch

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        src_key_padding_mask = FX._canonical_mask(src_key_padding_mask, "src_key_padding_mask", src_mask,
                                                  "src_mask", src.dtype)
        src_mask = FX._canonical_mask(src_mask, "src_mask", None, "", src.dtype)
        x = src
        # Pre-LN vs Post-LN: Fig. 1 of https://arxiv.org/pdf/2002.04745v1.pdf
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        # the position-wise feed-forward network (PyTorch's method name and signature, for subclasses)
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """Self-attention over tgt, attention from tgt to memory (the encoder's output), then a feed-forward network;
    each with a residual connection and a LayerNorm (after the sum, or before each block with norm_first)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        factory = {"device": device, "dtype": dtype}
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias,
                                            **factory)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first,
                                                 bias=bias, **factory)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _get_activation_fn(activation) if isinstance(activation, str) else activation

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        # the masks go to MultiheadAttention as given: it converts bool masks itself (PyTorch's decoder layer
        # does not convert them first, so its mixed-type warnings come from there)
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=is_causal,
                           need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=is_causal, need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))
