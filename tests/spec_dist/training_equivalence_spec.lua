-- The single-device contract for training: a small GPT (embeddings, causal attention, MLP,
-- layer norms, dropout on, cross entropy), written with dt functions on DTensors whose
-- parameters are tensor-parallel and whose batch is data-parallel on a dp x tp mesh, trained
-- by SGD, gives the losses and the parameters of the same program on plain tensors on one
-- device (float64, within 1e-9 relative), for every dp x tp factorisation of the world.
-- Dropout included: its random numbers do not depend on the mesh.
local n = dt.world_size()
local R, S = dt.Replicate(), dt.Shard
local V, C, L, NH, NL, B = 13, 16, 8, 4, 2, 4
local HD = C // NH
local P_DROP = 0.1

-- Parameters drawn in one order (the generator's offsets then match on any mesh); on a mesh:
-- replicated over dp, tensor-parallel over tp (q/k/v/fc1/lm_head by columns, out/fc2 by rows).
local function make_params(mesh)
  dt.manual_seed(1)
  local params, names = {}, {}
  local function p(name, shape, tp_place, init)
    local o = {dtype = "float64"}
    if mesh then o.device_mesh, o.placements = mesh, {R, tp_place or R} end
    local t = init == "ones" and dt.ones(shape, o) or init == "zeros" and dt.zeros(shape, o) or dt.randn(shape, o) * 0.02
    t = t:detach():requires_grad_()
    names[#names + 1] = name
    params[name] = t
    return t
  end
  p("wte", {V, C}); p("wpe", {L, C})
  for i = 1, NL do
    p("ln1w" .. i, {C}, R, "ones"); p("ln1b" .. i, {C}, R, "zeros")
    p("wq" .. i, {C, C}, S(2)); p("wk" .. i, {C, C}, S(2)); p("wv" .. i, {C, C}, S(2)); p("wo" .. i, {C, C}, S(1))
    p("ln2w" .. i, {C}, R, "ones"); p("ln2b" .. i, {C}, R, "zeros")
    p("w1" .. i, {C, 4 * C}, S(2)); p("b1" .. i, {4 * C}, S(1), "zeros")
    p("w2" .. i, {4 * C, C}, S(1)); p("b2" .. i, {C}, R, "zeros")
  end
  p("lnfw", {C}, R, "ones"); p("lm", {C, V}, S(2))
  return params, names
end

local function loss_of(w, ids, targets)
  local x = dt.F.embedding(ids, w.wte) + w.wpe
  for i = 1, NL do
    local h = dt.F.layer_norm(x, {C}, w["ln1w" .. i], w["ln1b" .. i])
    local function heads(m) return h:matmul(m):view(B, L, NH, HD):transpose(2, 3) end
    local a = dt.F.scaled_dot_product_attention(heads(w["wq" .. i]), heads(w["wk" .. i]), heads(w["wv" .. i]),
      {is_causal = true})
    x = x + dt.F.dropout(a:transpose(2, 3):reshape(B, L, C):matmul(w["wo" .. i]), P_DROP, true)
    local h2 = dt.F.layer_norm(x, {C}, w["ln2w" .. i], w["ln2b" .. i])
    x = x + dt.F.dropout(dt.F.gelu(h2:matmul(w["w1" .. i]) + w["b1" .. i]):matmul(w["w2" .. i]) + w["b2" .. i], P_DROP, true)
  end
  local logits = dt.F.layer_norm(x, {C}, w.lnfw):matmul(w.lm)
  return dt.F.cross_entropy(logits:view(B * L, V), targets:view(B * L))
end

-- 5 SGD steps; returns the losses and the final parameters (full tensors)
local function train(mesh)
  local w, names = make_params(mesh)
  local losses = {}
  for step = 1, 5 do
    local o = mesh and {device_mesh = mesh, placements = {S(1), R}} or nil
    local ids, targets = dt.randint(1, V + 1, {B, L}, o), dt.randint(1, V + 1, {B, L}, o)
    local loss = loss_of(w, ids, targets)
    loss:backward()
    losses[step] = (mesh and loss:full_tensor() or loss):item()
    dt.no_grad(function()
      for _, name in ipairs(names) do
        w[name]:add_(w[name].grad * -0.5)
        w[name].grad = nil
      end
    end)
  end
  local full = {}
  for _, name in ipairs(names) do full[name] = mesh and w[name]:full_tensor() or w[name] end
  return losses, full, names
end

local function close(a, b) return math.abs(a - b) <= 1e-9 * math.max(1, math.abs(b)) end

describe("training on DTensors equals one device", function()
  local want, want_params, names = train(nil)

  for dp = 1, n do
    if n % dp == 0 then
      local tp = n // dp
      it(string.format("dp %d x tp %d: 5 SGD steps of a GPT with dropout give one device's losses and parameters", dp, tp),
        function()
          local mesh = dt.init_device_mesh("cpu", {dp, tp}, {"dp", "tp"})
          local losses, params = train(mesh)
          for s = 1, #want do
            assert.is_true(close(losses[s], want[s]),
              string.format("step %d: loss %.17g, one device %.17g", s, losses[s], want[s]))
          end
          for _, name in ipairs(names) do
            assert.is_true(dt.allclose(params[name], want_params[name], {rtol = 1e-9, atol = 1e-12}), name)
          end
          -- the loss really moved (the test would pass vacuously on a frozen model)
          assert.is_true(math.abs(want[5] - want[1]) > 1e-3, "the loss did not change")
        end)
    end
  end
end)
