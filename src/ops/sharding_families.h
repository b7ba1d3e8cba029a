/* The sharding-rule families, once each: DT_SHARDING(F, "name") is DT_SHARDING_<F>.  The op
 * rows (op_list.h) name one each; the distributed layer maps each to its rule function. */
DT_SHARDING(LOCAL_ONLY, "local_only") /* never dispatched on DTensors */
DT_SHARDING(POINTWISE, "pointwise")
DT_SHARDING(LINALG, "linalg") /* matmul mm bmm addmm */
DT_SHARDING(REDUCE, "reduce")
DT_SHARDING(VIEW, "view")
DT_SHARDING(NN, "nn")
DT_SHARDING(JOIN, "join") /* cat, stack */
DT_SHARDING(INDEX, "index") /* index_select, index_add (sharding_rules/index.c) */
DT_SHARDING(SHAPE, "shape") /* gather, scatter, sort, topk, flip, roll, repeat, tril/triu, diag (sharding_rules/shape_ops.c) */
DT_SHARDING(WRITE, "write") /* t[k] = v: each rank writes its block (distributed/dtensor_write.c), no priced rule */
DT_SHARDING(RANDOM, "random") /* the DT_OPF_RANDOM rows: the RNG tracker (distributed/rng.c), no priced rule */
