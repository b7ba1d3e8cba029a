-- The rows of the operator table (src/ops/op_list.h) without a CUDA kernel: the gap of the CUDA
-- column (src/kernels/cuda/kernel_list.h), kept explicit so that it is visible and only shrinks.
-- tests/spec/op_table_spec.lua fails when this list and the kernel list disagree, in every build
-- (with or without CUDA): adding a CUDA kernel means deleting its name here.
-- Factories (empty full arange eye and the random ones) run on the host; their tensors move.
return {
  "empty", "full", "arange", "eye", "clamp", "hardtanh", "leaky_relu", "pow", "remainder",
  "masked_fill", "equal", "allclose", "where", "max", "min", "argmax", "argmin", "var", "std",
  "norm", "index_put_", "index_select", "index_add",
  "cross_entropy", "scaled_dot_product_attention", "rand", "randn", "randint",
  "normal_", "bernoulli", "dropout", "dropout_backward", "randperm", "multinomial",
  "gather", "scatter", "scatter_add", "sort", "topk", "flip", "roll", "repeat", "tril", "triu",
  "diag", "round", "nan_to_num", "lerp", "addcmul",
  "addcdiv", "masked_fill_", "logsumexp", "all", "any", "cumsum", "cumprod", "var_mean",
  "gelu_backward", "layer_norm_backward", "adam_step_", "cross_entropy_backward", "sdpa_backward",
  "ids_to_zero_based", "softmax_backward", "log_softmax_backward",
}
