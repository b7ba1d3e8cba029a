-- A seeded fuzzer of the Lua API (issue 16): calls every function of dt, dt.F, dt.distributed,
-- dt.utils, dt.nn.utils and dt.optim
-- and every method and metamethod of the tensor/DTensor, DeviceMesh, placement and group userdata
-- (enumerated at run time, so new functions are covered) with edge values, each call in pcall.
--
--   dtlua tests/fuzz/api_fuzz.lua [seed] [seconds] [-v]          (also under dtlua -n 2)
--
-- It exits non-zero, naming the call and its arguments, on an error message that does not name
-- the op ("attempt to index ...", "bad argument #1 to '?'", a Lua local's name, 'select', ...).
-- A crash or sanitizer report kills the process: run it under `timeout`, which also bounds a hang,
-- and rerun the same seed with -v, which writes every call to stderr before making it.
-- The sequence of calls depends only on the seed (not on results), so a rerun repeats it.
-- tests/fuzz/allowlist.lua lists the functions whose errors legitimately come from Lua.
local dt = require "dtensor"

local seed = math.tointeger(tonumber(arg and arg[1] or "1")) or 1
local seconds = tonumber(arg and arg[2] or "10") or 10
local verbose = false
for i = 1, arg and #arg or 0 do if arg[i] == "-v" then verbose = true end end
verbose = verbose or os.getenv("DTLUA_FUZZ_VERBOSE") == "1"

local world = dt.world_size()
-- files written by dt.save/save_npy go here (one directory per rank, removed at the end)
local tmpdir = os.tmpname() -- a unique name; a file that the directory's name extends
os.remove(tmpdir)
tmpdir = ("%s-api-fuzz-rank%d"):format(tmpdir, dt.rank())
local here = (arg and arg[0] or "tests/fuzz/api_fuzz.lua"):match("^(.*)/[^/]*$") or "."
local allow = dofile(here .. "/allowlist.lua")

----------------------------------------------------------------------------------------------
-- Calls that are known to fail today (crash, hang or unnamed error), skipped so the smoke run
-- stays green.  Each entry: the call's name as the fuzzer prints it, a Lua pattern over the
-- printed arguments (the call is skipped when it matches), and a repro.
-- Remove an entry once it is fixed.
-- With `message` instead of `args`, the call is made and an error matching it is tolerated.
local known_failures = {
}

-- Functions not fuzzed at all, with why.  Point-to-point and rank-divergent calls would deadlock
-- the other ranks (their arguments cannot be the same on every rank by construction).
local skip = {
  ["dt.distributed.send"] = "point-to-point: the peer never posts the matching call",
  ["dt.distributed.recv"] = "point-to-point: waits for a send that never comes",
  ["dt.distributed._bench_mpi"] = "a benchmark loop, not an API",
}
-- On several ranks the collectives are fuzzed too: every rank makes the same call, and a check
-- that fails on some ranks only is agreed (dt_comm_fail_agreed: every rank raises it).

----------------------------------------------------------------------------------------------
-- Deterministic generator (xorshift64*), independent of math.random and of dt's RNG.
local state = (seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) | 1
local function rnd(n) -- 1..n
  state = state ~ (state >> 12); state = state ~ (state << 25); state = state ~ (state >> 27)
  local x = (state * 0x2545F4914F6CDD1D) >> 1
  return x % n + 1
end
local function pick(list) return list[rnd(#list)] end

-- Edge values: {repr, value}; a repr is a Lua expression that makes the value again.
local NIL = {}
local scalars = {
  {"nil", NIL}, {"true", true}, {"false", false}, {"0", 0}, {"1", 1}, {"2", 2}, {"3", 3}, {"-1", -1},
  {"-2", -2}, {"2^40 (int)", 1 << 40}, {"2^62 (int)", 1 << 62}, {"math.mininteger", math.mininteger},
  {"math.maxinteger", math.maxinteger}, {"0.5", 0.5}, {"-0.0", -0.0}, {"0/0", 0 / 0},
  {"math.huge", math.huge}, {"-math.huge", -math.huge}, {"1e300", 1e300}, {"2.0^62", 2.0 ^ 62},
  {'""', ""}, {'"x"', "x"}, {'"float32"', "float32"}, {'"int64"', "int64"}, {'"bool"', "bool"},
  {'"uint8"', "uint8"}, {'"cpu"', "cpu"}, {'"dp"', "dp"}, {'"sum"', "sum"}, {'"avg"', "avg"},
  {'"1"', "1"}, {'"/nonexistent/dtlua-fuzz/f"', "/nonexistent/dtlua-fuzz/f"},
  {"{}", {}}, {"{{}}", {{}}}, {"{1,2}", {1, 2}}, {"{2,3}", {2, 3}}, {"{0}", {0}}, {"{-1}", {-1}},
  {"{2^62,2^62}", {1 << 62, 1 << 62}}, {"{{1,2},{3}}", {{1, 2}, {3}}}, {"{1,{2}}", {1, {2}}},
  {"{1.5,0/0}", {1.5, 0 / 0}}, {'{"dp"}', {"dp"}}, {"{x=1}", {x = 1}},
  {"{dim=1,keepdim=true}", {dim = 1, keepdim = true}}, {"{dtype='int64'}", {dtype = "int64"}},
  {"{run_check=true}", {run_check = true}}, {"function() end", function() end},
  {"coroutine.create(print)", coroutine.create(print)}, {"io.stderr", io.stderr},
}

local mesh1 -- a 1-d mesh over the world, built once (a collective)
local mesh2 -- a 2-d mesh {world, 1}
local placements = {
  {"dt.Replicate()", function() return dt.Replicate() end},
  {"dt.Shard(1)", function() return dt.Shard(1) end},
  {"dt.Shard(-1)", function() return dt.Shard(-1) end},
  {"dt.Partial()", function() return dt.Partial() end},
  {'dt.Partial("max")', function() return dt.Partial("max") end},
}

-- Tensor makers: {repr, function}.  Every dtype, 0-d, 0-size, non-contiguous, huge strides,
-- released, DTensors.  Built fresh every `refresh` calls, since methods mutate and release them.
local dtypes = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"}
local makers = {}
local function add_maker(repr, f) makers[#makers + 1] = {repr, f} end
for _, ty in ipairs(dtypes) do
  add_maker(("dt.ones(2,3,{dtype=%q})"):format(ty), function() return dt.ones(2, 3, {dtype = ty}) end)
  add_maker(("dt.zeros({},{dtype=%q}) (0-d)"):format(ty), function() return dt.zeros({}, {dtype = ty}) end)
end
add_maker("dt.tensor(3.5) (0-d)", function() return dt.tensor(3.5) end)
add_maker("dt.zeros(0,3)", function() return dt.zeros(0, 3) end)
add_maker("dt.zeros(3,0,{dtype='int64'})", function() return dt.zeros(3, 0, {dtype = "int64"}) end)
add_maker("dt.arange(6):reshape(2,3)", function() return dt.arange(6):reshape(2, 3) end)
add_maker("dt.arange(12):reshape(3,4):t() (non-contiguous)", function() return dt.arange(12):reshape(3, 4):t() end)
add_maker("dt.randn(4,4):narrow(2,2,2) (non-contiguous)", function() return dt.randn(4, 4):narrow(2, 2, 2) end)
-- stride-0 views of 2^20 elements: a view of 2^40 would be legal too, but every op on it runs
-- for hours (huge sizes reach the ops through the integer arguments instead)
add_maker("dt.ones(1,1):expand(2^10,2^10) (stride 0)", function() return dt.ones(1, 1):expand(1 << 10, 1 << 10) end)
add_maker("dt.ones(1):expand(2^20) (stride 0)", function() return dt.ones(1):expand(1 << 20) end)
add_maker("dt.ones(2,2):t():expand(3,2,2) (stride 0 and transposed)", function() return dt.ones(2, 2):t():expand(3, 2, 2) end)
add_maker("dt.randn(2,3,4):permute(3,1,2)", function() return dt.randn(2, 3, 4):permute(3, 1, 2) end)
add_maker("dt.tensor({1/0,-1/0,0/0})", function() return dt.tensor({1 / 0, -1 / 0, 0 / 0}) end)
add_maker("dt.tensor({math.mininteger,math.maxinteger})", function() return dt.tensor({math.mininteger, math.maxinteger}) end)
add_maker("dt.tensor({true,false})", function() return dt.tensor({true, false}) end)
add_maker("dt.randn(2,4,8) (attention-shaped)", function() return dt.randn(2, 4, 8) end)
add_maker("dt.ones(2,3) released", function() local t = dt.ones(2, 3); t:release(); return t end)
add_maker("dt.ones(2,3) after __gc", function() local t = dt.ones(2, 3); debug.getmetatable(t).__gc(t); return t end)
add_maker("dt.distribute_tensor(dt.arange(8):reshape(4,2):float(), mesh1, {dt.Shard(1)})",
  function() return dt.distribute_tensor(dt.arange(8):reshape(4, 2):float(), mesh1, {dt.Shard(1)}) end)
add_maker("dt.distribute_tensor(dt.ones(2,3), mesh1, {dt.Replicate()})",
  function() return dt.distribute_tensor(dt.ones(2, 3), mesh1, {dt.Replicate()}) end)
add_maker("dt.distribute_tensor(dt.ones(3), mesh1, {dt.Shard(1)}) (uneven)",
  function() return dt.distribute_tensor(dt.ones(3), mesh1, {dt.Shard(1)}) end)
add_maker("dt.distribute_tensor(dt.ones(2,2), mesh2, {dt.Shard(1), dt.Replicate()})",
  function() return dt.distribute_tensor(dt.ones(2, 2), mesh2, {dt.Shard(1), dt.Replicate()}) end)
add_maker("dt.distribute_tensor(dt.ones(2,2), mesh1, {dt.Replicate()}):redistribute(mesh1, {dt.Partial()})",
  function() return dt.from_local(dt.ones(2, 2), mesh1, {dt.Partial()}) end)

local pool -- {repr, value} built by refresh()
local function refresh()
  -- the meshes too: the fuzzer calls their __gc and __close
  mesh1 = dt.init_device_mesh("cpu", {world})
  mesh2 = dt.init_device_mesh("cpu", {world, 1}, {"dp", "tp"})
  pool = {}
  for _, s in ipairs(scalars) do pool[#pool + 1] = s end
  for _, m in ipairs(makers) do
    local ok, v = pcall(m[2])
    if not ok then error("fuzz: making " .. m[1] .. " failed: " .. tostring(v)) end
    pool[#pool + 1] = {m[1], v}
  end
  for _, p in ipairs(placements) do pool[#pool + 1] = {p[1], p[2]()} end
  pool[#pool + 1] = {"mesh1", mesh1}
  pool[#pool + 1] = {"mesh2", mesh2}
  pool[#pool + 1] = {"dt.distributed.new_group({0})", dt.distributed.new_group({0})}
end

----------------------------------------------------------------------------------------------
-- The targets: {name, function, kind, opname}, where opname is what an error must mention.
local targets = {}
-- Each target is called as a user would write it (T.op(...), not through pcall(f, ...), and not as
-- a tail call), so Lua's "bad argument #n to 'op'" finds the op's name.
local function named_caller(opname, f)
  local T = {[opname] = f}
  return load(("local T = ...; return function(...) local r = table.pack(T[%q](...)); return r end")
    :format(opname), "=api_fuzz")(T)
end
local function add_target(name, f, opname, self_kind)
  if skip[name] then return end
  -- private helpers (dt._x) are internal: their callers validate the arguments, so only a crash
  -- counts.  Metamethods (__x) are not called by name: their errors are checked only for the
  -- Lua-internal patterns below (less "to '?'", an artefact of calling a metamethod directly).
  targets[#targets + 1] = {name = name, f = named_caller(opname, f), op = opname, self = self_kind,
                           writes = opname:find("^save") ~= nil,
                           private = opname:sub(1, 2) ~= "__" and opname:sub(1, 1) == "_",
                           meta = opname:sub(1, 2) == "__"}
end
local function sorted_keys(t)
  local k = {}
  for n in pairs(t) do if type(n) == "string" then k[#k + 1] = n end end
  table.sort(k)
  return k
end
local function add_table(prefix, t)
  for _, k in ipairs(sorted_keys(t)) do
    if type(t[k]) == "function" then add_target(prefix .. k, t[k], k) end
  end
end
local function methods_of(mt)
  local idx = mt.__index
  if type(idx) == "function" then idx = select(2, debug.getupvalue(idx, 1)) end
  return type(idx) == "table" and idx or {}
end
local function add_methods(prefix, sample, self_kind)
  local mt = debug.getmetatable(sample)
  local methods = methods_of(mt)
  for _, k in ipairs(sorted_keys(methods)) do
    if type(methods[k]) == "function" then add_target(prefix .. ":" .. k, methods[k], k, self_kind) end
  end
  for _, k in ipairs(sorted_keys(mt)) do
    if type(mt[k]) == "function" then add_target(prefix .. "." .. k, mt[k], k, self_kind) end
  end
end

local function build_targets()
  add_table("dt.", dt)
  add_table("dt.F.", dt.F)
  if dt.nn.functional ~= dt.F then add_table("dt.nn.functional.", dt.nn.functional) end
  add_table("dt.distributed.", dt.distributed)
  -- the Lua library's tables of functions (dt.utils.progress's output goes to stdout)
  add_table("dt.utils.", dt.utils)
  add_table("dt.nn.utils.", dt.nn.utils)
  add_table("dt.optim.", dt.optim)
  add_table("dt.optim.lr_scheduler.", dt.optim.lr_scheduler)
  for _, k in ipairs(sorted_keys(dt.Tensor)) do
    if type(dt.Tensor[k]) == "function" then add_target("Tensor:" .. k, dt.Tensor[k], k, "tensor") end
  end
  local t = dt.ones(1)
  local mt = debug.getmetatable(t)
  for _, k in ipairs(sorted_keys(mt)) do
    if type(mt[k]) == "function" then add_target("Tensor." .. k, mt[k], k, "tensor") end
  end
  add_methods("DeviceMesh", mesh1, "mesh")
  add_methods("Placement", dt.Shard(1), "placement")
  add_methods("Group", dt.distributed.new_group({0}), "group")
end

----------------------------------------------------------------------------------------------
-- Argument drawing.  The self argument of a method is usually of the right kind.
local function of_kind(kind)
  local cands = {}
  for _, e in ipairs(pool) do
    local v = e[2]
    local k
    if dt.is_tensor(v) or dt.is_dtensor(v) then k = "tensor"
    elseif v == mesh1 or v == mesh2 then k = "mesh"
    elseif type(v) == "userdata" then
      local n = (debug.getmetatable(v) or {}).__name
      k = n == "Placement" and "placement" or (n and n:lower():find("group") and "group") or n
    end
    if k == kind then cands[#cands + 1] = e end
  end
  return cands
end

local bad_patterns = {
  "attempt to ", "to '%?'", "to 'select'", "%(local '", "%(upvalue '", "%(field '", "%(global '",
  "%(method '", "for iterator", "stack overflow",
}

local function check_message(t, msg)
  msg = tostring(msg)
  local a = allow[t.name]
  if a and a.pattern then
    for _, p in ipairs(type(a.pattern) == "table" and a.pattern or {a.pattern}) do
      if msg:find(p) then return true end
    end
  end
  if t.private then return true end
  for _, p in ipairs(bad_patterns) do
    if msg:find(p) and not (t.meta and p == "to '%?'") and not (t.op == "select" and p == "to 'select'") then
      return false, "message matches '" .. p .. "'"
    end
  end
  if t.meta then return true end
  local op = t.op:lower()
  local low = msg:lower()
  if low:find(op, 1, true) then return true end
  if a and a.names then
    for _, n in ipairs(a.names) do if low:find(n:lower(), 1, true) then return true end end
  end
  return false, "message does not name '" .. t.op .. "'"
end

local function describe(t, reprs)
  return t.name .. "(" .. table.concat(reprs, ", ") .. ")"
end

----------------------------------------------------------------------------------------------
local function main()
  os.execute("mkdir -p '" .. tmpdir .. "'")
  mesh1 = dt.init_device_mesh("cpu", {world})
  mesh2 = dt.init_device_mesh("cpu", {world, 1}, {"dp", "tp"})
  build_targets()
  refresh()
  local sink = io.open("/dev/null", "w")
  local real_print = print
  print = function(...) -- keep the log short
    for i = 1, select("#", ...) do sink:write(tostring((select(i, ...))), "\t") end
    sink:write("\n")
  end

  local t0 = os.clock()
  local wall0 = os.time()
  local calls, failures = 0, {}
  local refresh_every = 64
  while true do
    -- every 256 calls: out of time?  On several ranks the ranks agree (MAX of their answers),
    -- so every rank stops after the same call and no collective is left waiting
    if calls % 256 == 0 then
      local spent = os.time() - wall0
      local stop = spent >= seconds
      if world > 1 then
        local flag = dt.tensor({stop and 1 or 0})
        dt.distributed.all_reduce(flag, dt.distributed.MAX)
        stop = flag:item() > 0
      end
      if stop then break end
    end
    if calls % refresh_every == 0 then refresh() end
    local t = targets[rnd(#targets)]
    local nargs = rnd(5) - 1
    local args, reprs = {}, {}
    local first = 1
    if t.self and rnd(8) > 1 then
      local c = of_kind(t.self)
      if #c > 0 then
        local e = pick(c)
        args[1], reprs[1] = e[2], e[1]
        first = 2
        nargs = nargs + 1
      end
    end
    for i = first, nargs do
      local e = pick(pool)
      reprs[i] = e[1]
      if e[2] ~= NIL then args[i] = e[2] end
    end
    local desc = describe(t, reprs)
    if t.writes then -- a path argument of save/save_npy goes to the temporary directory
      for i = 1, nargs do
        if type(args[i]) == "string" or type(args[i]) == "number" then
          args[i] = tmpdir .. "/" .. tostring(args[i]):gsub("[^%w.-]", "_")
        end
      end
    end
    for _, k in ipairs(known_failures) do
      if k.call == t.name and k.args and desc:find(k.args) then goto continue end
    end
    if verbose then
      io.stderr:write(("[%d] call %d: %s\n"):format(dt.rank(), calls + 1, desc)); io.stderr:flush()
    end
    local ok, err = pcall(t.f, table.unpack(args, 1, nargs))
    calls = calls + 1
    if not ok then
      local good, why = check_message(t, err)
      if not good then
        for _, k in ipairs(known_failures) do
          if k.call == t.name and k.message and tostring(err):find(k.message) then good = true end
        end
      end
      if not good then
        failures[#failures + 1] = ("%s\n    error: %s\n    (%s)"):format(desc, tostring(err), why)
        if #failures >= 20 then break end
      end
    end
    if calls % 32 == 0 then collectgarbage() end
    ::continue::
  end
  print = real_print
  os.execute("rm -rf '" .. tmpdir .. "'")
  local cpu = os.clock() - t0
  local rank = dt.rank()
  io.stderr:write(("[%d] api_fuzz seed %d: %d calls over %d targets in %.1f s cpu (%.0f calls/s), %d unnamed errors\n")
    :format(rank, seed, calls, #targets, cpu, calls / math.max(cpu, 1e-9), #failures))
  for _, f in ipairs(failures) do io.stderr:write("[" .. rank .. "] UNNAMED ERROR: ", f, "\n") end
  if #failures > 0 then
    io.stderr:write(("[%d] rerun: dtlua tests/fuzz/api_fuzz.lua %d %s -v\n"):format(rank, seed, tostring(seconds)))
    os.exit(1)
  end
end

main()
