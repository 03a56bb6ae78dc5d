/* csrc/ops_nnops.c — the nn op family: activations, dropout, batch/group norm, softmax, losses (forward and
 * backward). This file holds the family's interface (below) and its method table; the ops live in
 * ops_activation.c (activations, softmax), ops_dropout.c, ops_norm.c (batch and group norm), ops_loss.c and
 * ops_ctc.c, over the helpers of ops_nn_internal.h.
 *
 * Each _C function validates its arguments and infers output shapes (the same code for every device),
 * allocates its outputs with gm_empty (current category) and any scratch as workspace (freed before returning),
 * then runs the CPU kernel (kernels/cpu/{activation,dropout,norm,softmax,loss}.c). On meta everything but the
 * kernel happens, including contiguous copies and the generator's advance for dropout, so memory estimates and
 * the RNG state after a rehearsal match the real run. On cuda the same outputs are allocated and the kernels of
 * kernels/cuda/{activation,dropout,norm,softmax,loss}.cu run on the device's stream. One difference in memory:
 * a reduction across many blocks on cuda takes a small workspace for the blocks' partial sums, freed before the
 * op returns: batch norm's per-channel sums (training, and backward with weight/bias gradients: 16 bytes per
 * block, a few KiB), and the losses that reduce the whole input (the class losses always, forward and backward:
 * the forward returns its weight sum to Python and both check the targets; mse/l1/bce with reduction mean/sum:
 * CUDA_LOSS_SCRATCH_BYTES, ~12 KiB). The CPU kernels sum within one thread and need none. The class losses also
 * wait for the stream once per call, to read that weight sum and the first out-of-range target back.
 * When meta stands for CUDA (csrc/meta_target.h: gm.memory.estimate(device="cuda")), an op on meta allocates and
 * frees that same scratch at the same point (sizes from kernels/cuda/scratch_sizes.h), so the estimate is the
 * CUDA run's bytes; with the default target (the CPU) meta allocates exactly what the CPU does.
 *
 * Interface (callers: python/gpumemnet/nn/_functional_nn.py, and nn/_rnn_fused.py for the recurrent cells):
 *   activation(op, x, alpha=0.0, out=None, beta=0.0) -> out   ops: RELU=0 LEAKY_RELU=1 SIGMOID=2 TANH=3 GELU=4
 *   activation_backward(op, grad, saved, alpha=0.0, into_grad=False, beta=0.0)   GELU_TANH=5 SILU=6 HARDSWISH=7
 *       HARDSIGMOID=8 MISH=9 HARDTANH=10 ELU=11 SOFTPLUS=12 (kernels/activation_ops.h; alpha, beta: the op's
 *       parameters, kernels/cpu/activation.h); out=x is the in-place form
 *   dropout(x, p, channelwise=False, inplace=False) -> (out, bool mask)   mask (x.shape) or (x.shape[:-2])
 *   dropout_backward(grad, mask, p, into_grad=False)
 *   batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps) -> (out, mean, invstd)
 *   batch_norm_backward(grad, x, weight, mean, invstd, training, need_input, need_weight, need_bias,
 *                       param_dtype=None, into_grad=False) -> (dx | None, dweight | None, dbias | None)
 *   group_norm(x, num_groups, weight=None, bias=None, eps=1e-5) -> (out, mean, rstd)    mean/rstd (N, G)
 *   group_norm_backward(grad, x, weight, mean, rstd, num_groups, need_input, need_weight, need_bias,
 *                       param_dtype=None, into_grad=False) -> (dx | None, dweight | None, dbias | None)
 *     (layer norm runs as group_norm of an (R, M) view with one group, instance norm with num_groups = C)
 *   softmax(x, dim, log=False), softmax_backward(grad, out, dim, log=False, into_grad=False)
 *   prelu(x, weight) -> out; prelu_backward(grad, x, weight, need_input=True, need_weight=True, into_grad=False)
 *       -> (dx | None, dweight | None)     weight: 1 or x.shape[1] elements (channel dim 1); with the weight's
 *       gradient, a workspace of partial sums (prelu_outer_chunks(outer, C) * C float64s, kernels/activation_ops.h)
 *       sized from the shape, so the same on every device
 *   cross_entropy(x, target, weight, ignore_index, reduction, label_smoothing) -> (loss, lse, wsum)
 *   cross_entropy_backward(grad, x, target, weight, lse, ignore_index, reduction, label_smoothing, wsum)
 *   nll_loss(x, target, weight, ignore_index, reduction) -> (loss, wsum)
 *   nll_loss_backward(grad, target, weight, ignore_index, reduction, wsum, shape, dtype) -> dx
 *   pointwise_loss(op, x, target, reduction, param=0), pointwise_loss_backward(op, grad, x, target, reduction,
 *                  need_x, need_target, param=0) -> (dx | None, dtarget | None)
 *                  ops: MSE=0 L1=1 SMOOTH_L1=2 (param beta) HUBER=3 (delta) BCE=4 KL_DIV=5 (log_target)
 *   bce_with_logits(x, target, weight, pos_weight, reduction)
 *   bce_with_logits_backward(grad, x, target, weight, pos_weight, reduction, need_x, need_target)
 *   ctc_loss(log_probs, targets, input_lengths, target_lengths, blank) -> (nll, log_alpha)   (ops_ctc.c: CPU and
 *       meta only; targets (N, L) padded, lengths (N) int64 on log_probs's device)
 *   ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, log_alpha, nll, blank,
 *                     zero_infinity) -> d log_probs (T, N, C); a backward scratch of N * (4L + 2 + C) float64s
 *   lstm_cell(gi, gh, c) -> (h, c_new, act)        the fused recurrent cells (ops_rnn_cell.c, kernels/rnn_cell.h)
 *   lstm_cell_backward(dh, dc, act, c, c_new) -> (d_gates, dc_prev)
 *   gru_cell(gi, gh, h) -> (h_new, ws)
 *   gru_cell_backward(dh, ws, h) -> (d_gi, d_gh, dh_prev)
 * reduction: NONE=0 MEAN=1 SUM=2 (PyTorch's enum).
 * into_grad: the autograd engine hands grad over (nothing else references it: autograd.Function.grad_is_free), so
 * the input gradient is written over it instead of into a new tensor of the same size. Each kernel reads
 * grad[i] before it writes dx[i] (batch norm: per channel, after that channel's sums; softmax: per row, after
 * the row's sum). */
#include "gm.h"
#include "ops_nn_internal.h"

#include "meta_target.h"

/* ---- method table ------------------------------------------------------------------------------------------- */

#define KW(fn) (PyCFunction)(void (*)(void))(fn), METH_VARARGS | METH_KEYWORDS

PyMethodDef gm_nnops_methods[] = {
    {"_set_meta_target", (PyCFunction)(void (*)(void))gm_py_set_meta_target, METH_VARARGS | METH_KEYWORDS,
     "_set_meta_target(target, sm_count=0) -> previous (target, sm_count): what ops on meta allocate for on this "
     "thread, 'cpu' (default), 'cuda:N' (the CUDA kernels' scratch; convolutions take the workspace device N's cuDNN "
     "would) or 'cuda' (no device to ask: convolutions without workspace)."},
    {"_get_meta_target", gm_py_get_meta_target, METH_NOARGS, "_get_meta_target() -> (target, sm_count)."},
    {"activation", KW(gm_py_activation),
     "activation(op, x, alpha=0.0, out=None, beta=0.0): relu/leaky_relu/sigmoid/tanh/gelu/silu/hardswish/"
     "hardsigmoid/mish/hardtanh/elu/softplus."},
    {"activation_backward", KW(gm_py_activation_backward),
     "activation_backward(op, grad, saved, alpha=0.0, into_grad=False, beta=0.0)."},
    {"relu_mask", KW(gm_py_relu_mask),
     "relu_mask(out) -> uint8 (ceil(numel / 8),): bit i set where out[i] is not <= 0 (relu's compact saved form)."},
    {"relu_mask_backward", KW(gm_py_relu_mask_backward),
     "relu_mask_backward(grad, mask, into_grad=False): grad where mask's bit is set, else 0."},
    {"dropout", KW(gm_py_dropout), "dropout(x, p, channelwise=False, inplace=False) -> (out, bool mask)."},
    {"dropout_backward", gm_py_dropout_backward, METH_VARARGS, "dropout_backward(grad, mask, p, into_grad=False)."},
    {"batch_norm", KW(gm_py_batch_norm),
     "batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps) -> (out, mean, invstd)."},
    {"batch_norm_backward", KW(gm_py_batch_norm_backward),
     "batch_norm_backward(grad, x, weight, mean, invstd, training, need_input, need_weight, need_bias, "
     "param_dtype=None, into_grad=False) -> (dx, dweight, dbias)."},
    {"group_norm", KW(gm_py_group_norm),
     "group_norm(x, num_groups, weight=None, bias=None, eps=1e-5) -> (out, mean, rstd): mean/rstd (N, G)."},
    {"group_norm_backward", KW(gm_py_group_norm_backward),
     "group_norm_backward(grad, x, weight, mean, rstd, num_groups, need_input, need_weight, need_bias, "
     "param_dtype=None, into_grad=False) -> (dx, dweight, dbias)."},
    {"softmax", KW(gm_py_softmax), "softmax(x, dim, log=False)."},
    {"softmax_backward", KW(gm_py_softmax_backward), "softmax_backward(grad, out, dim, log=False, into_grad=False)."},
    {"prelu", KW(gm_py_prelu), "prelu(x, weight): x > 0 ? x : weight[channel] * x."},
    {"prelu_backward", KW(gm_py_prelu_backward),
     "prelu_backward(grad, x, weight, need_input=True, need_weight=True, into_grad=False) -> (dx, dweight)."},
    {"cross_entropy", KW(gm_py_cross_entropy),
     "cross_entropy(x, target, weight=None, ignore_index=-100, reduction=1, label_smoothing=0.0) -> "
     "(loss, lse, wsum)."},
    {"cross_entropy_backward", KW(gm_py_cross_entropy_backward),
     "cross_entropy_backward(grad, x, target, weight, lse, ignore_index, reduction, label_smoothing, wsum)."},
    {"nll_loss", KW(gm_py_nll_loss), "nll_loss(x, target, weight=None, ignore_index=-100, reduction=1) -> (loss, wsum)."},
    {"nll_loss_backward", KW(gm_py_nll_loss_backward),
     "nll_loss_backward(grad, target, weight, ignore_index, reduction, wsum, shape, dtype)."},
    {"pointwise_loss", KW(gm_py_pointwise_loss), "pointwise_loss(op, x, target, reduction=1, param=0.0): MSE=0, L1=1, SMOOTH_L1=2 (param beta), "
     "HUBER=3 (param delta), BCE=4, KL_DIV=5 (param log_target)."},
    {"pointwise_loss_backward", KW(gm_py_pointwise_loss_backward),
     "pointwise_loss_backward(op, grad, x, target, reduction, need_x, need_target, param=0.0) -> (dx, dtarget)."},
    {"bce_with_logits", KW(gm_py_bce_with_logits),
     "bce_with_logits(x, target, weight=None, pos_weight=None, reduction=1)."},
    {"bce_with_logits_backward", KW(gm_py_bce_with_logits_backward),
     "bce_with_logits_backward(grad, x, target, weight, pos_weight, reduction, need_x, need_target) -> (dx, dtarget)."},
    {"ctc_loss", KW(gm_py_ctc_loss),
     "ctc_loss(log_probs, targets, input_lengths, target_lengths, blank) -> (nll, log_alpha): on the CPU."},
    {"ctc_loss_backward", KW(gm_py_ctc_loss_backward),
     "ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, log_alpha, nll, blank, "
     "zero_infinity) -> d log_probs."},
    {"lstm_cell", KW(gm_py_lstm_cell), "lstm_cell(gi, gh, c) -> (h, c_new, act): one fused LSTM step."},
    {"lstm_cell_backward", KW(gm_py_lstm_cell_backward),
     "lstm_cell_backward(dh, dc, act, c, c_new) -> (d_gates, dc_prev)."},
    {"gru_cell", KW(gm_py_gru_cell), "gru_cell(gi, gh, h) -> (h_new, ws): one fused GRU step."},
    {"gru_cell_backward", KW(gm_py_gru_cell_backward),
     "gru_cell_backward(dh, ws, h) -> (d_gi, d_gh, dh_prev)."},
    {NULL, NULL, 0, NULL},
};
