-- The Lua side of the sharding dispatcher (src/dist/dispatch.c, doc/dispatch.md):
-- dt.register_sharding, dt.register_op / dt.ops, dt.explain, plugins from DTLUA_PLUGINS,
-- and x:item() / x:equal(y) for DTensors (answers every rank of the world agrees on).
-- Installs itself into the dt module.
return function(dt)
  local T = dt.Tensor
  dt.ops = dt.ops or {}
  local lua_ops = {} -- name -> {forward =, sharding =}

  local function traceback_call(what, f, ...)
    local res = table.pack(xpcall(f, debug.traceback, ...))
    if not res[1] then error(what .. ": " .. tostring(res[2]), 0) end
    return table.unpack(res, 2, res.n)
  end

  function dt.register_sharding(name, fn)
    if type(name) ~= "string" then error("register_sharding: op name must be a string, got " .. type(name), 2) end
    if fn ~= nil and type(fn) ~= "function" then
      error("register_sharding: rule must be a function(schema) -> strategies, got " .. type(fn), 2)
    end
    if lua_ops[name] then lua_ops[name].sharding = fn return end
    dt._register_sharding(name, fn)
  end

  -- ---- ops written in Lua ----
  local function placement_list(p, mesh_ndim, ndim, where)
    if type(p) ~= "table" or #p ~= mesh_ndim then
      error(where .. ": expected a list of " .. mesh_ndim .. " placements (one per mesh dim)", 0)
    end
    local out = {}
    for m = 1, mesh_ndim do
      local q = p[m]
      if type(q) == "string" then
        if q == "R" then q = dt.Replicate()
        elseif q:match("^P") then q = q == "P" and dt.Partial("sum") or dt.Partial(q:match("^P%((%a+)%)$") or "?")
        elseif q:match("^S%-?%d+$") then q = dt.Shard(tonumber(q:sub(2)))
        else error(where .. ": bad placement '" .. q .. "'", 0) end
      end
      if q:is_shard() then
        local d = q.dim < 0 and q.dim + ndim + 1 or q.dim
        if d < 1 or d > ndim then
          error(where .. ": Shard(" .. q.dim .. ") is out of range for a " .. ndim .. "-d tensor", 0)
        end
        q = dt.Shard(d)
      end
      out[m] = q
    end
    return out
  end

  local function strings(placements)
    local s = {}
    for m, p in ipairs(placements) do s[m] = tostring(p) end
    return s
  end

  -- strategies of a Lua op for these DTensor args: list of {inputs, output, cost} (cost nil:
  -- unreachable)
  local function lua_strategies(name, op, tensors, mesh)
    local schema = {op = name, mesh_ndim = mesh.ndim, inputs = {}}
    for i, x in ipairs(tensors) do
      schema.inputs[i] = {shape = x:size(), dtype = x.dtype, placements = x.placements}
    end
    if not op.sharding then error(name .. ": no sharding rule for DTensor arguments; give register_op a sharding function", 0) end
    local list = traceback_call(name .. ": the sharding rule registered from Lua raised an error", op.sharding, schema)
    if type(list) ~= "table" then error(name .. ": the sharding rule from Lua must return a list of strategies", 0) end
    local out = {}
    for k, st in ipairs(list) do
      local where = name .. ": the sharding rule from Lua returned strategy " .. k
      if type(st) ~= "table" or type(st.inputs) ~= "table" or #st.inputs ~= #tensors then
        error(where .. ": expected {inputs = <" .. #tensors .. " placement lists>, output = <placements>}", 0)
      end
      local s = {inputs = {}, cost = 0}
      for i, x in ipairs(tensors) do
        s.inputs[i] = placement_list(st.inputs[i], mesh.ndim, #x:size(), where .. ", input " .. i)
        local c = dt._redistribute_cost(x, s.inputs[i])
        if c == nil then s.cost = nil elseif s.cost then s.cost = s.cost + c end
      end
      if st.output == nil then error(where .. ": no output placements", 0) end
      s.output, s.shape = st.output, st.shape
      out[k] = s
    end
    return out
  end

  local function choose(strats)
    local best
    for _, s in ipairs(strats) do
      if s.cost and (not best or s.cost < best.cost) then best = s end
    end
    return best
  end

  function dt.register_op(spec)
    if type(spec) ~= "table" then error("register_op: expected {name = , forward = , sharding = }", 2) end
    local name = spec.name
    if type(name) ~= "string" or name == "" then error("register_op: name must be a non-empty string", 2) end
    if type(spec.forward) ~= "function" then error("register_op: " .. name .. ": forward must be a function", 2) end
    if spec.sharding ~= nil and type(spec.sharding) ~= "function" then
      error("register_op: " .. name .. ": sharding must be a function(schema) -> strategies", 2)
    end
    local op = {forward = spec.forward, sharding = spec.sharding}
    lua_ops[name] = op
    local function call(...)
      local args = table.pack(...)
      local tensors, pos, mesh = {}, {}, nil
      for i = 1, args.n do
        if dt.is_dtensor(args[i]) then
          tensors[#tensors + 1], pos[#tensors + 1] = args[i], i
          mesh = mesh or args[i].device_mesh
        end
      end
      if not mesh then return op.forward(...) end
      for i = 1, args.n do
        if dt.is_tensor(args[i]) and not dt.is_dtensor(args[i]) then
          error(name .. ": argument " .. i .. " is a plain tensor mixed with DTensors; convert it with dt.from_local or dt.distribute_tensor", 2)
        end
      end
      local best = choose(lua_strategies(name, op, tensors, mesh))
      if not best then error(name .. ": no sharding strategy of the rule fits these DTensor arguments", 2) end
      local locals, moved = {table.unpack(args, 1, args.n)}, {}
      for k, x in ipairs(tensors) do
        moved[k] = x:redistribute(best.inputs[k])
        locals[pos[k]] = moved[k]:to_local()
      end
      local y = op.forward(table.unpack(locals, 1, args.n))
      if not dt.is_tensor(y) then error(name .. ": forward must return a tensor", 2) end
      local out = placement_list(best.output, mesh.ndim, #y:size(), name .. ": the strategy's output")
      -- the global shape: the strategy's `shape`, else that of an input placed and sized
      -- like the output (a shape-preserving op), else even shards (from_local's rule)
      local shape = best.shape
      for k = 1, #tensors do
        if shape then break end
        local same = #moved[k]:size() == #y:size() and #out == #best.inputs[k]
        for m = 1, #out do same = same and out[m] == best.inputs[k][m] end
        local ls, ys = moved[k]:to_local():size(), y:size()
        for d = 1, #ys do same = same and (ls[d] == ys[d] or mesh:get_coordinate() == nil) end
        if same then shape = moved[k]:size() end
      end
      return dt.from_local(y, mesh, out, shape and {shape = shape} or nil)
    end
    dt.ops[name] = call
    return call
  end

  -- dt.explain(op_name, args...): the strategies, their costs and the choice, as text.
  function dt.explain(name, ...)
    if lua_ops[name] then
      local tensors, mesh = {}, nil
      for i = 1, select("#", ...) do
        local a = select(i, ...)
        if dt.is_dtensor(a) then tensors[#tensors + 1], mesh = a, mesh or a.device_mesh end
      end
      if not mesh then error("explain: no DTensor argument", 2) end
      local strats = lua_strategies(name, lua_ops[name], tensors, mesh)
      local lines = {name .. ": strategies (input placements -> output placements):"}
      for _, s in ipairs(strats) do
        local ins = {}
        for i, p in ipairs(s.inputs) do ins[i] = "(" .. table.concat(strings(p), ", ") .. ")" end
        lines[#lines + 1] = table.concat(ins, ", ") .. " -> (" .. table.concat(strings(placement_list(s.output, mesh.ndim, 8, name)), ", ") .. ")  " ..
                                (s.cost and string.format("cost %.3g s", s.cost) or "(not reachable)")
      end
      local best = choose(strats)
      if best then lines[#lines + 1] = "chosen: the cheapest, first listed on a tie" end
      return table.concat(lines, "\n") .. "\n"
    end
    local f = dt[name] or T[name]
    if type(f) ~= "function" then error("explain: unknown op '" .. tostring(name) .. "'", 2) end
    return dt._explain(f, ...)
  end

  -- ---- scalar answers: the same on every rank of the world ----
  local item, equal = T.item, dt.equal
  local function world_value(mesh, v, dtype)
    if mesh:size() == dt.world_size() then return v end
    -- ranks outside the mesh get it from the mesh's first rank
    local root = mesh:layout()
    while type(root) == "table" do root = root[1] end
    local t = dt.tensor({v == nil and 0 or v}, {dtype = dtype})
    dt.distributed.broadcast(t, root)
    return item(t[1])
  end

  T.item = function(x)
    if not dt.is_dtensor(x) then return (item(x)) end -- not a tail call: errors name item
    if x:numel() ~= 1 then error("item: a DTensor of " .. x:numel() .. " elements (item needs exactly one)", 2) end
    local v = x.device_mesh:get_coordinate() and item(x:full_tensor()) or nil
    local dtype = (x.dtype == "bool" or x.dtype:match("int")) and "int64" or "float64"
    if x.dtype == "bool" and v ~= nil then v = v and 1 or 0 end
    v = world_value(x.device_mesh, v, dtype)
    if x.dtype == "bool" then return v ~= 0 end
    return v
  end

  local function dequal(x, y)
    if not (dt.is_dtensor(x) or dt.is_dtensor(y)) then return (equal(x, y)) end
    if not (dt.is_dtensor(x) and dt.is_dtensor(y)) then
      error("equal: a DTensor and a plain tensor; convert the plain one with dt.distribute_tensor or compare full_tensor()s", 3)
    end
    local sx, sy = x:size(), y:size()
    local same = x.dtype == y.dtype and #sx == #sy
    for d = 1, #sx do same = same and sx[d] == sy[d] end
    if not same then return false end -- from metadata: every rank agrees
    local target = {}
    for m, p in ipairs(x.placements) do target[m] = p:is_partial() and dt.Replicate() or p end
    local mine = 1
    if x.device_mesh:get_coordinate() then
      mine = equal(x:redistribute(target):to_local(), y:redistribute(target):to_local()) and 1 or 0
    else
      x:redistribute(target) -- nothing moves off-mesh; kept for the SPMD order
      y:redistribute(target)
    end
    local t = dt.tensor({mine}, {dtype = "int64"})
    dt.distributed.all_reduce(t, "min") -- all ranks of the world AND their answers
    return item(t[1]) == 1
  end
  T.equal = dequal
  dt.equal = dequal

  -- ---- *_like factories keep a DTensor's mesh and placements (Partial becomes Replicate:
  -- a fresh value is not a sum of pending parts) ----
  local function like_opts(x, opts)
    local o = {}
    if type(opts) == "table" then for key, v in pairs(opts) do o[key] = v end end
    o.device_mesh = x.device_mesh
    o.placements = {}
    for m, p in ipairs(x.placements) do o.placements[m] = p:is_partial() and dt.Replicate() or p end
    o.dtype = o.dtype or x.dtype
    return o
  end
  -- plain calls go through plain.<name>(...), not a tail call, so argument errors name it
  local plain = {}
  for _, name in ipairs {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like"} do
    plain[name] = dt[name]
  end
  function dt.zeros_like(x, opts)
    if dt.is_dtensor(x) then return dt.zeros(x:size(), like_opts(x, opts)) end
    return (plain.zeros_like(x, opts))
  end
  function dt.ones_like(x, opts)
    if dt.is_dtensor(x) then return dt.ones(x:size(), like_opts(x, opts)) end
    return (plain.ones_like(x, opts))
  end
  function dt.empty_like(x, opts)
    if dt.is_dtensor(x) then return dt.empty(x:size(), like_opts(x, opts)) end
    return (plain.empty_like(x, opts))
  end
  function dt.rand_like(x, opts)
    if dt.is_dtensor(x) then return dt.rand(x:size(), like_opts(x, opts)) end
    return (plain.rand_like(x, opts))
  end
  function dt.randn_like(x, opts)
    if dt.is_dtensor(x) then return dt.randn(x:size(), like_opts(x, opts)) end
    return (plain.randn_like(x, opts))
  end
  function dt.full_like(x, value, opts)
    if dt.is_dtensor(x) then return dt.full(x:size(), value, like_opts(x, opts)) end
    return (plain.full_like(x, value, opts))
  end

  -- ---- embedding with a DTensor weight: per mesh dim, a row-wise (vocab) sharded weight
  -- gives a masked local lookup and a Partial(sum) output, a column-wise one a Shard on the
  -- output's last dim; a replicated weight lets the ids' sharding through.  The ids must be
  -- replicated where the weight is sharded.  Ids outside the vocab give zero rows here (each
  -- rank sees only its own rows), not an error. ----
  local F = dt.nn.functional
  local plain_embedding = F.embedding
  function F.embedding(ids, weight)
    if not (dt.is_dtensor(ids) or dt.is_dtensor(weight)) then return (plain_embedding(ids, weight)) end
    if not (dt.is_dtensor(ids) and dt.is_dtensor(weight)) then
      error("embedding: ids and weight must both be DTensors (or neither); convert the plain one with " ..
            "dt.from_local or dt.distribute_tensor", 2)
    end
    local mesh = weight.device_mesh
    if ids.device_mesh ~= mesh then
      error("embedding: DTensor operands on different meshes: " .. tostring(ids.device_mesh) .. " and " .. tostring(mesh), 2)
    end
    local wsize = weight:size()
    if #wsize ~= 2 then error("embedding: weight must be 2-d [vocab, dim], got " .. #wsize .. "-d", 2) end
    local wt, it, out, rowwise = {}, {}, {}, false
    local nd = #ids:size()
    for m = 1, mesh.ndim do
      local wp, ip = weight.placements[m], ids.placements[m]
      if wp:is_shard() then
        wt[m], it[m] = wp, dt.Replicate()
        if wp.dim == 1 then out[m], rowwise = dt.Partial("sum"), true else out[m] = dt.Shard(nd + 1) end
      else
        wt[m] = dt.Replicate()
        it[m] = ip:is_shard() and ip or dt.Replicate()
        out[m] = it[m]
      end
    end
    local shape = ids:size()
    shape[#shape + 1] = wsize[2]
    local w2, i2 = weight:redistribute(wt), ids:redistribute(it)
    if not mesh:get_coordinate() then return dt.from_local(dt.empty(0, {dtype = weight.dtype}), mesh, out, {shape = shape}) end
    local wl, il = w2:to_local(), i2:to_local()
    local y
    if rowwise then
      local start, len = 0, wl:size(1)
      for _, b in ipairs(dt._dtensor_shards(w2)) do
        if b.rank == dt.rank() then start = b.offset[1] end
      end
      local shifted = il - start
      local outside = (shifted:lt(1):long() + shifted:gt(len):long()):gt(0)
      if len == 0 then
        local ls = il:size()
        ls[#ls + 1] = wl:size(2)
        y = dt.zeros(ls, {dtype = wl.dtype})
      else
        y = dt.where(outside:unsqueeze(-1), 0, plain_embedding(dt.where(outside, 1, shifted), wl))
      end
    else
      y = plain_embedding(il, wl)
    end
    return dt.from_local(y, mesh, out, {shape = shape})
  end

  -- ---- cross_entropy on DTensor logits: batch/spatial shardings pass through (the target
  -- follows); a class-sharded dim (loss parallel) is never gathered: the max, the sum of
  -- exponentials and the target's logit are reduced across the class shards (Partial(max),
  -- Partial(sum)), each rank reading only its own classes. ----
  local plain_ce = F.cross_entropy
  local function rebuild(x, mesh, placements, shape)
    return dt.from_local(x, mesh, placements, {shape = shape})
  end
  function F.cross_entropy(logits, target, opts)
    if not (dt.is_dtensor(logits) or dt.is_dtensor(target)) then return (plain_ce(logits, target, opts)) end
    if not (dt.is_dtensor(logits) and dt.is_dtensor(target)) then
      error("cross_entropy: logits and target must both be DTensors (or neither); convert the plain one with " ..
            "dt.from_local or dt.distribute_tensor", 2)
    end
    local mesh = logits.device_mesh
    if target.device_mesh ~= mesh then
      error("cross_entropy: DTensor operands on different meshes: " .. tostring(mesh) .. " and " .. tostring(target.device_mesh), 2)
    end
    opts = opts or {}
    local ignore = opts.ignore_index
    if ignore == nil then ignore = -100 end
    local reduction = opts.reduction or "mean"
    local shape = logits:size()
    local cdim = #shape == 1 and 1 or 2
    local lp, tp, batch, class = {}, {}, {}, false
    for m = 1, mesh.ndim do
      local p = logits.placements[m]
      if p:is_shard() and p.dim == cdim then
        lp[m], tp[m], batch[m], class = p, dt.Replicate(), dt.Replicate(), true
      elseif p:is_shard() then
        lp[m], tp[m], batch[m] = p, dt.Shard(p.dim < cdim and p.dim or p.dim - 1), dt.Shard(p.dim < cdim and p.dim or p.dim - 1)
      else
        lp[m], tp[m], batch[m] = dt.Replicate(), dt.Replicate(), dt.Replicate()
      end
    end
    if not class then -- plain per-element losses on the shards, then the reduction as DTensor ops
      local l2, t2 = logits:redistribute(lp), target:redistribute(tp)
      local tshape = target:size()
      local per
      if mesh:get_coordinate() then
        per = plain_ce(l2:to_local(), t2:to_local(), {ignore_index = ignore, reduction = "none"})
      else
        per = dt.empty(0, {dtype = logits.dtype})
      end
      local loss = rebuild(per, mesh, batch, tshape)
      if reduction == "none" then return loss end
      if reduction == "sum" then return loss:sum() end
      return loss:sum() / t2:ne(ignore):sum()
    end
    local l2, t2 = logits:redistribute(lp), target:redistribute(tp)
    local kshape = {}
    for d = 1, #shape do kshape[d] = d == cdim and 1 or shape[d] end
    local maxp, sump = {}, {}
    for m = 1, mesh.ndim do
      local classdim = lp[m]:is_shard() and lp[m].dim == cdim
      maxp[m] = classdim and dt.Partial("max") or batch[m]
      sump[m] = classdim and dt.Partial("sum") or batch[m]
      if batch[m]:is_shard() and batch[m].dim >= cdim then -- kshape keeps the class dim
        maxp[m] = classdim and maxp[m] or dt.Shard(batch[m].dim + 1)
        sump[m] = classdim and sump[m] or dt.Shard(batch[m].dim + 1)
      end
    end
    local kplace = {}
    for m = 1, mesh.ndim do kplace[m] = (maxp[m]:is_partial()) and dt.Replicate() or maxp[m] end
    local on = mesh:get_coordinate() ~= nil
    local lx, tx = l2:to_local(), t2:to_local()
    local start, len = 0, on and lx:size(cdim) or 0
    if on then
      for _, b in ipairs(dt._dtensor_shards(l2)) do
        if b.rank == dt.rank() then start = b.offset[cdim] end
      end
    end
    local function local_keep(fill) -- a local [.., 1, ..] tensor of fill (empty class shard)
      local ls = on and lx:size() or {0}
      if on then ls[cdim] = 1 end
      return dt.full(ls, fill, {dtype = logits.dtype})
    end
    local mx = (on and len > 0) and lx:amax(cdim, true) or local_keep(-math.huge)
    local gmax = rebuild(mx, mesh, maxp, kshape):redistribute(kplace):to_local()
    local se = (on and len > 0) and (lx - gmax):exp():sum(cdim, true) or local_keep(0)
    local gse = rebuild(se, mesh, sump, kshape):redistribute(kplace):to_local()
    local picked
    if on and len > 0 then
      local tk = (#shape == 1) and tx:reshape(1) or tx:unsqueeze(cdim)
      local classes = dt.arange(start + 1, start + len + 1):to(tx.dtype)
      if #shape > 1 then
        local cs = {}
        for d = 1, #shape do cs[d] = d == cdim and len or 1 end
        classes = classes:reshape(cs)
      end
      picked = (lx * classes:eq(tk):to(lx.dtype)):sum(cdim, true)
    else
      picked = local_keep(0)
    end
    local gp = rebuild(picked, mesh, sump, kshape):redistribute(kplace):to_local()
    local per = dt.empty(0, {dtype = logits.dtype}) -- off-mesh
    if on then
      per = gse:log() + gmax - gp
      per = (#shape == 1) and per:reshape({}) or per:squeeze(cdim)
      per = dt.where(tx:eq(ignore), 0, per)
    end
    local loss = rebuild(per, mesh, batch, target:size())
    if reduction == "none" then return loss end
    if reduction == "sum" then return loss:sum() end
    return loss:sum() / t2:ne(ignore):sum()
  end

  -- ---- cat/stack of DTensors: the joined dim is replicated first (and Partial reduced), the
  -- other dims keep the first input's sharding, which every input is brought to. ----
  local function join(name, plain_join, list, dim, is_stack)
    local mesh, first
    for i, x in ipairs(list) do
      if not dt.is_dtensor(x) then
        error(name .. ": element " .. i .. " of the list is a plain tensor mixed with DTensors; convert it with " ..
              "dt.from_local or dt.distribute_tensor", 3)
      end
      if not mesh then mesh, first = x.device_mesh, x
      elseif x.device_mesh ~= mesh then
        error(name .. ": DTensor operands on different meshes: " .. tostring(mesh) .. " and " .. tostring(x.device_mesh), 3)
      end
    end
    local shape = first:size()
    local ndim = #shape
    local d = dim or 1
    if math.type(d) ~= "integer" then error(name .. ": dim must be an integer", 3) end
    local hi = is_stack and ndim + 1 or ndim
    if d < 0 then d = d + hi + 1 end
    if d < 1 or d > hi then error(name .. ": dim " .. tostring(dim) .. " out of range for " .. ndim .. "-d tensors", 3) end
    local target, out = {}, {}
    for m, p in ipairs(first.placements) do
      local keep = p:is_shard() and (is_stack or p.dim ~= d)
      target[m] = keep and p or dt.Replicate()
      out[m] = keep and dt.Shard((is_stack and p.dim >= d) and p.dim + 1 or p.dim) or dt.Replicate()
    end
    local locals, total = {}, 0
    for i, x in ipairs(list) do
      local s = x:size()
      if #s ~= ndim and not is_stack then
        error(name .. ": every DTensor needs " .. ndim .. " dims, element " .. i .. " has " .. #s, 3)
      end
      locals[i] = x:redistribute(target):to_local()
      total = total + (s[d] or 0)
    end
    local y
    if mesh:get_coordinate() then y = plain_join(locals, d)
    else -- off-mesh: only the promoted dtype matters
      for i, x in ipairs(list) do locals[i] = dt.empty(0, {dtype = x.dtype}) end
      y = plain_join(locals, 1)
    end
    if is_stack then table.insert(shape, d, #list) else shape[d] = total end
    return dt.from_local(y, mesh, out, {shape = shape})
  end
  local plain_cat, plain_stack = dt.cat, dt.stack
  local function has_dtensor(list)
    if type(list) ~= "table" or dt.is_tensor(list) then return false end
    for _, x in ipairs(list) do if dt.is_dtensor(x) then return true end end
    return false
  end
  function dt.cat(list, dim)
    if has_dtensor(list) then return join("cat", plain_cat, list, dim, false) end
    return (plain_cat(list, dim))
  end
  function dt.stack(list, dim)
    if has_dtensor(list) then return join("stack", plain_stack, list, dim, true) end
    return (plain_stack(list, dim))
  end
  dt.concat = dt.cat

  -- ---- plugins: every *.lua of the directories in DTLUA_PLUGINS (':'-separated) ----
  local dirs = os.getenv("DTLUA_PLUGINS")
  if dirs and dirs ~= "" then
    for dir in dirs:gmatch("[^:]+") do
      local p = io.popen('ls -1 "' .. dir .. '" 2>/dev/null')
      local files = {}
      if p then
        for f in p:lines() do if f:match("%.lua$") then files[#files + 1] = f end end
        p:close()
      end
      table.sort(files)
      for _, f in ipairs(files) do
        local chunk, err = loadfile(dir .. "/" .. f)
        if not chunk then error("DTLUA_PLUGINS: " .. err, 0) end
        traceback_call("DTLUA_PLUGINS: " .. dir .. "/" .. f, chunk, dt)
      end
    end
  end
end
