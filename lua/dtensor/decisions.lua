-- The decision cache of the ops composed in Lua (embedding, cross_entropy, cat/stack, *_like,
-- ops of dt.register_op; doc/dispatch.md): per rank, op name -> key -> decision, the key
-- being dt._dispatch_key(name, static args, tensor args...) (global shapes, dtypes,
-- placements, mesh shape).  A hit skips the rule; hits and misses count in
-- dt.dispatch_stats() and are logged under DTLUA_LOG=dispatch like the C dispatcher's.
return function(dt)
  local caches = {}
  local note, key_of = dt._dispatch_note, dt._dispatch_key
  local logging = note("logging?")

  local function plist(p)
    local s = {}
    for m, q in ipairs(p) do s[m] = tostring(q) end
    return "(" .. table.concat(s, ", ") .. ")"
  end

  -- the log line's parts: the inputs' specs, the chosen placements -> the outputs', the moves
  local function describe(d, tensors)
    local ins, targets, moves = {}, {}, {}
    for i, x in ipairs(tensors) do
      local from = plist(x.placements)
      ins[i] = x.dtype .. "{" .. table.concat(x:size(), ",") .. "} " .. from
      targets[i] = plist(d.inputs and d.inputs[i] or x.placements)
      if targets[i] ~= from then moves[#moves + 1] = "input " .. i .. " " .. from .. " -> " .. targets[i] end
    end
    local outs = {}
    for o, p in ipairs(d.outputs or {}) do outs[o] = plist(p) end
    return table.concat(ins, ", "), table.concat(targets, ", ") .. " -> " .. table.concat(outs, ", "),
           #moves > 0 and "redistribute " .. table.concat(moves, ", ") or ""
  end

  -- dt._decide(name, static, tensors, compute): the cached decision for these tensors (a
  -- list of DTensors and plain tensors) and static args (a string), else compute() cached.
  -- A decision is a table; its `inputs` (target placements per DTensor, in order) and
  -- `outputs` (placement lists) are what the log shows.
  function dt._decide(name, static, tensors, compute)
    local c = caches[name]
    if not c then c = {} caches[name] = c end
    local key = key_of(name, static, table.unpack(tensors))
    local d = c[key]
    local hit = d ~= nil
    if not hit then
      d = compute()
      c[key] = d
    end
    if logging then
      local ins, choice, moves = describe(d, tensors)
      note(name, hit, ins, choice, moves, d.cost)
    else
      note(name, hit)
    end
    return d
  end

  -- A plain tensor t beside DTensors on mesh in op `name` (`what`: "argument 2", ...), as a
  -- replicated DTensor: one element, or any inside dt.implicit_replication; else the C
  -- dispatcher's error saying to convert it.
  function dt._replicated(name, what, t, mesh)
    local ok, err = pcall(dt._check_plain, name, what, t)
    if not ok then error((tostring(err):gsub("^[^\n]-:%d+: ", "")), 0) end
    local r = {}
    for m = 1, mesh.ndim do r[m] = dt.Replicate() end
    return dt.from_local(t, mesh, r)
  end

  -- The C dispatcher's error for DTensor operands on two meshes, raised `level` frames above
  -- the caller (as error()'s level).
  function dt._check_same_mesh(name, mesh, other, level)
    if mesh ~= other then
      error(name .. ": DTensor operands on different meshes: " .. tostring(mesh) .. " and " .. tostring(other), level + 1)
    end
  end

  -- forgets the decisions of one Lua op (a new rule) or of all
  function dt._forget_decisions(name)
    if name then caches[name] = nil else caches = {} end
  end
  local clear = dt.dispatch_cache_clear
  function dt.dispatch_cache_clear()
    clear()
    caches = {}
  end
end
