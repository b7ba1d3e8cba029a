/* The CUDA column of the operator table: DT_CUDA_KERNEL(ENUM, kernel) for each row that runs on
 * "cuda".  dt_cuda_<name> are this folder's kernels; the dt_cpu_<name> ones are device-neutral
 * CPU kernels (views, and copies through the tensor layer, which hands strided copies to the
 * device).  A row not listed has no CUDA kernel: tests/spec/op_table_spec.lua reports the
 * coverage and checks the missing rows against its list.  Read by cuda_kernel_table.c (CUDA builds)
 * and coverage.c (every build). */

/* device-neutral */
DT_CUDA_KERNEL(CLONE, dt_cpu_clone)
DT_CUDA_KERNEL(TO, dt_cpu_to)
DT_CUDA_KERNEL(CONTIGUOUS, dt_cpu_contiguous)
DT_CUDA_KERNEL(COPY_, dt_cpu_copy_)
DT_CUDA_KERNEL(VIEW, dt_cpu_view)
DT_CUDA_KERNEL(RESHAPE, dt_cpu_reshape)
DT_CUDA_KERNEL(TRANSPOSE, dt_cpu_transpose)
DT_CUDA_KERNEL(PERMUTE, dt_cpu_permute)
DT_CUDA_KERNEL(NARROW, dt_cpu_narrow)
DT_CUDA_KERNEL(SLICE, dt_cpu_slice)
DT_CUDA_KERNEL(SELECT, dt_cpu_select)
DT_CUDA_KERNEL(UNSQUEEZE, dt_cpu_unsqueeze)
DT_CUDA_KERNEL(SQUEEZE, dt_cpu_squeeze)
DT_CUDA_KERNEL(EXPAND, dt_cpu_expand)
DT_CUDA_KERNEL(FLATTEN, dt_cpu_flatten)
DT_CUDA_KERNEL(CAT, dt_cpu_cat)
DT_CUDA_KERNEL(STACK, dt_cpu_stack)

/* fills (ops_pointwise.c; the factories run on the host and their tensors are moved) */
DT_CUDA_KERNEL(FILL_, dt_cuda_fill_)
DT_CUDA_KERNEL(ZERO_, dt_cuda_zero_)

/* elementwise (ops_pointwise.c -> pointwise_kernel.cu) */
DT_CUDA_KERNEL(NEG, dt_cuda_neg)
DT_CUDA_KERNEL(ABS, dt_cuda_abs)
DT_CUDA_KERNEL(EXP, dt_cuda_exp)
DT_CUDA_KERNEL(LOG, dt_cuda_log)
DT_CUDA_KERNEL(SQRT, dt_cuda_sqrt)
DT_CUDA_KERNEL(RSQRT, dt_cuda_rsqrt)
DT_CUDA_KERNEL(TANH, dt_cuda_tanh)
DT_CUDA_KERNEL(SIGMOID, dt_cuda_sigmoid)
DT_CUDA_KERNEL(RELU, dt_cuda_relu)
DT_CUDA_KERNEL(GELU, dt_cuda_gelu)
DT_CUDA_KERNEL(SILU, dt_cuda_silu)
DT_CUDA_KERNEL(SIN, dt_cuda_sin)
DT_CUDA_KERNEL(COS, dt_cuda_cos)
DT_CUDA_KERNEL(FLOOR, dt_cuda_floor)
DT_CUDA_KERNEL(CEIL, dt_cuda_ceil)
DT_CUDA_KERNEL(TRUNC, dt_cuda_trunc)
DT_CUDA_KERNEL(SIGN, dt_cuda_sign)
DT_CUDA_KERNEL(ERF, dt_cuda_erf)
DT_CUDA_KERNEL(ISNAN, dt_cuda_isnan)
DT_CUDA_KERNEL(ISINF, dt_cuda_isinf)
DT_CUDA_KERNEL(ISFINITE, dt_cuda_isfinite)
DT_CUDA_KERNEL(ADD, dt_cuda_add)
DT_CUDA_KERNEL(SUB, dt_cuda_sub)
DT_CUDA_KERNEL(MUL, dt_cuda_mul)
DT_CUDA_KERNEL(DIV, dt_cuda_div)
DT_CUDA_KERNEL(EQ, dt_cuda_eq)
DT_CUDA_KERNEL(NE, dt_cuda_ne)
DT_CUDA_KERNEL(LT, dt_cuda_lt)
DT_CUDA_KERNEL(LE, dt_cuda_le)
DT_CUDA_KERNEL(GT, dt_cuda_gt)
DT_CUDA_KERNEL(GE, dt_cuda_ge)
DT_CUDA_KERNEL(ADD_, dt_cuda_add_)
DT_CUDA_KERNEL(MUL_, dt_cuda_mul_)

/* reductions and softmax (ops_reduce.c -> reduce_kernel.cu, softmax_kernel.cu) */
DT_CUDA_KERNEL(SUM, dt_cuda_sum)
DT_CUDA_KERNEL(MEAN, dt_cuda_mean)
DT_CUDA_KERNEL(PROD, dt_cuda_prod)
DT_CUDA_KERNEL(AMAX, dt_cuda_amax)
DT_CUDA_KERNEL(AMIN, dt_cuda_amin)
DT_CUDA_KERNEL(SOFTMAX, dt_cuda_softmax)
DT_CUDA_KERNEL(LOG_SOFTMAX, dt_cuda_log_softmax)

/* the matmul family (ops_linalg.c: cuBLAS) */
DT_CUDA_KERNEL(MATMUL, dt_cuda_matmul)
DT_CUDA_KERNEL(MM, dt_cuda_mm)
DT_CUDA_KERNEL(BMM, dt_cuda_bmm)
DT_CUDA_KERNEL(ADDMM, dt_cuda_addmm)

/* nn (ops_nn.c -> nn_kernel.cu) */
DT_CUDA_KERNEL(EMBEDDING, dt_cuda_embedding)
DT_CUDA_KERNEL(LAYER_NORM, dt_cuda_layer_norm)
DT_CUDA_KERNEL(RMS_NORM, dt_cuda_rms_norm)

/* random (ops_random.c -> random_kernel.cu): the CPU generator's bits */
DT_CUDA_KERNEL(UNIFORM_, dt_cuda_uniform_)
