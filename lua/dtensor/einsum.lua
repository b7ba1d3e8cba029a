-- dt.einsum(equation, ...): torch's einsum over the operator table's ops (sum, permute,
-- reshape, expand, bmm, mul), so it runs alike on plain tensors and DTensors and is
-- differentiable.  Subscripts are letters; "..." stands for the dims not named (broadcast
-- across operands, aligned on the right); without "->" the output is the letters used once,
-- in alphabetical order, after the "..." dims.  A letter repeated in one operand takes its
-- diagonal.  Operands are contracted left to right, each pair as one batched matmul.
-- Errors name the equation.
local core = require "dtensor.core"

local function fail(eq, msg) error("einsum: " .. msg .. " (equation '" .. eq .. "')", 3) end

-- the labels of one term: letters, and "..." as the ellipsis labels ".1" .. ".E" (the last
-- `count` of them for an operand with count unnamed dims)
local function parse_term(eq, term, what)
  local labels, ell, i = {}, nil, 1
  while i <= #term do
    local ch = term:sub(i, i)
    if term:sub(i, i + 2) == "..." then
      if ell then fail(eq, what .. " has two '...'") end
      ell, i = #labels + 1, i + 3
    elseif ch:match("%a") then labels[#labels + 1], i = ch, i + 1
    else fail(eq, "invalid subscript '" .. ch .. "' in " .. what .. " (letters and '...' only)") end
  end
  return labels, ell
end

local function with_ellipsis(labels, ell, count, E)
  if not ell then return labels end
  local out = {}
  for i = 1, ell - 1 do out[#out + 1] = labels[i] end
  for k = E - count + 1, E do out[#out + 1] = "." .. k end
  for i = ell, #labels do out[#out + 1] = labels[i] end
  return out
end

local function index_of(list, v)
  for i, x in ipairs(list) do if x == v then return i end end
end

local function sizes_product(sizes, labels)
  local p = 1
  for _, l in ipairs(labels) do p = p * sizes[l] end
  return p
end

-- the diagonal of x over dims p and q (same size n): x * I(n) broadcast, summed over q
local function diagonal(x, p, q)
  local n, nd = x:size(p), x:dim()
  local eye = core.eye(n, {dtype = x.dtype})
  local shape = {}
  for d = 1, nd do shape[d] = (d == p or d == q) and n or 1 end
  eye = eye:reshape(shape)
  if core.is_dtensor(x) then
    local rep = {}
    for m = 1, x.device_mesh.ndim do rep[m] = core.Replicate() end
    eye = core.distribute_tensor(eye, x.device_mesh, rep, {src_rank = false})
  end
  return (x * eye):sum(q)
end

-- operand {t = tensor, labels = {...}}: repeated labels -> diagonals
local function take_diagonals(op)
  local i = 1
  while i <= #op.labels do
    local j = index_of({table.unpack(op.labels, i + 1)}, op.labels[i])
    if j then
      op.t = diagonal(op.t, i, i + j)
      table.remove(op.labels, i + j)
    else i = i + 1 end
  end
end

-- sums away op's labels that are not in keep
local function sum_unused(op, keep)
  local dims, kept = {}, {}
  for i, l in ipairs(op.labels) do
    if keep[l] then kept[#kept + 1] = l else dims[#dims + 1] = i end
  end
  if #dims > 0 then op.t, op.labels = op.t:sum(dims), kept end
end

-- op permuted to the label order `order` and expanded to sizes (broadcast size-1 dims)
local function arrange(op, order, sizes)
  local perm, shape, expand = {}, {}, false
  for i, l in ipairs(order) do
    perm[i] = index_of(op.labels, l)
    shape[i] = sizes[l]
  end
  local t = #perm > 0 and op.t:permute(perm) or op.t
  for i, l in ipairs(order) do if t:size(i) ~= sizes[l] then expand = true end end
  if expand then t = t:expand(shape) end
  return t
end

local function contract(a, b, needed, sizes)
  local batch, a_only, b_only, summed = {}, {}, {}, {}
  for _, l in ipairs(a.labels) do
    if index_of(b.labels, l) then
      if needed[l] then batch[#batch + 1] = l else summed[#summed + 1] = l end
    else a_only[#a_only + 1] = l end
  end
  for _, l in ipairs(b.labels) do if not index_of(a.labels, l) then b_only[#b_only + 1] = l end end
  local function cat(...)
    local out = {}
    for _, list in ipairs {...} do for _, l in ipairs(list) do out[#out + 1] = l end end
    return out
  end
  local nb, na, nk, nm = sizes_product(sizes, batch), sizes_product(sizes, a_only), sizes_product(sizes, summed),
                         sizes_product(sizes, b_only)
  local ta = arrange(a, cat(batch, a_only, summed), sizes):reshape({nb, na, nk})
  local tb = arrange(b, cat(batch, summed, b_only), sizes):reshape({nb, nk, nm})
  local labels = cat(batch, a_only, b_only)
  local shape = {}
  for i, l in ipairs(labels) do shape[i] = sizes[l] end
  return {t = ta:bmm(tb):reshape(shape), labels = labels}
end

return function(equation, ...)
  if type(equation) ~= "string" then error("einsum: expected an equation string, got " .. type(equation), 2) end
  local eq = equation:gsub("%s", "")
  local operands = table.pack(...)
  if operands.n == 1 and type(operands[1]) == "table" and not core.is_tensor(operands[1]) then
    operands = table.pack(table.unpack(operands[1]))
  end
  local lhs, rhs = eq:match("^(.-)%->(.*)$")
  if not lhs then lhs = eq end
  local terms = {}
  for term in (lhs .. ","):gmatch("([^,]*),") do terms[#terms + 1] = term end
  if #terms ~= operands.n then fail(equation, #terms .. " operand terms for " .. operands.n .. " tensors") end
  local ops, E, counts = {}, 0, {}
  for k, term in ipairs(terms) do
    local t = operands[k]
    if not core.is_tensor(t) then fail(equation, "operand " .. k .. " is not a tensor") end
    local labels, ell = parse_term(equation, term, "operand " .. k)
    local count = t:dim() - #labels
    if count < 0 or (count > 0 and not ell) then
      fail(equation, string.format("operand %d has %d dims but term '%s' names %d", k, t:dim(), term, #labels))
    end
    counts[k], E = count, math.max(E, ell and count or 0)
    ops[k] = {t = t, labels = labels, ell = ell}
  end
  local sizes, uses = {}, {}
  for k, op in ipairs(ops) do
    op.labels = with_ellipsis(op.labels, op.ell, counts[k], E)
    for i, l in ipairs(op.labels) do
      local s = op.t:size(i)
      if sizes[l] and sizes[l] ~= s and sizes[l] ~= 1 and s ~= 1 then
        fail(equation, string.format("subscript '%s' has size %d in operand %d and %d elsewhere", l:sub(1, 1) == "." and "..." or l,
                                     s, k, sizes[l]))
      end
      if not sizes[l] or sizes[l] == 1 then sizes[l] = s end
    end
    for _, l in ipairs(op.labels) do uses[l] = (uses[l] or 0) + 1 end
  end
  local out = {}
  if rhs then
    local labels, ell = parse_term(equation, rhs, "the output")
    out = with_ellipsis(labels, ell, E, E)
    if not ell and E > 0 then
      fail(equation, "the output must name '...' when the operands have unnamed dims")
    end
    local seen = {}
    for _, l in ipairs(out) do
      if seen[l] then fail(equation, "output subscript '" .. l .. "' appears twice") end
      if not uses[l] and l:sub(1, 1) ~= "." then fail(equation, "output subscript '" .. l .. "' is in no operand") end
      seen[l] = true
    end
  else
    for k = 1, E do out[#out + 1] = "." .. k end
    local once = {}
    for l, n in pairs(uses) do if n == 1 and l:sub(1, 1) ~= "." then once[#once + 1] = l end end
    table.sort(once)
    for _, l in ipairs(once) do out[#out + 1] = l end
  end
  local in_out = {}
  for _, l in ipairs(out) do in_out[l] = true end
  -- diagonals, then each operand's labels needed neither by the output nor another operand summed
  for k, op in ipairs(ops) do
    take_diagonals(op)
    local keep = {}
    for l in pairs(in_out) do keep[l] = true end
    for j, other in ipairs(ops) do
      if j ~= k then for _, l in ipairs(other.labels) do keep[l] = true end end
    end
    sum_unused(op, keep)
  end
  local acc = ops[1]
  for k = 2, #ops do
    local needed = {}
    for l in pairs(in_out) do needed[l] = true end
    for j = k + 1, #ops do for _, l in ipairs(ops[j].labels) do needed[l] = true end end
    acc = contract(acc, ops[k], needed, sizes)
  end
  sum_unused(acc, in_out)
  return arrange(acc, out, sizes)
end
