/* The operator table, one row per op: the one place an op is registered.
 *   DT_OP(ENUM, name, shape_rule, nout, flags, sharding, backward, "schema")
 * name        Lua-facing name; each device's kernel table has its kernel (the CPU's is
 *             dt_cpu_<name>, src/kernels/cpu/kernel_table.c)
 * shape_rule  dt_shape_<rule> (src/ops/shape_*.c): output dtype and shape from the args
 * nout        number of tensor results
 * flags       DT_OPF_VIEW: the kernel returns a view it creates itself
 *             DT_OPF_INPLACE: writes into in[0], returned as the result
 *             DT_OPF_FACTORY: no tensor inputs
 *             DT_OPF_RANDOM: draws from the generator (DTensors: the tracker region, distributed/rng.c)
 *             DT_OPF_CHECK: raises on bad input values; dead-code elimination keeps it
 * sharding    DT_SHARDING_<family>: which sharding rule the dispatcher asks on DTensors
 *             (src/distributed/sharding_rules, one per family); RANDOM for the DT_OPF_RANDOM
 *             rows (the RNG tracker), LOCAL_ONLY for ops never dispatched on DTensors
 * backward    its backward rule: `name` is dt_backward_name (src/autograd/backward_*.c, gathered
 *             by backward_table.c), `none` for an op with no gradient (integer or bool results,
 *             factories, random draws); the op-table spec checks every named rule against
 *             finite differences
 * schema      documentation of the arguments (ints/scalars in dt_op_args order)
 * Adding an op: a row here, its kernel(s), its shape rule (often a shared one), its family's
 * sharding rule, its binding, its test.  tests/c/test_op_table.c checks the rows. */

/* ---- factories ---- */
DT_OP(EMPTY, empty, factory, 1, DT_OPF_FACTORY, LOCAL_ONLY, none, "empty(ints shape, dtype) -> Tensor")
DT_OP(FULL, full, factory, 1, DT_OPF_FACTORY, LOCAL_ONLY, none, "full(ints shape, scalar value, dtype; DT_ARG_SCALAR_INT: exact value in ints[DT_MAX_DIMS]) -> Tensor")
DT_OP(ARANGE, arange, arange, 1, DT_OPF_FACTORY, LOCAL_ONLY, none, "arange(scalar start, stop, step, dtype; flags DT_ARG_SCALAR_INT: exact ints[0..2] instead) -> Tensor")
DT_OP(EYE, eye, eye, 1, DT_OPF_FACTORY, LOCAL_ONLY, none, "eye(int n, int m, dtype) -> Tensor")

/* ---- copies and casts ---- */
DT_OP(CLONE, clone, same, 1, 0, POINTWISE, clone, "clone(Tensor x) -> Tensor")
DT_OP(TO, to, cast, 1, DT_OPF_VIEW, POINTWISE, to, "to(Tensor x, dtype) -> Tensor (x itself when the dtype matches, as torch)")
DT_OP(CONTIGUOUS, contiguous, same, 1, DT_OPF_VIEW, POINTWISE, contiguous, "contiguous(Tensor x) -> Tensor (x itself when contiguous)")
DT_OP(COPY_, copy_, inplace, 1, DT_OPF_INPLACE, POINTWISE, copy_, "copy_(Tensor self, Tensor src) -> self (src broadcast, cast)")
DT_OP(FILL_, fill_, inplace, 1, DT_OPF_INPLACE, POINTWISE, fill_, "fill_(Tensor self, scalar v; DT_ARG_SCALAR_INT: exact value in ints[0]) -> self")
DT_OP(ZERO_, zero_, inplace, 1, DT_OPF_INPLACE, POINTWISE, zero_, "zero_(Tensor self) -> self")

/* ---- pointwise unary ---- */
DT_OP(NEG, neg, unary, 1, 0, POINTWISE, neg, "neg(Tensor x) -> Tensor")
DT_OP(ABS, abs, unary, 1, 0, POINTWISE, abs, "abs(Tensor x) -> Tensor")
DT_OP(EXP, exp, unary_float, 1, 0, POINTWISE, exp, "exp(Tensor x) -> Tensor (ints promote to float32)")
DT_OP(LOG, log, unary_float, 1, 0, POINTWISE, log, "log(Tensor x) -> Tensor")
DT_OP(SQRT, sqrt, unary_float, 1, 0, POINTWISE, sqrt, "sqrt(Tensor x) -> Tensor")
DT_OP(RSQRT, rsqrt, unary_float, 1, 0, POINTWISE, rsqrt, "rsqrt(Tensor x) -> Tensor")
DT_OP(TANH, tanh, unary_float, 1, 0, POINTWISE, tanh, "tanh(Tensor x) -> Tensor")
DT_OP(SIGMOID, sigmoid, unary_float, 1, 0, POINTWISE, sigmoid, "sigmoid(Tensor x) -> Tensor")
DT_OP(RELU, relu, unary, 1, 0, POINTWISE, relu, "relu(Tensor x) -> Tensor")
DT_OP(GELU, gelu, unary_float, 1, 0, POINTWISE, gelu, "gelu(Tensor x; flags&1: tanh approximation) -> Tensor")
DT_OP(SILU, silu, unary_float, 1, 0, POINTWISE, silu, "silu(Tensor x) -> Tensor")
DT_OP(SIN, sin, unary_float, 1, 0, POINTWISE, sin, "sin(Tensor x) -> Tensor")
DT_OP(COS, cos, unary_float, 1, 0, POINTWISE, cos, "cos(Tensor x) -> Tensor")
DT_OP(CLAMP, clamp, unary, 1, 0, POINTWISE, clamp, "clamp(Tensor x, scalar min?, scalar max?; DT_ARG_HAS_MIN/MAX; DT_ARG_SCALAR_INT: both bounds integers, also in ints[0], ints[1]) -> Tensor")
DT_OP(HARDTANH, hardtanh, unary_float_only, 1, 0, POINTWISE, hardtanh, "hardtanh(Tensor x (floating), scalar[0] min_val, scalar[1] max_val) -> Tensor")
DT_OP(LEAKY_RELU, leaky_relu, unary_float_only, 1, 0, POINTWISE, leaky_relu, "leaky_relu(Tensor x (floating), scalar[0] negative_slope) -> Tensor")

/* ---- pointwise binary (tensor-tensor, or tensor-scalar with DT_ARG_SCALAR: nin 1, the number in
 *      scalar[0], and with DT_ARG_SCALAR_INT also exactly in ints[0]) ---- */
DT_OP(ADD, add, binary, 1, 0, POINTWISE, add, "add(Tensor a, Tensor|scalar b, scalar alpha=1 in scalar[1] when nscalar 2; DT_ARG_ALPHA_FLOAT) -> Tensor")
DT_OP(SUB, sub, binary, 1, 0, POINTWISE, sub, "sub(Tensor a, Tensor|scalar b, scalar alpha=1 in scalar[1] when nscalar 2; DT_ARG_ALPHA_FLOAT) -> Tensor")
DT_OP(MUL, mul, binary, 1, 0, POINTWISE, mul, "mul(Tensor a, Tensor|scalar b) -> Tensor")
DT_OP(DIV, div, binary_float, 1, 0, POINTWISE, div, "div(Tensor a, Tensor|scalar b) -> Tensor (true division)")
DT_OP(POW, pow, binary, 1, 0, POINTWISE, pow, "pow(Tensor a, Tensor|scalar b) -> Tensor")
DT_OP(REMAINDER, remainder, binary, 1, 0, POINTWISE, remainder, "remainder(Tensor a, Tensor|scalar b) -> Tensor (sign of divisor, like Lua's %)")
DT_OP(EQ, eq, compare, 1, 0, POINTWISE, none, "eq(Tensor a, Tensor|scalar b) -> Tensor(bool)")
DT_OP(NE, ne, compare, 1, 0, POINTWISE, none, "ne(Tensor a, Tensor|scalar b) -> Tensor(bool)")
DT_OP(LT, lt, compare, 1, 0, POINTWISE, none, "lt(Tensor a, Tensor|scalar b) -> Tensor(bool)")
DT_OP(LE, le, compare, 1, 0, POINTWISE, none, "le(Tensor a, Tensor|scalar b) -> Tensor(bool)")
DT_OP(GT, gt, compare, 1, 0, POINTWISE, none, "gt(Tensor a, Tensor|scalar b) -> Tensor(bool)")
DT_OP(GE, ge, compare, 1, 0, POINTWISE, none, "ge(Tensor a, Tensor|scalar b) -> Tensor(bool)")
DT_OP(ADD_, add_, inplace, 1, DT_OPF_INPLACE, POINTWISE, add_, "add_(Tensor self, Tensor|scalar b, scalar alpha) -> self")
DT_OP(MUL_, mul_, inplace, 1, DT_OPF_INPLACE, POINTWISE, mul_, "mul_(Tensor self, Tensor|scalar b) -> self")
DT_OP(MASKED_FILL, masked_fill, masked_fill, 1, 0, POINTWISE, masked_fill, "masked_fill(Tensor x, Tensor(bool) mask (broadcast to x), scalar[0] value; DT_ARG_SCALAR_INT: exact in ints[0]) -> Tensor")
DT_OP(EQUAL, equal, compare_all, 1, 0, LOCAL_ONLY, none, "equal(Tensor a, Tensor b) -> Tensor(bool) 0-d: the same shape and values (after promotion; NaN unequal)")
DT_OP(ALLCLOSE, allclose, compare_all, 1, 0, LOCAL_ONLY, none, "allclose(Tensor a, Tensor b, scalar[0] rtol, scalar[1] atol; flags DT_ARG_EQUAL_NAN) -> Tensor(bool) 0-d: every |a - b| <= atol + rtol |b|, broadcast")
DT_OP(WHERE, where, where, 1, 0, POINTWISE, where, "where(Tensor cond (bool), Tensor|scalar a, Tensor|scalar b; a NULL in[1]/in[2] is scalar[0]/scalar[1], ints[0]/ints[1] with DT_ARG_WHERE_A_INT/B_INT) -> Tensor")

/* ---- reductions (ints = dims to reduce, or DT_ARG_ALL_DIMS) ---- */
DT_OP(SUM, sum, reduce, 1, 0, REDUCE, sum, "sum(Tensor x, ints dims, keepdim; dtype when has_dtype) -> Tensor (ints/bool -> int64)")
DT_OP(MEAN, mean, reduce_float, 1, 0, REDUCE, mean, "mean(Tensor x, ints dims, keepdim) -> Tensor")
DT_OP(PROD, prod, reduce, 1, 0, REDUCE, prod, "prod(Tensor x, ints dims, keepdim; dtype when has_dtype) -> Tensor (ints/bool -> int64)")
DT_OP(AMAX, amax, reduce_keep_dtype, 1, 0, REDUCE, amax, "amax(Tensor x, ints dims, keepdim) -> Tensor")
DT_OP(AMIN, amin, reduce_keep_dtype, 1, 0, REDUCE, amin, "amin(Tensor x, ints dims, keepdim) -> Tensor")
DT_OP(MAX, max, reduce_with_index, 2, 0, REDUCE, max, "max(Tensor x, int dim, keepdim) -> (values, indices int64, 0-based)")
DT_OP(MIN, min, reduce_with_index, 2, 0, REDUCE, min, "min(Tensor x, int dim, keepdim) -> (values, indices int64, 0-based)")
DT_OP(ARGMAX, argmax, reduce_index, 1, 0, REDUCE, none, "argmax(Tensor x, int dim | all, keepdim) -> int64 (0-based)")
DT_OP(ARGMIN, argmin, reduce_index, 1, 0, REDUCE, none, "argmin(Tensor x, int dim | all, keepdim) -> int64 (0-based)")
DT_OP(VAR, var, reduce_float, 1, 0, REDUCE, var, "var(Tensor x, ints dims, keepdim, scalar[0] correction=1) -> Tensor")
DT_OP(STD, std, reduce_float, 1, 0, REDUCE, std, "std(Tensor x, ints dims, keepdim, scalar[0] correction=1) -> Tensor")
DT_OP(NORM, norm, reduce_float, 1, 0, REDUCE, norm, "norm(Tensor x, ints dims, keepdim, scalar[0] p=2) -> Tensor")
DT_OP(SOFTMAX, softmax, softmax, 1, 0, REDUCE, softmax, "softmax(Tensor x, ints[0]=dim) -> Tensor (floating dtypes only)")
DT_OP(LOG_SOFTMAX, log_softmax, softmax, 1, 0, REDUCE, log_softmax, "log_softmax(Tensor x, ints[0]=dim) -> Tensor (floating dtypes only)")

/* ---- linear algebra ---- */
DT_OP(MATMUL, matmul, matmul, 1, 0, LINALG, matmul, "matmul(Tensor a, Tensor b) -> Tensor (PyTorch rules, 1-D to batched N-D)")
DT_OP(MM, mm, mm, 1, 0, LINALG, mm, "mm(Tensor a[n,k], Tensor b[k,m]) -> Tensor[n,m]")
DT_OP(BMM, bmm, bmm, 1, 0, LINALG, bmm, "bmm(Tensor a[b,n,k], Tensor b[b,k,m]) -> Tensor[b,n,m]")
DT_OP(ADDMM, addmm, addmm, 1, 0, LINALG, addmm, "addmm(Tensor c, Tensor a, Tensor b, scalar[0] beta=1, scalar[1] alpha=1) -> beta*c + alpha*a@b")

/* ---- views (share storage) ---- */
DT_OP(VIEW, view, view, 1, DT_OPF_VIEW, VIEW, view, "view(Tensor x, ints shape with at most one -1) -> Tensor")
DT_OP(RESHAPE, reshape, view, 1, DT_OPF_VIEW, VIEW, reshape, "reshape(Tensor x, ints shape) -> Tensor (a copy when no view fits)")
DT_OP(TRANSPOSE, transpose, transpose, 1, DT_OPF_VIEW, VIEW, transpose, "transpose(Tensor x, int d1, int d2) -> Tensor")
DT_OP(PERMUTE, permute, permute, 1, DT_OPF_VIEW, VIEW, permute, "permute(Tensor x, ints order) -> Tensor")
DT_OP(NARROW, narrow, narrow, 1, DT_OPF_VIEW, VIEW, narrow, "narrow(Tensor x, int dim, int start, int length) -> Tensor")
DT_OP(SLICE, slice, slice, 1, DT_OPF_VIEW, VIEW, slice, "slice(Tensor x, int dim, int start, int stop, int step) -> Tensor")
DT_OP(SELECT, select, select, 1, DT_OPF_VIEW, VIEW, select, "select(Tensor x, int dim, int index) -> Tensor")
DT_OP(UNSQUEEZE, unsqueeze, unsqueeze, 1, DT_OPF_VIEW, VIEW, unsqueeze, "unsqueeze(Tensor x, int dim) -> Tensor")
DT_OP(SQUEEZE, squeeze, squeeze, 1, DT_OPF_VIEW, VIEW, squeeze, "squeeze(Tensor x, ints dims | all) -> Tensor")
DT_OP(EXPAND, expand, expand, 1, DT_OPF_VIEW, VIEW, expand, "expand(Tensor x, ints shape, -1 keeps) -> Tensor")
DT_OP(FLATTEN, flatten, flatten, 1, DT_OPF_VIEW, VIEW, flatten, "flatten(Tensor x, int start, int end) -> Tensor")

/* ---- indexing (index values 0-based here; the bindings convert Lua's 1-based ones) ---- */
DT_OP(INDEX_PUT_, index_put_, index_put, 1, DT_OPF_INPLACE, WRITE, index_put_, "index_put_(Tensor self, Tensor src; ints: per dim of self kind (DT_INDEX_*), start, stop, step, 0-based, stop exclusive) -> self (src broadcast to self[key] and cast; t[k] = v)")
DT_OP(INDEX_SELECT, index_select, index_select, 1, 0, INDEX, index_select, "index_select(Tensor x, Tensor index (int64|int32, 0-d or 1-d), ints[0]=dim) -> Tensor (x's dim replaced by the index's length)")
DT_OP(INDEX_ADD, index_add, index_add, 1, 0, INDEX, index_add, "index_add(Tensor x, Tensor index (int64|int32, 0-d or 1-d), Tensor src (x's dtype; x's shape with dim's size the index's length), ints[0]=dim; flags DT_ARG_INDEX_NO_BASE: zeros instead of x, DT_ARG_INDEX_BLOCK: x is the block of dim from index ints[1] of a dim of size ints[2]) -> Tensor (x with src's slices added at the indices; repeats accumulate)")

/* ---- joins ---- */
DT_OP(CAT, cat, cat, 1, 0, JOIN, cat, "cat(Tensor... xs, int dim) -> Tensor")
DT_OP(STACK, stack, stack, 1, 0, JOIN, stack, "stack(Tensor... xs, int dim) -> Tensor")

/* ---- neural-network functions (cross_entropy LOCAL_ONLY: on DTensors it is composed in
 *      Lua, lua/dtensor/dtensor_nn.lua) ---- */
DT_OP(EMBEDDING, embedding, embedding, 1, 0, NN, embedding, "embedding(Tensor ids int (0-based), Tensor weight[v,d]; flags&DT_ARG_VOCAB_SHARD: weight is rows ints[0].. of the vocab, other ids read zeros) -> Tensor")
DT_OP(LAYER_NORM, layer_norm, layer_norm, 1, 0, NN, layer_norm, "layer_norm(Tensor x, Tensor? w, Tensor? b; ints[0]=k normalised dims, ints[1..k]=normalized_shape, scalar eps) -> Tensor")
DT_OP(RMS_NORM, rms_norm, layer_norm, 1, 0, NN, rms_norm, "rms_norm(Tensor x, Tensor? w; ints[0]=k normalised dims, ints[1..k]=normalized_shape, scalar eps) -> Tensor")
DT_OP(CROSS_ENTROPY, cross_entropy, cross_entropy, 1, 0, LOCAL_ONLY, cross_entropy, "cross_entropy(Tensor logits[n,c,d..] or [c], Tensor target[n,d..] or 0-d int (0-based); ints[0]=ignore_index, ints[1]=reduction 0 none 1 mean 2 sum) -> Tensor")
DT_OP(SDPA, scaled_dot_product_attention, sdpa, 1, 0, NN, scaled_dot_product_attention, "sdpa(Tensor q[..,L,E], k[..,S,E], v[..,S,Ev], Tensor? mask (bool: true attends, or float: added); flags&1 causal, scalar scale if nscalar else 1/sqrt(E)) -> Tensor")

/* ---- random (generator position in ints[DT_RNG_SLOT_SEED], ints[DT_RNG_SLOT_OFFSET], see
 * src/ops/random.h; the caller advances the offset: the binding, or dist/rng.c for DTensors; doc/random.md) ---- */
DT_OP(RAND, rand, random_float, 1, DT_OPF_FACTORY | DT_OPF_RANDOM, RANDOM, none, "rand(ints shape, scalar from=0, to=1, dtype float) -> Tensor")
DT_OP(RANDN, randn, random_float, 1, DT_OPF_FACTORY | DT_OPF_RANDOM, RANDOM, none, "randn(ints shape, scalar mean=0, std=1, dtype float) -> Tensor")
DT_OP(RANDINT, randint, randint, 1, DT_OPF_FACTORY | DT_OPF_RANDOM, RANDOM, none, "randint(ints shape, ints[12] low, ints[13] high (exclusive), dtype=int64) -> Tensor")
DT_OP(UNIFORM_, uniform_, random_inplace, 1, DT_OPF_INPLACE | DT_OPF_RANDOM, RANDOM, uniform_, "uniform_(Tensor self, scalar from, to) -> self")
DT_OP(NORMAL_, normal_, random_inplace, 1, DT_OPF_INPLACE | DT_OPF_RANDOM, RANDOM, normal_, "normal_(Tensor self, scalar mean, std) -> self")
DT_OP(BERNOULLI, bernoulli, bernoulli, 1, DT_OPF_RANDOM, RANDOM, none, "bernoulli(Tensor probs | Tensor like + DT_ARG_SCALAR scalar p) -> Tensor (probs' dtype)")
DT_OP(DROPOUT, dropout, dropout, 2, DT_OPF_RANDOM, RANDOM, dropout, "dropout(Tensor x, scalar p) -> (x * keep / (1 - p), Tensor(bool) keep)")
DT_OP(DROPOUT_BACKWARD, dropout_backward, dropout_backward, 1, 0, POINTWISE, dropout_backward, "dropout_backward(Tensor grad, Tensor(bool) keep, scalar p) -> grad * keep / (1 - p)")
DT_OP(RANDPERM, randperm, randperm, 1, DT_OPF_FACTORY | DT_OPF_RANDOM, RANDOM, none, "randperm(int n, int first value, dtype=int64) -> Tensor[n] (first .. first+n-1 permuted)")
DT_OP(MULTINOMIAL, multinomial, multinomial, 1, DT_OPF_RANDOM, RANDOM, none, "multinomial(Tensor weights [c] | [r,c], int samples, int replacement) -> int64 (0-based)")

/* ---- shape and index family: gather/scatter, sort/topk, flip/roll, repeat, tril/triu, diag
 *      (SHAPE sharding: sharding_rules/shape_ops.c; kernels cpu/gather.c, cpu/sort.c,
 *      cpu/rearrange.c; index values 0-based here, the bindings convert) ---- */
DT_OP(GATHER, gather, gather, 1, 0, SHAPE, gather, "gather(Tensor x, Tensor index (int64|int32, x's ndim, each size <= x's but dim's), ints[0]=dim) -> Tensor (index's shape: x at index along dim)")
DT_OP(SCATTER, scatter, scatter, 1, 0, SHAPE, scatter, "scatter(Tensor x, Tensor index, Tensor src (x's dtype, index's shape), ints[0]=dim) -> Tensor (x with src written at index along dim; repeats: the last written wins)")
DT_OP(SCATTER_ADD, scatter_add, scatter, 1, 0, SHAPE, scatter_add, "scatter_add(Tensor x, Tensor index, Tensor src (x's dtype, index's shape), ints[0]=dim) -> Tensor (x with src added at index along dim; repeats accumulate)")
DT_OP(SORT, sort, sort, 2, 0, SHAPE, sort, "sort(Tensor x, ints[0]=dim, ints[1]=descending) -> (values, indices int64 0-based); stable, NaN largest")
DT_OP(TOPK, topk, topk, 2, 0, SHAPE, topk, "topk(Tensor x, ints[0]=dim, ints[1]=k, ints[2]=largest) -> (values, indices int64 0-based), sorted; ties: the lower index first")
DT_OP(FLIP, flip, flip, 1, 0, SHAPE, flip, "flip(Tensor x, ints dims) -> Tensor")
DT_OP(ROLL, roll, roll, 1, 0, SHAPE, roll, "roll(Tensor x, ints[0..n-1] shifts, ints[n..2n-1] dims (nints = 2n)) -> Tensor")
DT_OP(REPEAT, repeat, repeat, 1, 0, SHAPE, repeat, "repeat(Tensor x, ints repeats (at least x's ndim; extra ones lead)) -> Tensor")
DT_OP(TRIL, tril, tril, 1, 0, SHAPE, tril, "tril(Tensor x (>= 2-d), ints[0]=diagonal) -> Tensor (elements above the diagonal zeroed)")
DT_OP(TRIU, triu, tril, 1, 0, SHAPE, triu, "triu(Tensor x (>= 2-d), ints[0]=diagonal) -> Tensor (elements below the diagonal zeroed)")
DT_OP(DIAG, diag, diag, 1, 0, SHAPE, diag, "diag(Tensor x (1-d or 2-d), ints[0]=diagonal; 1-d: ints[1], ints[2] = rows, cols when nints 3, else square) -> Tensor (1-d: the matrix with x on the diagonal; 2-d: the diagonal)")

/* ---- the math family: rounding, tests, lerp/addcmul/addcdiv, logsumexp, all/any, scans, var_mean
 *      (one block; shape rules in shape_math.c, kernels in cpu/pointwise_math.c, cpu/scan.c and
 *      cpu/reduce.c, rules in autograd/backward_math.c) ---- */
DT_OP(FLOOR, floor, unary, 1, 0, POINTWISE, floor, "floor(Tensor x) -> Tensor (integers unchanged)")
DT_OP(CEIL, ceil, unary, 1, 0, POINTWISE, ceil, "ceil(Tensor x) -> Tensor (integers unchanged)")
DT_OP(ROUND, round, round, 1, 0, POINTWISE, round, "round(Tensor x, ints[0] decimals=0) -> Tensor (half to even, as torch; decimals on floating dtypes only)")
DT_OP(TRUNC, trunc, unary, 1, 0, POINTWISE, trunc, "trunc(Tensor x) -> Tensor (integers unchanged)")
DT_OP(SIGN, sign, unary, 1, 0, POINTWISE, sign, "sign(Tensor x) -> Tensor (-1, 0 or 1; NaN stays NaN)")
DT_OP(ERF, erf, unary_float, 1, 0, POINTWISE, erf, "erf(Tensor x) -> Tensor (ints promote to float32)")
DT_OP(ISNAN, isnan, unary_bool, 1, 0, POINTWISE, none, "isnan(Tensor x) -> Tensor(bool)")
DT_OP(ISINF, isinf, unary_bool, 1, 0, POINTWISE, none, "isinf(Tensor x) -> Tensor(bool)")
DT_OP(ISFINITE, isfinite, unary_bool, 1, 0, POINTWISE, none, "isfinite(Tensor x) -> Tensor(bool)")
DT_OP(NAN_TO_NUM, nan_to_num, unary, 1, 0, POINTWISE, nan_to_num, "nan_to_num(Tensor x, scalar[0] nan=0, scalar[1] posinf (DT_ARG_HAS_MAX; else the dtype's max), scalar[2] neginf (DT_ARG_HAS_MIN; else its lowest)) -> Tensor (integers unchanged)")
DT_OP(LERP, lerp, lerp, 1, 0, POINTWISE, lerp, "lerp(Tensor start, Tensor end, Tensor weight | DT_ARG_SCALAR: scalar[0] weight) -> start + weight (end - start) (floating, one dtype; torch's two-sided formula)")
DT_OP(ADDCMUL, addcmul, addcmul, 1, 0, POINTWISE, addcmul, "addcmul(Tensor self, Tensor t1, Tensor t2, scalar[0] value=1; DT_ARG_SCALAR_INT: value an integer) -> self + value t1 t2")
DT_OP(ADDCDIV, addcdiv, addcmul, 1, 0, POINTWISE, addcdiv, "addcdiv(Tensor self, Tensor t1, Tensor t2, scalar[0] value=1) -> self + value t1 / t2 (floating results only)")
DT_OP(MASKED_FILL_, masked_fill_, masked_fill, 1, DT_OPF_INPLACE, POINTWISE, masked_fill_, "masked_fill_(Tensor self, Tensor(bool) mask (broadcast to self), scalar[0] value; DT_ARG_SCALAR_INT: exact in ints[0]) -> self")
DT_OP(LOGSUMEXP, logsumexp, reduce_to_float, 1, 0, REDUCE, logsumexp, "logsumexp(Tensor x, ints dims, keepdim) -> Tensor (ints promote to float32; empty: -inf)")
DT_OP(ALL, all, reduce_bool, 1, 0, REDUCE, none, "all(Tensor x, ints dims | DT_ARG_ALL_DIMS, keepdim) -> Tensor(bool) (every element nonzero; empty: true)")
DT_OP(ANY, any, reduce_bool, 1, 0, REDUCE, none, "any(Tensor x, ints dims | DT_ARG_ALL_DIMS, keepdim) -> Tensor(bool) (some element nonzero; empty: false)")
DT_OP(CUMSUM, cumsum, scan, 1, 0, REDUCE, cumsum, "cumsum(Tensor x, ints[0] dim; dtype when has_dtype) -> Tensor (ints/bool -> int64)")
DT_OP(CUMPROD, cumprod, scan, 1, 0, REDUCE, cumprod, "cumprod(Tensor x, ints[0] dim; dtype when has_dtype) -> Tensor (ints/bool -> int64)")
DT_OP(VAR_MEAN, var_mean, var_mean, 2, 0, REDUCE, var_mean, "var_mean(Tensor x, ints dims, keepdim, scalar[0] correction=1) -> (var, mean) (floating)")

/* ---- fused backward kernels (CPU speed): one pass where the composed backward rules made
 * several ops; called by those rules, so they have no gradient of their own ---- */
DT_OP(GELU_BACKWARD, gelu_backward, binary_float, 1, 0, POINTWISE, none, "gelu_backward(Tensor grad, Tensor x; ints[0]=1: tanh approximation) -> grad * gelu'(x)")
DT_OP(LAYER_NORM_BACKWARD, layer_norm_backward, layer_norm_backward, 3, 0, NN, none, "layer_norm_backward(Tensor grad, Tensor x, Tensor? w; ints[0]=k normalised dims, ints[1..k]=normalized_shape, scalar eps; flags&1: rms_norm) -> (dx, dw = sum of grad * xhat, db = sum of grad over the leading dims) (the row statistics recomputed)")

/* ---- fused training-step kernels (CPU speed of one rank's step, doc/performance.md
 * "Training"): the optimizer's update in one pass per parameter.  No gradient (optimizer
 * math runs under no_grad). ---- */
DT_OP(ADAM_STEP_, adam_step_, adam_step, 1, DT_OPF_INPLACE, POINTWISE, none, "adam_step_(Tensor param, Tensor grad, Tensor exp_avg, Tensor exp_avg_sq, Tensor? max_exp_avg_sq (amsgrad; all param's shape and dtype); scalar[0] step_size = lr / (1 - beta1^step), [1] sqrt(1 - beta2^step), [2] beta1, [3] beta2; ints[0], ints[1] = the IEEE-754 bits of eps and of the weight-decay term (flags&1 decoupled: the factor 1 - lr wd, else wd); flags&2 maximize; Tensor? step, Tensor? lr: 1-element float32/float64 tensors, the step count after this step and the learning rate (absent: ints[2], its IEEE-754 bits); with step, scalar[0..1] are unused and the kernel computes lr / (1 - beta1^step), sqrt(1 - beta2^step) and the decay term 1 - lr wd (decoupled) in double as the eager Lua does, ints[1] holding wd) -> param (exp_avg, exp_avg_sq, max_exp_avg_sq written too)")
DT_OP(CROSS_ENTROPY_BACKWARD, cross_entropy_backward, cross_entropy_backward, 1, 0, LOCAL_ONLY, none, "cross_entropy_backward(Tensor grad (cross_entropy's result's shape), Tensor logits, Tensor target (0-based); ints[0]=ignore_index, ints[1]=reduction 0 none 1 mean 2 sum) -> d logits = (softmax(logits) - onehot(target)) * w (w: grad, / the count of targets not ignored for mean, 0 where ignored); cross_entropy's rule calls it (LOCAL_ONLY as cross_entropy)")
DT_OP(SDPA_BACKWARD, sdpa_backward, sdpa_backward, 3, 0, NN, none, "sdpa_backward(Tensor grad [..,L,Ev], q [..,L,E], k [..,S,E], v [..,S,Ev] (one batch shape, the output's), Tensor? mask (as sdpa's); flags&1 causal, scalar scale if nscalar else 1/sqrt(E)) -> (dq, dk, dv); P recomputed as the forward made it; sdpa's rule calls it")

/* ---- 1-based index values (ids, targets) checked and made 0-based: the front door's form of
 *      Lua's 1-based indices, so a captured graph checks the values of every replay ---- */
DT_OP(IDS_TO_ZERO_BASED, ids_to_zero_based, ids, 1, DT_OPF_CHECK, LOCAL_ONLY, none, "ids_to_zero_based(Tensor ids (int64/int32/uint8), ints[0] hi, ints[1] has_skip, ints[2] skip, ints[3] dt_ids_kind) -> Tensor(int64) ids - 1; an error naming the first value outside 1..hi (skip passes)")

/* ---- softmax's and log_softmax's fused backward (CPU speed: one sweep of each row for the
 *      row sum, one for the result, where the rules made four ops); called by those rules, so
 *      no gradient of their own.  REDUCE: along ints[0] like softmax, grad and y alike ---- */
DT_OP(SOFTMAX_BACKWARD, softmax_backward, softmax_backward, 1, 0, REDUCE, none, "softmax_backward(Tensor grad, Tensor y (softmax's output: grad's shape and dtype); ints[0]=dim) -> y (grad - sum(grad y, dim))")
DT_OP(LOG_SOFTMAX_BACKWARD, log_softmax_backward, softmax_backward, 1, 0, REDUCE, none, "log_softmax_backward(Tensor grad, Tensor y (log_softmax's output: grad's shape and dtype); ints[0]=dim) -> grad - exp(y) sum(grad, dim)")
