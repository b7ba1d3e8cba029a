-- dt.nn.functional (dt.F): neural-network functions over tensors, PyTorch-style.
-- Index values (embedding ids, cross_entropy targets and ignore_index) are 1-based, as
-- everywhere in Lua; the core functions convert to the C core's 0-based indices.
local core = require "dtensor.core"
local F = {}

local function check_opts(op, opts, allowed)
  if opts == nil then return {} end
  if type(opts) ~= "table" or core.is_tensor(opts) then
    error(op .. ": options must be a table, got " .. type(opts), 3)
  end
  for k in pairs(opts) do
    if not allowed[k] then error(op .. ": unknown option '" .. tostring(k) .. "'", 3) end
  end
  return opts
end

-- The type of v as errors name it: a userdata's protected metatable is its type name.
local function type_name(v)
  local mt = getmetatable(v)
  return type(mt) == "string" and mt or type(v)
end

-- Raises "<op>: expected a tensor, got nil" (or "... a tensor for <what> ...") unless v is a
-- Tensor (a released one goes on: its method says it was released, naming the op).
local function check_tensor(op, v, what)
  if getmetatable(v) ~= "Tensor" then
    error(op .. ": expected a tensor" .. (what and " for " .. what or "") .. ", got " .. type_name(v), 3)
  end
  if not pcall(v.dim, v) then error(op .. ": " .. (what or "tensor") .. " has been released (closed)", 3) end
end

-- y = x @ w^T + b, with w [out, in] and b [out] (composite over matmul, t and +).
function F.linear(x, w, b)
  check_tensor("linear", x, "input")
  check_tensor("linear", w, "weight")
  if b ~= nil then check_tensor("linear", b, "bias") end
  if w:dim() > 2 then error("linear: weight must be [out, in], got " .. w:dim() .. "-d", 2) end
  local y = x:matmul(w:t())
  if b ~= nil then y = y + b end
  return y
end

-- ids: integer tensor of 1-based ids; weight [vocab, dim] -> ids.shape .. {dim}.
function F.embedding(ids, weight)
  return core._embedding(ids, weight)
end

-- normalized_shape: an integer or a table (the last dims of x).
function F.layer_norm(x, normalized_shape, weight, bias, eps)
  return core._layer_norm(x, normalized_shape, weight, bias, eps or 1e-5)
end

-- eps nil: the float32 machine epsilon (float64's for float64 inputs), as torch's eps=None.
function F.rms_norm(x, normalized_shape, weight, eps)
  return core._rms_norm(x, normalized_shape, weight, eps)
end

-- logits [n, classes, ...] (or [classes]), target [n, ...] of 1-based class indices.
-- opts: ignore_index (default -100, compared with the 1-based target values),
-- reduction "mean" (over non-ignored targets, the default), "sum" or "none".
local ce_opts = {ignore_index = true, reduction = true}
function F.cross_entropy(logits, target, opts)
  opts = check_opts("cross_entropy", opts, ce_opts)
  local ignore = opts.ignore_index
  if ignore == nil then ignore = -100 end
  if math.type(ignore) ~= "integer" then
    error("cross_entropy: ignore_index must be an integer, got " .. tostring(ignore), 2)
  end
  return core._cross_entropy(logits, target, ignore, opts.reduction or "mean")
end

-- Inverted dropout: zeroes elements with probability p and scales the rest by 1/(1-p),
-- with the generator's mask (dt._dropout, doc/random.md).  Identity when not training or
-- p == 0.  Under autograd the op's node keeps the mask (dt._dropout's second result), so the
-- gradient is g * mask / (1 - p) with the forward's mask and backward draws nothing.
function F.dropout(x, p, training)
  p = p or 0.5
  if training == nil then training = true end
  if type(p) ~= "number" or p < 0 or p > 1 then
    error("dropout: p must be a number in [0, 1], got " .. (type(p) == "number" and tostring(p) or type(p)), 2)
  end
  if not training or p == 0 then return x end
  return (core._dropout(x, p))
end

-- q [..., L, E], k [..., S, E], v [..., S, Ev]; batch dims broadcast.
-- opts: attn_mask (bool: true = attend, or float: added to the scores), is_causal, scale
-- (default 1/sqrt(E)).
local sdpa_opts = {attn_mask = true, is_causal = true, scale = true}
function F.scaled_dot_product_attention(q, k, v, opts, ...)
  if select("#", ...) > 0 or core.is_tensor(opts) then -- torch's positional (attn_mask, dropout_p, is_causal)
    error("scaled_dot_product_attention: pass attn_mask, is_causal and scale in an options table, "
          .. "e.g. F.scaled_dot_product_attention(q, k, v, {is_causal = true})", 2)
  end
  opts = check_opts("scaled_dot_product_attention", opts, sdpa_opts)
  return core._sdpa(q, k, v, opts.attn_mask, opts.is_causal and true or false, opts.scale)
end

-- Thin aliases of the tensor methods (checked here: `nil:relu()` would not name relu).
function F.relu(x) check_tensor("relu", x) return x:relu() end
function F.gelu(x, approximate) check_tensor("gelu", x) return x:gelu(approximate) end
function F.silu(x) check_tensor("silu", x) return x:silu() end
-- hardtanh(x, min_val = -1, max_val = 1); leaky_relu(x, negative_slope = 0.01) (also as options tables)
function F.hardtanh(x, min_val, max_val) check_tensor("hardtanh", x) return x:hardtanh(min_val, max_val) end
function F.leaky_relu(x, negative_slope) check_tensor("leaky_relu", x) return x:leaky_relu(negative_slope) end
function F.softmax(x, dim) check_tensor("softmax", x) return x:softmax(dim) end
function F.log_softmax(x, dim) check_tensor("log_softmax", x) return x:log_softmax(dim) end

return F
