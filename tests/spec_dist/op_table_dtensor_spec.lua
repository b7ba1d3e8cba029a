-- The operator table walked row by row on DTensors, SPMD (dtlua -n 1..4, mpirun -np 2/4):
-- for every row of src/ops/op_list.h that runs on DTensors, its cases (the table of
-- tests/spec/support/op_cases.lua, shared with tests/spec/op_table_spec.lua) on every
-- placement family -- Replicate, Shard on each dim (uneven sizes included), Partial(sum)
-- built with dt.from_local from non-zero mixed-sign parts where the op takes it, a 2-d mesh
-- when the world has 4 ranks -- checking full_tensor() against the same op on one device:
-- bitwise for data movement and random ops (same seed), allclose for the others.  An op the
-- dispatcher refuses must raise its documented error (on every rank: a test passes only if
-- it passes on every rank).  For the differentiable rows, the gradient of each floating input
-- through DTensors equals the plain gradient.  Fails on a row without a case; prints the
-- coverage at the end.
local C = require "tests.spec.support.op_cases"
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local rows = dt._op_rows()
local n = dt.world_size()
local FAMILIES = {"R", "S", "P", "2-d"}
local coverage = {} -- op -> family -> "ok" | "refused" | nil

local function meshes()
  local list = {{"1-d of " .. n, dt.init_device_mesh("cpu", {n})}}
  if n == 4 then list[2] = {"2x2", dt.init_device_mesh("cpu", {2, 2})} end
  return list
end

local function is_float(t) return t.dtype:match("float") ~= nil end

-- X as a Partial(sum) DTensor whose parts are non-zero and of both signs: coordinate 0 holds
-- X + (k - 1) * Y, the others -Y (exact: quarters in float64).
local function partial_of(X, mesh, rng)
  local Y = C.t_of(rng, X:size(), X.dtype)
  local coord = mesh:get_coordinate()
  local part = (coord and coord[1] == 0) and X + Y * (n - 1) or -Y
  return dt.from_local(part:contiguous(), mesh, {dt.Partial("sum")}, {shape = X:size()})
end

-- the placement lists of one family for a case: a list of {label, placements per input}
local function placements_of(family, c, mesh)
  local ins = c.inputs
  local function all(p) local l = {} for j = 1, #ins do l[j] = p(j) end return l end
  local R1 = function() return {dt.Replicate()} end
  if family == "R" then return {{"R", all(R1)}} end
  if family == "S" then
    local out, nd = {}, ins[1] and ins[1]:dim() or 0
    for _, t in ipairs(ins) do nd = math.max(nd, t:dim()) end
    for d = 1, nd do
      out[#out + 1] = {"S(" .. d .. ")", all(function(j)
        return {ins[j]:dim() >= d and dt.Shard(d) or dt.Replicate()}
      end)}
    end
    return out
  end
  if family == "P" then return {{"P", all(function(j) return {j == 1 and "P" or dt.Replicate()} end)}} end
  if family == "2-d" then
    return {{"(S(1), S(-1))", all(function(j)
      local d = ins[j]:dim()
      return {d >= 1 and dt.Shard(1) or dt.Replicate(), d >= 1 and dt.Shard(d) or dt.Replicate()}
    end)}}
  end
end

-- factories: the placements for mesh_opts
local function factory_placements(family, c, mesh)
  local nd = c.static.shape and #c.static.shape or 1
  if family == "R" then
    local p = {} for m = 1, mesh.ndim do p[m] = dt.Replicate() end
    return {{"R", p}}
  end
  if family == "S" then
    local out = {}
    for d = 1, nd do out[#out + 1] = {"S(" .. d .. ")", {dt.Shard(d)}} end
    return out
  end
  if family == "P" then return {{"P", {dt.Partial("sum")}}} end
  if family == "2-d" then return {{"(S(1), R)", {dt.Shard(1), dt.Replicate()}}} end
end

local function compare(e, got, want, what)
  assert(dt.is_dtensor(got), what .. ": the result is not a DTensor")
  assert.are.same(want:size(), got:size(), what .. ": global shape")
  assert.are.equal(want.dtype, got.dtype, what .. ": dtype")
  local full = got:full_tensor()
  if e.shape_only then return end
  C.check_ref(full, C.ref_of(want), (e.exact or e.random) and 0 or math.max(C.tol(e, want.dtype), 1e-9), what)
end

-- ---- gradients: for a differentiable row, the gradient of each floating input through
-- DTensors equals the plain one.  The loss is sum_j sum(out_j * W_j) over the outputs that
-- require grad, with fixed weights; the op runs on clones of the leaves (in-place rows too).
local function weighted_loss(outs, weight)
  local loss
  for j = 1, outs.n do
    local o = outs[j]
    if dt.is_tensor(o) and o.requires_grad then
      local l = (o * weight(j, o)):sum()
      loss = loss and loss + l or l
    end
  end
  return loss
end

local function grad_tol(dtype)
  return dtype == "float64" and 1e-9 or dtype == "float32" and 1e-4 or 2e-2
end

-- Returns "ok", or nil when no output depends on a floating input; with may_refuse, "refused"
-- when the op raises on these DTensors (the placement families check the documented errors).
local function grad_one(e, c, mesh, pl, seed, what, may_refuse)
  local leaves, plain = {}, {}
  for j, t in ipairs(c.inputs) do
    if is_float(t) then leaves[j] = t:clone():requires_grad_() end
    plain[j] = leaves[j] and leaves[j]:clone() or t
  end
  local W = {}
  local loss = weighted_loss(table.pack(e.run(plain, c.static)), function(j, o)
    W[j] = C.t_of(C.prng(seed + j), o:size(), o.dtype)
    return W[j]
  end)
  if not loss then return nil end
  loss:backward()
  local rng, dleaves, dins = C.prng(seed), {}, {}
  for j, t in ipairs(c.inputs) do
    local d = pl[j][1] == "P" and partial_of(t:contiguous(), mesh, rng)
      or dt.distribute_tensor(t:contiguous(), mesh, pl[j], {src_rank = false})
    if leaves[j] then dleaves[j] = d:requires_grad_() end
    dins[j] = dleaves[j] and d:clone() or d
  end
  local rep = {}
  for m = 1, mesh.ndim do rep[m] = dt.Replicate() end
  local ok, douts = pcall(function() return table.pack(e.run(dins, c.static)) end)
  if not ok and may_refuse and tostring(douts):find(what:match("^%S+") .. ":", 1, true) then return "refused" end
  assert(ok, douts)
  local dloss = weighted_loss(douts, function(j)
    return dt.distribute_tensor(W[j], mesh, rep, {src_rank = false})
  end)
  assert(dloss, what .. ": the outputs on DTensors do not require grad")
  dloss:backward()
  for j, l in pairs(leaves) do
    local g, dg = l.grad, dleaves[j].grad
    if not g then
      assert(not dg, what .. ": input " .. j .. " has a gradient on DTensors only")
    else
      assert(dg, what .. ": input " .. j .. " has no gradient on DTensors")
      local full = dg:full_tensor() -- off the mesh: the empty local
      if mesh:get_coordinate() then C.check_ref(full, C.ref_of(g), grad_tol(g.dtype), what .. ": gradient of input " .. j) end
    end
  end
  return "ok"
end

-- runs one case of entry e under one placement list; returns "ok" or "refused", and whether
-- the gradient was checked
local function run_one(e, row, c, mesh, family, label, pl, seed)
  local what = row.name .. " " .. label .. " on " .. tostring(mesh) .. " (" .. c.label .. ")"
  local dins, mesh_opts = {}, nil
  local rng = C.prng(seed)
  if e.factory then
    mesh_opts = {device_mesh = mesh, placements = pl}
  else
    for j, t in ipairs(c.inputs) do
      if pl[j][1] == "P" then dins[j] = partial_of(t:contiguous(), mesh, rng)
      else dins[j] = dt.distribute_tensor(t:contiguous(), mesh, pl[j], {src_rank = false}) end
    end
  end
  if e.random then dt.manual_seed(seed) end
  local ok, got = pcall(function() return table.pack(e.run(dins, c.static, mesh_opts)) end)
  local refusal = e.refuses and e.refuses[family]
  if not ok then
    assert(refusal, what .. ": raised " .. tostring(got))
    assert(tostring(got):find(refusal, 1, true), what .. ": expected the documented error '" .. refusal .. "', got " .. tostring(got))
    return "refused"
  end
  assert(not refusal, what .. ": expected the documented error '" .. tostring(refusal) .. "'")
  if e.random then dt.manual_seed(seed) end
  local want = table.pack(e.run(c.inputs, c.static))
  assert.are.equal(want.n, got.n, what .. ": number of results")
  for j = 1, want.n do compare(e, got[j], want[j], what .. " result " .. j) end
  local grad = row.differentiable and not e.factory and not e.random and grad_one(e, c, mesh, pl, seed, what)
  return "ok", grad
end

describe("operator table on DTensors", function()
  it("every row has a case, and every case a row", function() C.assert_complete() end)

  for idx, row in ipairs(rows) do
    local e = C.ops[row.name]
    if e and e.dist ~= false then
      it(row.name .. ": every placement family against one device", function()
        local cases = e.cases(C.prng(1000 + idx))
        coverage[row.name] = {}
        for _, m in ipairs(meshes()) do
          local mesh = m[2]
          for _, family in ipairs(FAMILIES) do
            local applies = (family == "2-d") == (mesh.ndim == 2)
            for k = 1, math.min(2, #cases) do
              local c = cases[k]
              if applies and family == "P" then
                applies = e.partial ~= false and not e.factory and c.inputs[1] ~= nil and is_float(c.inputs[1])
                if e.factory then applies = true end
              end
              if applies then
                local lists = (e.factory and factory_placements or placements_of)(family, c, mesh)
                for _, l in ipairs(lists) do
                  local r, grad = run_one(e, row, c, mesh, family, l[1], l[2], 5000 + idx * 10 + k)
                  local prev = coverage[row.name][family]
                  coverage[row.name][family] = (prev == "refused" or r == "refused") and "refused" or r
                  if grad then coverage[row.name].grad = "ok" end
                end
              end
            end
          end
        end
      end)
    end
  end

  it("differentiable rows: gradients on random placements (Shard of any dim, Replicate, Partial sum/avg/max) " ..
     "on every mesh of dtensor_helpers.lua", function()
    local rng, checked, refused = C.prng(777), 0, 0
    for _, m in ipairs(H.meshes()) do
      for idx, row in ipairs(rows) do
        local e = C.ops[row.name]
        if row.differentiable and e and e.dist ~= false and not e.factory and not e.random then
          local c = e.cases(C.prng(1000 + idx))[1]
          local pl = {}
          for j, t in ipairs(c.inputs) do pl[j] = H.placements(rng, m[2], t:dim(), is_float(t) and t.dtype) end
          local what = row.name .. " on " .. m[1] .. " (" .. c.label .. ")"
          for j = 1, #pl do what = what .. " " .. H.placement_string(pl[j]) end
          local r = grad_one(e, c, m[2], pl, 9000 + idx, what, true)
          checked = checked + (r == "ok" and 1 or 0)
          refused = refused + (r == "refused" and 1 or 0)
        end
      end
    end
    if dt.rank() == 0 then
      print(string.format("\ngradients on random placements: %d cases checked, %d refused by the dispatcher", checked, refused))
    end
    assert(checked > 0)
  end)

  it("prints the coverage: op x device x placement family", function()
    local head = string.format("%-30s %-5s", "op (src/ops/op_list.h)", "dev")
    for _, f in ipairs(FAMILIES) do head = head .. string.format(" %-8s", f) end
    local lines, done = {head .. "  grad"}, 0
    for _, row in ipairs(rows) do
      local e, cov = C.ops[row.name], coverage[row.name]
      local line = string.format("%-30s %-5s", row.name, "cpu")
      if e and e.dist == false then
        line = line .. "  no DTensor form: " .. e.dist_reason
        done = done + 1
      else
        if cov then done = done + 1 end
        for _, f in ipairs(FAMILIES) do
          local v = cov and cov[f]
          if f == "2-d" and n ~= 4 then v = "(n=4)" end
          line = line .. string.format(" %-8s", v == "refused" and "error" or v or (cov and "-" or "NONE"))
        end
        line = line .. "  " .. (cov and cov.grad or (row.differentiable and "NONE" or "-"))
      end
      lines[#lines + 1] = line
    end
    lines[#lines + 1] = string.format("op table coverage on DTensors (%d ranks): %d of %d rows; " ..
      "ok = equals one device (grad: the gradients through DTensors equal the plain ones), error = the documented " ..
      "refusal, - = not applicable", n, done, #rows)
    if dt.rank() == 0 then io.write("\n", table.concat(lines, "\n"), "\n") end
    assert.are.equal(#rows, done, "rows without a passing DTensor case")
  end)
end)
