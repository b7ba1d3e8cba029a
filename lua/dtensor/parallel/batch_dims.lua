-- Batch-dim analysis of a traced single-device program (dt.parallel.data_parallel,
-- doc/data_parallel.md).  The trace (dt._trace) lists every call that passed the front door
-- in order, with its operand and result slots, static args and result shapes.  Each slot
-- gets a state:
--   an integer d   the value is batched: its dim d (0-based here) indexes the batch's rows
--   PARTIAL        a sum (or another reduction) over the batch: each row adds its part
--                  (Partial over the data-parallel ranks)
--   nil            batch-independent (parameters, constants, values made from them)
-- from its inputs' states by the op's rule: pointwise ops through broadcasting, view ops
-- through a dim map, reductions over the batch dim -> PARTIAL, matmul contracting the batch
-- -> PARTIAL.  A gradient set into a parameter's .grad must be PARTIAL or batch-independent:
-- that is the gradient the data-parallel program all-reduces.  A node that mixes batch rows
-- (the batch in two dims, a softmax along it, the batch contracted with a tensor without
-- it) has no batch dim: analyse() raises naming the op and its Lua line.
local M = {}

local PARTIAL = "partial"
M.PARTIAL = PARTIAL
local ALL_DIMS = 8 -- DT_ARG_ALL_DIMS (src/ops/op_args.h)

-- ops linear in their one operand: a Partial stays Partial through them
local LINEAR1 = {neg = true, clone = true, to = true, contiguous = true, sum = true, mean = true, cumsum = true}
-- the operands through which an op is linear when the others are batch-independent
-- (a Partial times a constant); add/sub need every tensor operand Partial and no number
local LINEAR_IN = {mul = {true, true}, div = {true, false}, matmul = {true, true}, mm = {true, true},
                   bmm = {true, true}, where = {false, true, true}}
local SCALAR = 1 -- DT_ARG_SCALAR: a Lua number operand
-- reductions whose result over the batch is a Partial of the ranks' local results
local OVER_BATCH_OK = {sum = true, mean = true, prod = true, amax = true, amin = true, logsumexp = true, all = true,
                       any = true, var = true, std = true, norm = true, var_mean = true, max = true, min = true,
                       argmax = true, argmin = true, cross_entropy = true}
-- ops along one dim (ints[0]) whose result rows depend on every row of that dim
local ALONG_DIM = {softmax = true, log_softmax = true, cumsum = true, cumprod = true, sort = true, topk = true,
                   narrow = true, slice = true, gather = true, scatter = true, scatter_add = true,
                   softmax_backward = true, log_softmax_backward = true}
-- of those, the ones whose every operand (grad, y) works along the dim and shares the batch dim
local ALONG_DIM_ALL = {softmax_backward = true, log_softmax_backward = true}

local function prod(t, i, j)
  local p = 1
  for k = i, j do p = p * t[k] end
  return p
end

local function fail(node, msg)
  error({batch_dims = true, msg = string.format("data_parallel: %s at %s: %s", node.name, node.where, msg)}, 0)
end

local function show_dim(d)
  return d == nil and "replicate (batch-independent)" or d == PARTIAL and "partial (reduced over the batch)" or ("batch dim " .. (d + 1))
end

-- reshape-like views: the out dim holding in dim d (0-based), from the shapes alone
local function reshape_map(node, ins, outs, d)
  local prefix, B = prod(ins, 1, d), ins[d + 1]
  local acc = 1
  for k = 1, #outs do
    if acc == prefix and (outs[k] ~= 1 or B == 1) then
      if outs[k] % B == 0 or B % outs[k] == 0 then return k - 1 end
      break
    end
    acc = acc * outs[k]
    if acc > prefix and prefix > 0 then break end
  end
  fail(node, string.format("the batch (dim %d of %s) is merged with the dims before it in %s: rows of different "
       .. "samples interleave", d + 1, "{" .. table.concat(ins, ",") .. "}", "{" .. table.concat(outs, ",") .. "}"))
end

-- broadcasting: in dim d of an operand of nd dims -> the result's dim (right-aligned)
local function broadcast_dim(node, shape_in, out, d)
  local od = #out - #shape_in + d
  if shape_in[d + 1] ~= out[od + 1] then
    fail(node, string.format("the batch dim (dim %d, size %d) is broadcast to size %d", d + 1, shape_in[d + 1], out[od + 1]))
  end
  return od
end

-- the one batch dim several operands agree on (nil: none is batched)
local function agree(node, dims)
  local keys = {}
  for k in pairs(dims) do keys[#keys + 1] = k end
  table.sort(keys, function(x, y) return tostring(x) < tostring(y) end) -- the same message on every rank
  local got
  for _, k in ipairs(keys) do
    local d = dims[k]
    if got ~= nil and d ~= got then
      fail(node, string.format("its operands put the batch in different dims of the result (%s and %s): the op "
           .. "mixes rows of different samples", show_dim(got), show_dim(d)))
    end
    got = d
  end
  return got
end

local function is_dim(s) return math.type(s) == "integer" end

-- the state of each result of node, from its operands' states st[] and shapes sh[]
local function rule(node, st, sh)
  local name, ints = node.name, node.ints or {}
  local out = node.shapes and node.shapes[1] or {}
  local batched, partial = {}, false
  for i, s in ipairs(node.ins) do
    local v = s >= 0 and st[s] or nil
    if is_dim(v) then batched[i] = v elseif v == PARTIAL then partial = true end
  end
  local any_batched = next(batched) ~= nil
  if not any_batched then
    if not partial then return nil end
    -- a Partial through an op linear in it stays Partial; otherwise it is summed first
    local np, others, lin = 0, 0, LINEAR_IN[name]
    local linear = true
    for i, s in ipairs(node.ins) do
      if s >= 0 and st[s] == PARTIAL then
        np = np + 1
        if lin and not lin[i] then linear = false end
      elseif s >= 0 then
        others = others + 1
      end
    end
    if node.view or (LINEAR1[name] and #node.ins == 1) then return PARTIAL end
    if (name == "add" or name == "sub") and others == 0 and (node.flags or 0) & SCALAR == 0 then return PARTIAL end
    if lin and linear and np == 1 then return PARTIAL end
    return nil, "reduces"
  end
  local function in_shape(i) return sh[node.ins[i]] end
  local fam = node.family
  if ALONG_DIM[name] then
    for i, d in pairs(batched) do
      if (i == 1 or name == "gather" or name:find("scatter") or ALONG_DIM_ALL[name]) and ints[1] == d then
        fail(node, string.format("it works along the batch dim (dim %d): each result row depends on other samples' rows", d + 1))
      end
    end
  end
  if name == "ids_to_zero_based" then return batched[1] end -- elementwise (ids and targets made 0-based)
  if name == "embedding" then
    if batched[2] then fail(node, "the batch is in the embedding table") end
    return batched[1]
  end
  if name == "cross_entropy" then
    local d = agree(node, {batched[1], batched[2] and (batched[2] == 0 and 0 or batched[2] + 1)})
    if d == 1 and #in_shape(1) > 1 then fail(node, "the batch is the class dim") end
    if ints[2] == 0 then return d == 0 and 0 or d - 1 end -- reduction none: the class dim is gone
    return PARTIAL
  end
  if name == "cross_entropy_backward" then -- (grad, logits, target) -> d logits: logits' batch dim
    local function from_target(d) return d and (d == 0 and 0 or d + 1) end
    local d = agree(node, {batched[2], from_target(batched[3]), from_target(batched[1])}) -- grad: reduction none
    if d == 1 and #in_shape(2) > 1 then fail(node, "the batch is the class dim") end
    return d
  end
  if name == "sdpa_backward" then -- (grad, q, k, v, mask?) -> dq, dk, dv: one batch shape, the output's
    local dims = {}
    for i, d in pairs(batched) do
      local s = in_shape(i)
      if d >= #s - 2 then
        fail(node, "the batch is in the sequence or feature dims: queries would attend across samples")
      end
      dims[i] = #out - #s + d
    end
    return agree(node, dims)
  end
  if name == "layer_norm_backward" then -- (grad, x, w?) -> dx like x; dw, db summed over the rows
    local dims = {}
    for i, d in pairs(batched) do dims[i] = broadcast_dim(node, in_shape(i), out, d) end
    local d = agree(node, dims)
    return d, nil, {d, is_dim(d) and PARTIAL or d, is_dim(d) and PARTIAL or d}
  end
  if fam == "pointwise" or fam == "random" or name == "copy_" then
    local dims = {}
    for i, d in pairs(batched) do dims[i] = broadcast_dim(node, in_shape(i), out, d) end
    return agree(node, dims)
  end
  if fam == "reduce" then
    local d, x = batched[1], in_shape(1)
    if ALONG_DIM_ALL[name] then return agree(node, batched) end -- (grad, y) -> like y
    if ALONG_DIM[name] then return d end -- softmax & co. along another dim keep the shape
    local reduced, nd = {}, #x
    if (node.flags or 0) & ALL_DIMS ~= 0 or #ints == 0 then
      for k = 0, nd - 1 do reduced[k] = true end
    else
      local n = (name == "max" or name == "min" or name == "argmax" or name == "argmin") and 1 or #ints
      for k = 1, n do reduced[ints[k]] = true end
    end
    if reduced[d] then
      if not OVER_BATCH_OK[name] then fail(node, "it reduces over the batch dim with no decomposition") end
      return PARTIAL
    end
    if node.keepdim then return d end
    local shift = 0
    for k = 0, d - 1 do if reduced[k] then shift = shift + 1 end end
    return d - shift
  end
  if fam == "linalg" then
    local a_i, b_i = name == "addmm" and 2 or 1, name == "addmm" and 3 or 2
    local a, b = in_shape(a_i), in_shape(b_i)
    local na, nb, no = #a, #b, #out
    local dims, contracted = {}, 0
    local da, db = batched[a_i], batched[b_i]
    if da ~= nil then
      if da == na - 1 then contracted = contracted + 1
      elseif na >= 2 and da == na - 2 then dims.a = no - (nb == 1 and 1 or 2)
      else dims.a = no - na + da end
    end
    if db ~= nil then
      if nb == 1 or db == nb - 2 then contracted = contracted + 1
      elseif db == nb - 1 then dims.b = no - 1
      else dims.b = no - nb + db end
    end
    if name == "addmm" and batched[1] ~= nil then dims.c = broadcast_dim(node, in_shape(1), out, batched[1]) end
    -- x:t() @ y: a sum over the batch's rows (the other side, if batch-independent, is sliced
    -- alike on each rank): a Partial, as a Linear weight's gradient
    if contracted > 0 and next(dims) == nil then return PARTIAL end
    if contracted > 0 then
      fail(node, "it contracts the batch dim of one operand while the other keeps the batch in its result: "
           .. "every sample's row meets every other's")
    end
    return agree(node, dims)
  end
  if fam == "view" or node.view then
    local d, x = batched[1], in_shape(1)
    if name == "transpose" then
      if d == ints[1] then return ints[2] elseif d == ints[2] then return ints[1] end
      return d
    elseif name == "permute" then
      for j, k in ipairs(ints) do if k == d then return j - 1 end end
    elseif name == "select" then
      if ints[1] == d then fail(node, "it selects one sample of the batch dim") end
      return ints[1] < d and d - 1 or d
    elseif name == "expand" then
      return broadcast_dim(node, x, out, d)
    else -- view, reshape, flatten, squeeze, unsqueeze
      return reshape_map(node, x, out, d)
    end
  end
  if fam == "join" then
    local dims = {}
    for i = 1, #node.ins do
      if batched[i] == nil then fail(node, "it joins batched tensors with batch-independent ones") end
      dims[i] = batched[i]
    end
    local d = agree(node, dims)
    if name == "cat" and ints[1] == d then fail(node, "it concatenates along the batch dim") end
    if name == "stack" and ints[1] <= d then return d + 1 end
    return d
  end
  if fam == "nn" then
    if name == "layer_norm" or name == "rms_norm" then
      local d, x = batched[1], in_shape(1)
      if batched[2] or batched[3] then fail(node, "the batch is in the norm's weight") end
      if d >= #x - ints[1] then fail(node, "it normalises over the batch dim") end
      return d
    end
    if name == "scaled_dot_product_attention" then
      local dims = {}
      for i, d in pairs(batched) do
        local s = in_shape(i)
        if i == 1 and d == #s - 2 then dims[i] = #out - 2
        elseif d < #s - 2 then dims[i] = #out - #s + d
        elseif i == 4 and d == #s - 2 then dims[i] = #out - 2
        else fail(node, "the batch is in the attended (key) dim or the features: queries would attend across samples") end
      end
      return agree(node, dims)
    end
  end
  if name == "index_select" then
    if batched[1] ~= nil and batched[2] ~= nil then fail(node, "both the tensor and the index are batched") end
    if batched[2] ~= nil then return ints[1] end
    if batched[1] == ints[1] then fail(node, "it selects along the batch dim") end
    return batched[1]
  end
  if name == "index_add" then
    -- x.index_add(dim, index, src): rows of src added at index; a batched index and src whose
    -- batch is the indexed dim sum the samples' rows: embedding's gradient, a Partial
    local di, ds = batched[2], batched[3]
    if di ~= nil and ds == ints[1] and batched[1] == nil then return PARTIAL end
    if batched[1] ~= nil and di == nil and ds == batched[1] and ints[1] ~= ds then return ds end
    fail(node, "the batch of its index and source do not match the indexed dim")
  end
  if fam == "shape" then
    local d, x = batched[1], in_shape(1)
    if name == "repeat" then
      local lead = #ints - #x
      if ints[lead + d + 1] ~= 1 then fail(node, "it repeats the batch dim") end
      return d + lead
    elseif name == "flip" or name == "roll" then
      local dims = name == "flip" and ints or table.move(ints, #ints // 2 + 1, #ints, 1, {})
      for _, k in ipairs(dims) do if k == d then fail(node, "it reorders the batch dim") end end
      return d
    elseif name == "tril" or name == "triu" or name == "diag" then
      if name == "diag" or d >= #x - 2 then fail(node, "the batch is in the matrix dims") end
      return d
    end
    local dims = {}
    for i, v in pairs(batched) do dims[i] = v end
    return agree(node, dims)
  end
  if name == "index_put_" then
    local dims = {}
    for i, v in pairs(batched) do dims[i] = v end
    return agree(node, dims)
  end
  fail(node, "no batch-dim rule for this op with a batched operand (" .. tostring(fam) .. " family)")
end

-- opts: arg_dims[i] = the batch dim (0-based) of tensor argument i (1-based list over the
-- trace's tensor arguments; nil: not batched).  Returns the analysis:
--   {nodes = trace.nodes, state = {[slot] = state}, results = {[k] = {states}}, params =
--    {[e] = {external =, grad_node =}}, grad_slots = {...}}
-- or raises a Lua error naming the op and the line of the first node without a batch dim.
function M.analyse(trace, arg_dims)
  local st, sh = {}, {}
  for i = 0, trace.nargs - 1 do st[i] = arg_dims[i + 1] end
  for i = 0, trace.nargs - 1 do sh[i] = trace.arg_shapes[i + 1] end
  for e, ext in ipairs(trace.externals) do sh[trace.nargs + e - 1] = ext.shape end
  local results, grads, notes = {}, {}, {}
  local ok, err = pcall(function()
    for k, node in ipairs(trace.nodes) do
      local res
      if node.kind == "conversion" then
        fail(node, "a DTensor conversion: data_parallel traces a single-device program (give step_fn plain tensors)")
      elseif node.kind == "get_grad" then
        res = {nil}
      elseif node.kind == "set_grad" then
        local g = node.ins[2]
        local s = g >= 0 and st[g] or nil
        if is_dim(s) then fail(node, "a parameter's gradient has the batch in " .. show_dim(s)) end
        if g >= 0 then
          grads[#grads + 1] = {param = node.ins[1], grad = g, state = s, node = k}
          st[g] = nil -- all-reduced at the end of backward: the whole gradient on every rank
        end
        res = {}
      else
        for _, s in ipairs(node.outs) do sh[s] = node.shapes[_] end
        local r, note, per_out = rule(node, st, sh) -- per_out: outputs that differ from the first
        notes[k] = note
        res = {}
        for o = 1, math.max(#node.outs, 1) do res[o] = per_out and per_out[o] or r end
        if node.inplace and node.ins[1] >= 0 then
          local target = node.ins[1]
          if is_dim(st[target]) and r ~= st[target] then
            fail(node, "it writes " .. show_dim(r) .. " into a tensor batched in " .. show_dim(st[target]))
          end
          if target < trace.nargs + trace.nexternals and target >= trace.nargs and is_dim(r) then
            fail(node, "it writes batched values into a tensor from outside the step (a parameter or buffer)")
          end
          st[target] = r == nil and st[target] or r
        end
      end
      for o, s in ipairs(node.outs) do st[s] = res[o] end
      results[k] = res
    end
  end)
  if not ok then
    if type(err) == "table" and err.batch_dims then error(err.msg, 0) end
    error(err, 0)
  end
  return {trace = trace, arg_dims = arg_dims, state = st, results = results, grads = grads, notes = notes}
end

-- One line per node: "%5 = matmul(%0, %3)  float{8,4}  batch dim 1  -- file.lua:3"
function M.format(an)
  local tr, lines = an.trace, {}
  local args = {}
  for i = 0, tr.nargs - 1 do args[#args + 1] = "%" .. i .. " " .. show_dim(an.arg_dims[i + 1]) end
  lines[1] = "batch dims of graph(" .. table.concat(args, ", ") .. ")" ..
             (tr.nexternals > 0 and ("  externals %" .. tr.nargs .. "..%" .. (tr.nargs + tr.nexternals - 1) .. " replicate") or "")
  for k, node in ipairs(tr.nodes) do
    local outs, ins = {}, {}
    for _, s in ipairs(node.outs) do outs[#outs + 1] = "%" .. s end
    for _, s in ipairs(node.ins) do ins[#ins + 1] = s >= 0 and ("%" .. s) or "None" end
    local r = an.results[k]
    local what
    if node.kind == "set_grad" then
      what = node.ins[2] < 0 and ".grad = nil" or ".grad set: the gradient all-reduced (bucketed)"
    else
      what = show_dim(r[1]) .. (an.notes[k] == "reduces" and " (its partial operand summed first)" or "")
    end
    local shape = node.shapes and node.shapes[1] and ("{" .. table.concat(node.shapes[1], ",") .. "}  ") or ""
    lines[#lines + 1] = string.format("  %s%s(%s)  %s%s  -- %s", #outs > 0 and (table.concat(outs, ", ") .. " = ") or "",
      node.name, table.concat(ins, ", "), shape, what, node.where)
  end
  local rets = {}
  for i, s in ipairs(tr.returns) do rets[i] = s >= 0 and ("%" .. s) or "(a Lua value)" end
  lines[#lines + 1] = "  return " .. table.concat(rets, ", ")
  return table.concat(lines, "\n")
end

M.show_dim = show_dim
return M
