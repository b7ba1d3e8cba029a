-- Tensor and data parallelism over modules (doc/parallel.md): PyTorch's
-- torch.distributed.tensor.distribute_module and torch.distributed.tensor.parallel, plus
-- replicate (data parallelism with bucketed gradient averaging).  Returns
-- {module = {parallel = {...}, distribute_module = fn}}: init.lua installs dt.parallel and
-- dt.distribute_module.  The files, one concern each:
--   layouts.lua            options, placements, the differentiable input/output conversions
--   style.lua              what a parallel style is
--   distribute_module.lua  dt.distribute_module
--   linear_styles.lua      ColwiseParallel, RowwiseParallel (Linear, Embedding)
--   sequence_parallel.lua  SequenceParallel
--   prepare_module.lua     PrepareModuleInput, PrepareModuleOutput
--   parallelize.lua        parallelize_module and its plan's wildcard paths
--   loss.lua               loss_parallel
--   buckets.lua, replicate.lua  replicate
--   fully_shard.lua        fully_shard (FSDP2: parameters sharded over dp, gathered per block)
--   grad_buckets.lua       the bucketed gradient all_reduce replicate and data_parallel share
--   batch_dims.lua, data_parallel.lua  data_parallel (from a batch-dim analysis of a trace)
local linear = require "dtensor.parallel.linear_styles"
local prepare = require "dtensor.parallel.prepare_module"
local replicate = require "dtensor.parallel.replicate"
local fully_shard = require "dtensor.parallel.fully_shard"
local data_parallel = require "dtensor.parallel.data_parallel"

local parallel = {
  ColwiseParallel = linear.ColwiseParallel,
  RowwiseParallel = linear.RowwiseParallel,
  SequenceParallel = require("dtensor.parallel.sequence_parallel").SequenceParallel,
  PrepareModuleInput = prepare.PrepareModuleInput,
  PrepareModuleOutput = prepare.PrepareModuleOutput,
  parallelize_module = require("dtensor.parallel.parallelize").parallelize_module,
  loss_parallel = require("dtensor.parallel.loss").loss_parallel,
  replicate = replicate.replicate,
  replicate_buckets = replicate.replicate_buckets,
  fully_shard = fully_shard.fully_shard,
  fully_shard_bytes = fully_shard.fully_shard_bytes,
  is_style = require("dtensor.parallel.style").is_style,
  data_parallel = data_parallel.data_parallel,
  explain_batch_dims = data_parallel.explain_batch_dims,
}

return {module = {parallel = parallel,
                  distribute_module = require("dtensor.parallel.distribute_module").distribute_module}}
