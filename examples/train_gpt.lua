-- A small GPT trained on any mesh: `./dtlua -n 4 examples/train_gpt.lua --mesh 2x2 --dims dp,tp`.
--
-- The model (token + position embeddings, causal self-attention and MLP blocks with
-- LayerNorm, a final norm and a language-model head, dropout on) is written once with dt.nn
-- modules; dt.distribute_module places it on a dp x tp mesh: q/k/v, the MLP's first layer and
-- the head split by output features over tp, the attention output and the MLP's second layer by
-- input features, every parameter replicated over dp; each batch is split over dp.  The
-- activations are DTensors, so the sharding dispatcher decides every op and dropout draws the
-- same numbers as on one device: the losses on any mesh equal the single-rank run's (float64:
-- within 1e-9; tests/spec/examples_spec.lua checks it).
--
-- Data: a task the demo makes itself -- reverse a sequence of digits (`3 1 4 | 4 1 3`), whose
-- accuracy it reports at the end -- or any text file, character level (`--data PATH`).
--
-- Options (defaults in brackets):
--   --mesh DxT [1xN for N ranks]   --dims dp,tp        --steps N [200]   --seed S [1]
--   --dtype float32|float64 [float32]                   --log FILE.jsonl (JSON lines of the run)
--   --layers N [2] --width N [64] --heads N [4] --digits N [6] --batch N [32] --lr X [3e-3]
--   --dropout P [0.1] --data PATH --save FILE.safetensors --resume FILE.safetensors
--   --until N: stop after step N of the --steps schedule (then --save; a later --resume goes on)
--   --save-checkpoint DIR / --resume-checkpoint DIR: the same through dt.checkpoint, a sharded
--     checkpoint (each rank writes its own shards; resumable on another mesh or world size)
--   --amp bfloat16|float16 (mixed precision: matmuls in that dtype, float32 parameters and
--     optimizer state; float16 with a dt.amp.GradScaler; doc/amp.md)
--   --fsdp: fully_shard each block and the model over dp (parameters and optimizer state
--     sharded; doc/parallel.md), on top of the tensor parallelism over tp
--   --print-losses (one line per step: what the single-device check reads) --plot FILE.png
--   --compile: the training step (forward, loss, backward, clip, AdamW) as one dt.compile graph
--     after a first eager step; the lr is a float64 tensor the schedule writes (doc/compile.md)
local F = dt.F
local R, S = dt.Replicate(), dt.Shard

-- ---- options ----
local function parse(argv)
  local o = {steps = 200, seed = 1, dtype = "float32", layers = 2, width = 64, heads = 4, digits = 6, batch = 32,
             lr = 3e-3, dropout = 0.1, dims = "dp,tp"}
  local numeric = {steps = true, ["until"] = true, seed = true, layers = true, width = true, heads = true, digits = true, batch = true,
                   lr = true, dropout = true}
  local flags = {["print-losses"] = true, fsdp = true, compile = true}
  local i = 1
  while i <= #argv do
    local key = argv[i]:match("^%-%-(.+)$")
    if not key then error("train_gpt: unexpected argument '" .. argv[i] .. "' (options start with --)", 0) end
    if flags[key] then
      o[key:gsub("%-", "_")] = true
      i = i + 1
    else
      local v = argv[i + 1]
      if v == nil then error("train_gpt: --" .. key .. " needs a value", 0) end
      if numeric[key] then
        v = tonumber(v) or error("train_gpt: --" .. key .. " must be a number, got " .. v, 0)
      end
      o[key] = v
      i = i + 2
    end
  end
  local ranks = dt.world_size()
  local d, t = (o.mesh or ("1x" .. ranks)):match("^(%d+)x(%d+)$")
  d, t = tonumber(d), tonumber(t)
  if not d or d * t ~= ranks then
    error(string.format("train_gpt: --mesh %s does not cover the %d ranks (use DxT with D*T = %d)", tostring(o.mesh),
      ranks, ranks), 0)
  end
  o.dp, o.tp = d, t
  o.dim_names = {}
  for name in o.dims:gmatch("[^,]+") do o.dim_names[#o.dim_names + 1] = name end
  if #o.dim_names ~= 2 then error("train_gpt: --dims names the two mesh dims, e.g. dp,tp", 0) end
  if o.batch % o.dp ~= 0 then
    error(string.format("train_gpt: --batch %d must split evenly over dp %d", o.batch, o.dp), 0)
  end
  if o.compile and (o.fsdp or o.amp == "float16" or o.save or o.resume or o["save-checkpoint"] or o["resume-checkpoint"]) then
    error("train_gpt: --compile does not take --fsdp, --amp float16 or saving/resuming yet", 0)
  end
  return o
end

-- ---- data ----
-- The reversal task: x1..xK SEP xK..x1 (digits are classes 1..10, SEP 11); the model reads
-- the first 2K tokens and is scored on predicting the reversed digits.
local function reversal_task(opts, mesh)
  local K, V = opts.digits, 11
  local L = 2 * K
  local on_mesh = {device_mesh = mesh, placements = {S(1), R}}
  local rev_index = dt.distribute_tensor(dt.arange(K, 0, -1), mesh, {R, R})
  local positions = dt.distribute_tensor(dt.arange(1, L + 1):reshape(1, L), mesh, {R, R})
  local task = {vocab = V, context = L, K = K}
  function task.batch(n)
    local x = dt.randint(1, 11, {n, K}, on_mesh)
    local sep = dt.full({n, 1}, V, {dtype = "int64", device_mesh = mesh, placements = {S(1), R}})
    local seq = dt.cat({x, sep, x:index_select(2, rev_index)}, 2)
    local input, target = seq:narrow(2, 1, L), seq:narrow(2, 2, L)
    -- score only the reversed digits: positions K+1 .. 2K
    return input, target:masked_fill(positions:le(K), -100), n * K
  end
  function task.show(ids) -- a row of token ids as text
    local s = {}
    for _, v in ipairs(ids) do s[#s + 1] = v == V and "|" or tostring(v - 1) end
    return table.concat(s, " ")
  end
  return task
end

-- Character-level text from a file: random windows (the same offsets on every rank).
local function text_task(opts, mesh, path)
  local f = io.open(path, "rb") or error("train_gpt: cannot read --data " .. path, 0)
  local text = f:read("a")
  f:close()
  local chars, index = {}, {}
  for c in text:gmatch(".") do if not index[c] then chars[#chars + 1] = c; index[c] = true end end
  table.sort(chars)
  for i, c in ipairs(chars) do index[c] = i end
  local L = 4 * opts.digits
  if #text < L + 2 then error("train_gpt: --data " .. path .. " is shorter than the context " .. (L + 1), 0) end
  local codes = {}
  for i = 1, #text do codes[i] = index[text:sub(i, i)] end
  local task = {vocab = #chars, context = L}
  function task.batch(n)
    local starts = dt.randint(0, #text - L, {n}):totable()
    local rows = {}
    for b = 1, n do
      local row = {}
      for j = 1, L + 1 do row[j] = codes[starts[b] + j] end
      rows[b] = row
    end
    local seq = dt.distribute_tensor(dt.tensor(rows), mesh, {S(1), R}, {src_rank = false})
    return seq:narrow(2, 1, L), seq:narrow(2, 2, L), n * L
  end
  function task.show(ids)
    local s = {}
    for _, v in ipairs(ids) do s[#s + 1] = chars[v] end
    return table.concat(s)
  end
  return task
end

-- ---- the model (examples/gpt_model.lua, next to this file) ----
local gpt = dofile(((arg and arg[0] or ""):match("^(.*)/") or ".") .. "/gpt_model.lua")
local GPT, partition = gpt.GPT, gpt.partition

-- ---- the run ----
local opts = parse(arg or {})
local mesh = dt.init_device_mesh("cpu", {opts.dp, opts.tp}, opts.dim_names)
dt.manual_seed(opts.seed)
local task = opts.data and text_task(opts, mesh, opts.data) or reversal_task(opts, mesh)
local model = GPT(task.vocab, task.context, opts):to(opts.dtype)
dt.distribute_module(model, mesh, partition)
if opts.fsdp then -- each block gathers its parameters in one all_gather, then the rest
  for _, block in ipairs(model.blocks:children()) do dt.parallel.fully_shard(block, mesh, {mesh_dim = 1}) end
  dt.parallel.fully_shard(model, mesh, {mesh_dim = 1})
end
local pos_ids = dt.distribute_tensor(dt.arange(1, task.context + 1):reshape(1, task.context), mesh, {R, R})
-- compiled, the lr is a tensor that the schedule writes and the graph reads (a number would be a constant of it)
local opt = dt.optim.AdamW(model:parameters(), {lr = opts.compile and dt.tensor(opts.lr, {dtype = "float64"}) or opts.lr,
                                                weight_decay = 0.01})
local sched = dt.optim.lr_scheduler.cosine_with_warmup(opt, math.min(20, opts.steps // 10), opts.steps, opts.lr / 10)

-- what a sharded checkpoint holds: the state dicts (DTensors as they are placed), the step
-- and the generator's position
local function checkpoint_state(step)
  return {model = model:state_dict(), optim = opt:state_dict(), step = step, rng = dt.get_rng_state()}
end

local first_step = 1
if opts["resume-checkpoint"] then
  local state = dt.checkpoint.load(checkpoint_state(0), opts["resume-checkpoint"])
  model:load_state_dict(state.model)
  opt:load_state_dict(state.optim) -- a fresh optimizer's state comes as whole tensors: chunked here
  first_step = state.step + 1
  dt.set_rng_state(state.rng)
  for _ = 1, first_step - 1 do sched:step() end
  dt.print0(string.format("resumed from %s at step %d", opts["resume-checkpoint"], first_step))
elseif opts.resume then
  local saved, meta = dt.load(opts.resume)
  local sd, osd = {}, {state = {}, param_groups = opt:state_dict().param_groups}
  for k, v in pairs(saved) do
    if k:match("^model%.") then sd[k:sub(7)] = v end
    local i, key = k:match("^optim%.(%d+)%.(.+)$")
    if i then
      osd.state[tonumber(i)] = osd.state[tonumber(i)] or {}
      osd.state[tonumber(i)][key] = v
    end
  end
  for k, v in pairs(meta) do
    local i, key = k:match("^optim%.(%d+)%.(.+)$")
    if i then
      osd.state[tonumber(i)] = osd.state[tonumber(i)] or {}
      osd.state[tonumber(i)][key] = tonumber(v) or v
    end
  end
  model:load_state_dict(sd)
  opt:load_state_dict(osd)
  first_step = tonumber(meta.step) + 1
  dt.set_rng_state({seed = math.tointeger(tonumber(meta.rng_seed)), offset = math.tointeger(tonumber(meta.rng_offset))})
  for _ = 1, first_step - 1 do sched:step() end
  dt.print0(string.format("resumed from %s at step %d", opts.resume, first_step))
end

local n_params = 0
for _, p in ipairs(model:parameters()) do n_params = n_params + p:numel() end
dt.print0(string.format("GPT: %d layers, width %d, %d heads, vocab %d, context %d: %d parameters; mesh %dx%d (%s), %s",
  opts.layers, opts.width, opts.heads, task.vocab, task.context, n_params, opts.dp, opts.tp, opts.dims, opts.dtype))

local progress = dt.utils.progress {total = opts.steps, every = math.max(1, opts.steps // 20), log = opts.log,
                                    optimizer = opt, live = opts.print_losses and false or nil}
if opts.amp and opts.amp ~= "bfloat16" and opts.amp ~= "float16" then
  error("train_gpt: --amp takes bfloat16 or float16, got " .. opts.amp, 0)
end
local scaler = dt.amp.GradScaler {enabled = opts.amp == "float16"}
local last_step = math.min(opts.steps, opts["until"] or opts.steps)
local function train_step(input, target)
  local loss = dt.amp.autocast(function()
    local logits = model(input, pos_ids)
    return F.cross_entropy(logits:reshape(opts.batch * task.context, task.vocab),
                           target:reshape(opts.batch * task.context))
  end, {dtype = opts.amp or "bfloat16", enabled = opts.amp ~= nil})
  scaler:scale(loss):backward()
  scaler:unscale_(opt)
  dt.nn.utils.clip_grad_norm_(model:parameters(), 1.0)
  scaler:step(opt)
  scaler:update()
  opt:zero_grad()
  return loss
end
local compiled = opts.compile and dt.compile(train_step)
for step = first_step, last_step do
  local input, target, tokens = task.batch(opts.batch)
  -- the first step eager: AdamW makes its state there, which the graph then updates in place
  local loss = (compiled and step > first_step and compiled or train_step)(input, target)
  sched:step()
  local value = loss:full_tensor():item()
  if opts.print_losses then dt.print0(string.format("step %d loss %.17g", step, value)) end
  progress:update(step, {loss = value, tokens = tokens})
end
progress:finish()
if opts.fsdp then -- what this rank keeps between steps: its parameter and optimizer-state shards
  local bytes = 0
  local function add(t) local l = dt.is_dtensor(t) and t:to_local() or t; bytes = bytes + l:numel() * l:element_size() end
  for _, p in ipairs(model:parameters()) do add(p) end
  for _, s in pairs(opt:state_dict().state) do for _, v in pairs(s) do if dt.is_tensor(v) then add(v) end end end
  print(string.format("rank %d: parameters + optimizer state: %d bytes", dt.rank(), bytes))
end

-- The checkpoint: the model's and the optimizer's state as full tensors (every rank gathers,
-- rank 0 writes; positions and keys in sorted order, since gathering is a collective), and
-- the generator's position after training, so that --resume continues this very run.
local function sorted(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end
local function full(t) return dt.is_dtensor(t) and t:full_tensor() or t end
if opts["save-checkpoint"] then
  dt.checkpoint.save(checkpoint_state(last_step), opts["save-checkpoint"])
  dt.print0("saved " .. opts["save-checkpoint"])
end
if opts.save then
  local state, meta = {}, {step = tostring(last_step)}
  for name, t in pairs(model:state_dict()) do state["model." .. name] = full(t) end
  local osd = opt:state_dict()
  for _, i in ipairs(sorted(osd.state)) do
    for _, k in ipairs(sorted(osd.state[i])) do
      local v = osd.state[i][k]
      if dt.is_tensor(v) then state["optim." .. i .. "." .. k] = full(v) else meta["optim." .. i .. "." .. k] = tostring(v) end
    end
  end
  local rng = dt.get_rng_state()
  meta.rng_seed, meta.rng_offset = tostring(rng.seed), tostring(rng.offset)
  if dt.rank() == 0 then
    dt.save(state, opts.save, meta)
    print("saved " .. opts.save)
  end
end

-- ---- results ----
model:eval()
local function predict(ids) -- the model's most likely next token at every position (full tensors)
  return dt.no_grad(function() return model(ids, pos_ids):full_tensor():argmax(-1) end)
end
if not opts.data then
  -- greedy decoding: the digits after SEP, one at a time
  local n = 64 - 64 % opts.dp
  local input, target = task.batch(n)
  local ids = input:full_tensor()
  local K = task.K
  -- causal: the guess at position t reads positions 1..t only, so the true digits further
  -- on are overwritten before they could be read
  for t = K + 1, 2 * K - 1 do
    local guess = predict(dt.distribute_tensor(ids, mesh, {S(1), R}, {src_rank = false}))
    ids[{{}, t + 1}] = guess[{{}, t}]
  end
  local last = predict(dt.distribute_tensor(ids, mesh, {S(1), R}, {src_rank = false}))
  local want = target:full_tensor()
  local rows, wanted = ids:totable(), want:totable()
  local last_rows = last:totable()
  local right = 0
  for b = 1, n do
    local ok = true
    for j = K + 1, 2 * K - 1 do ok = ok and rows[b][j + 1] == wanted[b][j] end
    ok = ok and last_rows[b][2 * K] == wanted[b][2 * K]
    if ok then right = right + 1 end
  end
  dt.print0(string.format("accuracy: %d of %d sequences reversed exactly (%.0f%%)", right, n, 100 * right / n))
  for b = 1, 3 do
    local shown = {table.unpack(rows[b], 1, 2 * K)}
    shown[#shown + 1] = last_rows[b][2 * K]
    dt.print0("  " .. task.show(shown))
  end
else
  -- sample text: extend a window of the data greedily, a character at a time
  local input = task.batch(opts.dp)
  local ids = input:full_tensor()
  local out = {}
  for _ = 1, 2 * task.context do
    local guess = predict(dt.distribute_tensor(ids, mesh, {S(1), R}, {src_rank = false}))
    local next_id = guess[{1, task.context}]:item()
    out[#out + 1] = next_id
    ids = dt.cat({ids:narrow(2, 2, task.context - 1), dt.full({ids:size(1), 1}, next_id, {dtype = "int64"})}, 2)
  end
  dt.print0("sample: " .. task.show(out))
end

if opts.plot and opts.log and dt.rank() == 0 then
  local ok, err = pcall(dt.utils.plot, opts.log, opts.plot)
  print(ok and ("plotted " .. opts.plot) or tostring(err))
end
