-- dt.optim on one device: each optimizer's parameters after a few steps against torch's
-- update formulas computed here in plain Lua (float64 tensors, so 1e-12 tolerances), param
-- groups, zero_grad, state_dict round trips, the schedulers' lr sequences against their closed
-- forms, and dt.nn.utils.clip_grad_norm_ / clip_grad_value_.  DTensors:
-- tests/spec_dist/optim_dtensor_spec.lua.
local S = require "tests.spec.support.spec_helpers"

local function values(t) -- a 1-d tensor's values as a Lua list
  local out = {}
  for i = 1, t:numel() do out[i] = t[i]:item() end
  return out
end

local function param(list) return dt.tensor(list, {dtype = "float64", requires_grad = true}) end

-- the gradients of the steps: step k's gradient of element i
local GRADS = {{0.5, -1.0, 2.0}, {-0.3, 0.7, 1.1}, {1.5, 0.2, -0.4}, {0.05, -2.0, 0.9}}
local START = {1.0, -2.0, 3.0}

-- runs n steps of opt on p with the gradients above (set directly, as backward would)
local function run(make, n)
  local p = param(START)
  local opt = make({p})
  for k = 1, n do
    p.grad = dt.tensor(GRADS[k], {dtype = "float64"})
    opt:step()
  end
  return p, opt
end

-- torch.optim.SGD's update, element by element
local function ref_sgd(hp, n)
  local lr, mom, damp, wd = hp.lr, hp.momentum or 0, hp.dampening or 0, hp.weight_decay or 0
  local p, buf = {table.unpack(START)}, {}
  for k = 1, n do
    for i = 1, #p do
      local g = GRADS[k][i]
      if hp.maximize then g = -g end
      g = g + wd * p[i]
      if mom ~= 0 then
        if k == 1 then buf[i] = g else buf[i] = mom * buf[i] + (1 - damp) * g end
        g = hp.nesterov and (g + mom * buf[i]) or buf[i]
      end
      p[i] = p[i] - lr * g
    end
  end
  return p
end

-- torch.optim.Adam / AdamW's update, element by element
local function ref_adam(hp, n, decoupled)
  local lr, b1, b2, eps = hp.lr or 1e-3, (hp.betas or {0.9, 0.999})[1], (hp.betas or {0.9, 0.999})[2], hp.eps or 1e-8
  local wd = hp.weight_decay or (decoupled and 1e-2 or 0)
  local p, m, v, vmax = {table.unpack(START)}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}
  for k = 1, n do
    for i = 1, #p do
      local g = GRADS[k][i]
      if hp.maximize then g = -g end
      if decoupled then p[i] = p[i] * (1 - lr * wd) else g = g + wd * p[i] end
      m[i] = m[i] + (1 - b1) * (g - m[i])
      v[i] = b2 * v[i] + (1 - b2) * g * g
      local second = v[i]
      if hp.amsgrad then
        vmax[i] = math.max(vmax[i], v[i])
        second = vmax[i]
      end
      local denom = math.sqrt(second) / math.sqrt(1 - b2 ^ k) + eps
      p[i] = p[i] - lr / (1 - b1 ^ k) * m[i] / denom
    end
  end
  return p
end

describe("dt.optim.SGD", function()
  local cases = {
    {"plain", {lr = 0.1}},
    {"momentum", {lr = 0.1, momentum = 0.9}},
    {"momentum and dampening", {lr = 0.05, momentum = 0.8, dampening = 0.3}},
    {"nesterov", {lr = 0.1, momentum = 0.9, nesterov = true}},
    {"weight decay", {lr = 0.1, momentum = 0.5, weight_decay = 0.01}},
    {"maximize", {lr = 0.1, momentum = 0.9, maximize = true, weight_decay = 0.1}},
  }
  for _, c in ipairs(cases) do
    it("follows torch's update: " .. c[1], function()
      local p = run(function(ps) return dt.optim.SGD(ps, c[2]) end, 4)
      S.close(ref_sgd(c[2], 4), values(p), 1e-12)
    end)
  end

  it("keeps torch's defaults (lr 1e-3) and a momentum buffer only with momentum", function()
    local p, opt = run(function(ps) return dt.optim.SGD(ps) end, 2)
    S.close(ref_sgd({lr = 1e-3}, 2), values(p), 1e-12)
    assert.is_nil(opt.state[p])
    local q, opt2 = run(function(ps) return dt.optim.SGD(ps, {lr = 0.1, momentum = 0.9}) end, 1)
    S.close(GRADS[1], values(opt2.state[q].momentum_buffer), 0) -- the first buffer is the gradient
  end)

  it("trains through backward: the gradient of a loss", function()
    local w = dt.tensor({1.0, 2.0}, {dtype = "float64", requires_grad = true})
    local opt = dt.optim.SGD({w}, 0.25) -- a number is the learning rate
    for _ = 1, 3 do
      opt:zero_grad()
      local loss = (w * w):sum()
      loss:backward() -- gradient 2w: w *= 0.5 each step
      opt:step()
    end
    S.close({0.125, 0.25}, values(w), 1e-15)
    assert.is_true(w.requires_grad and w.is_leaf)
  end)

  it("trains a dt.nn module through module:parameters()", function()
    dt.manual_seed(3)
    local model = dt.nn.Sequential(dt.nn.Linear(4, 8), dt.nn.ReLU(), dt.nn.Linear(8, 2))
    local params = model:parameters()
    local opt = dt.optim.SGD(params, {lr = 0.05, momentum = 0.9})
    local x, y = dt.randn(16, 4), dt.randn(16, 2)
    local losses = {}
    for step = 1, 30 do
      opt:zero_grad()
      local loss = ((model(x) - y) ^ 2):mean()
      loss:backward()
      opt:step()
      losses[step] = loss:item()
    end
    assert.is_true(losses[30] < 0.8 * losses[1], losses[1] .. " -> " .. losses[30])
    for _, p in ipairs(params) do assert.is_not_nil(opt.state[p].momentum_buffer) end
  end)

  it("step(closure) runs the closure with grad mode on and returns its loss", function()
    local w = dt.tensor({3.0}, {dtype = "float64", requires_grad = true})
    local opt = dt.optim.SGD({w}, {lr = 0.5})
    local loss = dt.no_grad(function()
      return opt:step(function()
        opt:zero_grad()
        local l = (w * w):sum()
        l:backward()
        return l
      end)
    end)
    assert.are.equal(9, loss:item())
    S.close({0.0}, values(w), 0)
  end)
end)

describe("dt.optim.Adam and AdamW", function()
  local cases = {
    {"Adam", {lr = 0.1}},
    {"Adam", {lr = 0.01, betas = {0.8, 0.99}, eps = 1e-6}},
    {"Adam", {lr = 0.1, weight_decay = 0.1}},
    {"Adam", {lr = 0.1, amsgrad = true}},
    {"Adam", {lr = 0.1, maximize = true}},
    {"AdamW", {lr = 0.1}},
    {"AdamW", {lr = 0.1, weight_decay = 0.5, amsgrad = true}},
    {"AdamW", {}},
  }
  for _, c in ipairs(cases) do
    local hp = c[2]
    local what = {}
    for k, v in pairs(hp) do what[#what + 1] = k .. "=" .. (type(v) == "table" and table.concat(v, ",") or tostring(v)) end
    table.sort(what)
    it(c[1] .. " follows torch's update (" .. table.concat(what, " ") .. ")", function()
      local p, opt = run(function(ps) return dt.optim[c[1]](ps, hp) end, 4)
      S.close(ref_adam(hp, 4, c[1] == "AdamW"), values(p), 1e-12)
      local st = opt.state[p]
      assert.are.equal(4, st.step:item())
      assert.are.equal("float32", st.step.dtype)
      assert.are.equal("float64", st.exp_avg.dtype)
      assert.are.equal(hp.amsgrad == true, st.max_exp_avg_sq ~= nil)
    end)
  end

  -- fused (the default) is one op per parameter, adam_step_; fused = false the composed ops:
  -- the same float operations in the same order, so the same bits
  local function train(kind, hp, dtype, shapes, fused, threads)
    dt.manual_seed(7)
    local ps = {}
    for i, shape in ipairs(shapes) do
      local t = dt.randn(table.unpack(shape)):to(dtype)
      if i == 2 and #shape == 2 then t = t:t():contiguous():t() end -- a non-contiguous parameter
      ps[i] = t:requires_grad_()
    end
    local o = {fused = fused}
    for k, v in pairs(hp) do o[k] = v end
    local opt = dt.optim[kind](ps, o)
    local before = dt.get_num_threads()
    dt.set_num_threads(threads)
    for k = 1, 3 do
      for i, p in ipairs(ps) do p.grad = (p:detach() * (0.5 * k) - i * 0.25):sin() end
      opt:step()
    end
    dt.set_num_threads(before)
    return ps, opt
  end
  local fused_cases = {
    {"AdamW", {lr = 0.01}}, {"Adam", {lr = 0.1, weight_decay = 0.1}}, {"Adam", {lr = 0.1, amsgrad = true, maximize = true}},
    {"Adam", {lr = 0.02, betas = {0.7, 0.9}}},
    {"AdamW", {lr = 0.05, weight_decay = 0.3, amsgrad = true, betas = {0.8, 0.95}, eps = 1e-6}},
  }
  for _, c in ipairs(fused_cases) do
    for _, dtype in ipairs({"float32", "float64"}) do
      it(c[1] .. " fused equals the composed ops bitwise, " .. dtype .. ", 1/2/4 threads", function()
        local rng = S.prng(#c[1] + #dtype)
        local shapes = {{rng.int(0, 5), rng.int(1, 7)}, {rng.int(1, 9), rng.int(2, 9)}, {0}, {300, 130}}
        local want, wopt = train(c[1], c[2], dtype, shapes, false, 1)
        for _, threads in ipairs({1, 2, 4}) do
          local got, gopt = train(c[1], c[2], dtype, shapes, true, threads)
          for i = 1, #shapes do
            local what = c[1] .. " " .. dtype .. " parameter " .. i .. " on " .. threads .. " threads"
            assert(got[i]:equal(want[i]), what .. ": differs")
            for _, key in ipairs({"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}) do
              local a, b = gopt.state[got[i]][key], wopt.state[want[i]][key]
              assert.are.equal(a == nil, b == nil, what .. ": state " .. key)
              if a then assert(a:equal(b), what .. ": state " .. key .. " differs") end
            end
          end
        end
      end)
    end
  end

  -- inside dt.compile the op takes the step count and lr as tensors and computes the bias
  -- corrections itself: the same bits as the numbers eager computes in Lua
  it("fused with the step count as a tensor equals the numbers computed in Lua, bitwise", function()
    local rng = S.prng(41)
    local function uniform(lo, hi) return lo + (hi - lo) * rng.int(0, 1000000) / 1000000 end
    for trial = 1, 24 do
      local dtype = trial % 2 == 0 and "float64" or "float32"
      local decoupled, amsgrad, maximize = trial % 3 ~= 0, trial % 4 == 1, trial % 5 == 2
      local lr, wd = uniform(1e-4, 0.1), trial % 6 == 0 and 0 or uniform(0, 0.3)
      local beta1, beta2, eps = uniform(0.5, 0.95), uniform(0.9, 0.9999), 1e-8
      local step = rng.int(1, 40)
      local shape = {rng.int(0, 6), rng.int(1, 40)}
      local function operands()
        dt.manual_seed(trial)
        local t = {}
        for i = 1, 5 do t[i] = dt.randn(table.unpack(shape)):to(dtype) end
        t[4] = t[4]:abs()
        t[5] = t[5]:abs()
        return t
      end
      local a, b = operands(), operands()
      local step_t = dt.tensor(step, {dtype = "float32"})
      local lr_t = trial % 2 == 0 and dt.tensor(lr, {dtype = "float64"}) or lr
      dt._adam_step_(a[1], a[2], a[3], a[4], amsgrad and a[5] or nil, lr / (1 - beta1 ^ step), math.sqrt(1 - beta2 ^ step),
                     beta1, beta2, eps, decoupled and 1 - lr * wd or wd, decoupled, maximize)
      dt._adam_step_from_count_(b[1], b[2], b[3], b[4], amsgrad and b[5] or nil, step_t, lr_t, beta1, beta2, eps, wd,
                                decoupled, maximize)
      for i = 1, 5 do assert(a[i]:equal(b[i]), "trial " .. trial .. " operand " .. i .. " differs") end
    end
  end)

  it("fused with the step count as a tensor refuses a step or lr that is not one float number", function()
    local p, z = dt.zeros(2, 3), dt.zeros(2, 3)
    local cases = {
      {{p, z, z:clone(), z:clone(), nil, dt.ones(2), 0.1, 0.9, 0.999, 1e-8, 0, true, false},
       "adam_step_: step must be a 1-element float32 or float64 tensor, got float32 of 2 elements"},
      {{p, z, z:clone(), z:clone(), nil, dt.tensor(1, {dtype = "int64"}), 0.1, 0.9, 0.999, 1e-8, 0, true, false},
       "adam_step_: step must be a 1-element float32 or float64 tensor, got int64 of 1 elements"},
      {{p, z, z:clone(), z:clone(), nil, dt.tensor(1.0), dt.zeros(3), 0.9, 0.999, 1e-8, 0, true, false},
       "adam_step_: lr must be a 1-element float32 or float64 tensor, got float32 of 3 elements"},
      {{p, z, z:clone(), z:clone(), nil, 3, 0.1}, "adam_step_: expected a tensor for step, got number"},
      {{p, z, z:clone(), z:clone(), nil, dt.tensor(1.0), "x"}, "adam_step_: expected a tensor for lr, got string"},
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(dt._adam_step_from_count_, table.unpack(c[1], 1, 13))
      assert(not ok and tostring(err):find(c[2], 1, true), "expected '" .. c[2] .. "', got " .. tostring(err))
    end
  end)

  it("fused: its op refuses mismatched operands, naming adam_step_ and the values", function()
    local p, z = dt.zeros(2, 3), dt.zeros(2, 3)
    local function call(...) return dt._adam_step_(...) end
    local cases = {
      {{p, dt.zeros(3, 2), z, z:clone(), nil, 0.1, 1, 0.9, 0.999, 1e-8, 1, true, false}, "adam_step_: grad has shape {3,2}, param {2,3}"},
      {{p, z:to("float64"), z:clone(), z:clone(), nil, 0.1, 1, 0.9, 0.999, 1e-8, 1, true, false}, "adam_step_: grad has dtype float64, param float32"},
      {{dt.zeros(2, 3, {dtype = "int64"}), z, z, z, nil, 0.1, 1, 0.9, 0.999, 1e-8, 1, true, false}, "adam_step_: param must be a floating-point tensor, got int64"},
      {{p, z, dt.zeros(3):expand(2, 3), z:clone(), nil, 0.1, 1, 0.9, 0.999, 1e-8, 1, true, false}, "adam_step_: cannot write exp_avg in place"},
      {{p, z, nil}, "adam_step_: expected a tensor for exp_avg, got nil"},
      {{p, z, z:clone(), z:clone(), nil, 0.1, "x"}, "adam_step_: argument 7 must be a number, got string"},
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(call, table.unpack(c[1], 1, 13))
      assert(not ok and tostring(err):find(c[2], 1, true), "expected '" .. c[2] .. "', got " .. tostring(err))
    end
  end)
end)

describe("optimizers' parameter groups and gradients", function()
  it("takes param groups with their own hyperparameters, the others from the defaults", function()
    local a, b = param({1.0, 2.0}), param({3.0})
    local opt = dt.optim.SGD({{params = {a}}, {params = {b}, lr = 0.5, momentum = 0.9}}, {lr = 0.1})
    assert.are.equal(0.1, opt.param_groups[1].lr)
    assert.are.equal(0, opt.param_groups[1].momentum)
    assert.are.equal(0.5, opt.param_groups[2].lr)
    a.grad, b.grad = dt.tensor({1.0, 1.0}, {dtype = "float64"}), dt.tensor({2.0}, {dtype = "float64"})
    opt:step()
    S.close({0.9, 1.9}, values(a), 1e-15)
    S.close({2.0}, values(b), 1e-15)
    local c = param({0.0})
    opt:add_param_group({params = c, lr = 1})
    assert.are.equal(3, #opt.param_groups)
    assert.are.equal(0, opt.param_groups[3].weight_decay)
  end)

  it("skips parameters without a gradient (no state, no change)", function()
    local a, b = param({1.0}), param({2.0})
    local opt = dt.optim.Adam({a, b}, {lr = 0.1})
    a.grad = dt.tensor({1.0}, {dtype = "float64"})
    opt:step()
    assert.are.equal(2.0, b[1]:item())
    assert.is_nil(opt.state[b])
    assert.is_not_nil(opt.state[a])
  end)

  it("zero_grad sets gradients to nil by default, or to zeros with false", function()
    local a = param({1.0, 2.0})
    local opt = dt.optim.SGD({a}, 0.1)
    a.grad = dt.tensor({1.0, 1.0}, {dtype = "float64"})
    opt:zero_grad()
    assert.is_nil(a.grad)
    a.grad = dt.tensor({1.0, 1.0}, {dtype = "float64"})
    opt:zero_grad(false)
    S.close({0, 0}, values(a.grad), 0)
    a.grad = dt.tensor({1.0, 1.0}, {dtype = "float64"})
    opt:zero_grad({set_to_none = false})
    S.close({0, 0}, values(a.grad), 0)
  end)

  it("prints its groups as torch does", function()
    local opt = dt.optim.SGD({param({1.0})}, {lr = 0.1, momentum = 0.9})
    local s = tostring(opt)
    assert.truthy(s:find("SGD (\nParameter Group 1\n", 1, true))
    assert.truthy(s:find("    momentum: 0.9\n", 1, true))
  end)

  it("raises on invalid arguments, naming the optimizer and the value", function()
    local p = param({1.0})
    S.fails("SGD: invalid learning rate -0.1 (must be >= 0)", dt.optim.SGD, {p}, {lr = -0.1})
    S.fails("SGD: unknown option 'momentun' (options: dampening, lr, maximize, momentum, nesterov, weight_decay)",
            dt.optim.SGD, {p}, {momentun = 0.9})
    S.fails("SGD: Nesterov momentum requires a momentum and zero dampening (momentum 0, dampening 0)",
            dt.optim.SGD, {p}, {nesterov = true})
    S.fails("Adam: invalid beta parameter at index 2: 1 (must be in [0, 1))", dt.optim.Adam, {p}, {betas = {0.9, 1}})
    S.fails("Adam: invalid epsilon value -1 (must be >= 0)", dt.optim.Adam, {p}, {eps = -1})
    S.fails("AdamW: got an empty parameter list", dt.optim.AdamW, {})
    S.fails("SGD: params[2] is a string; an optimizer takes tensors", dt.optim.SGD, {p, "w"})
    S.fails("SGD: params[1] is not a leaf (it was computed by mul)", dt.optim.SGD, {p * 2})
    S.fails("SGD: params[1] has dtype int64; parameters must be floating point", dt.optim.SGD, {dt.tensor({1})})
    S.fails("SGD: param_groups[2].params[1] is already in parameter group 1", dt.optim.SGD, {{params = {p}}, {params = {p}}})
  end)
end)

describe("optimizers' state_dict", function()
  local function adam_after(n, p)
    local opt = dt.optim.Adam({p}, {lr = 0.1, amsgrad = true})
    for k = 1, n do
      p.grad = dt.tensor(GRADS[k], {dtype = "float64"})
      opt:step()
    end
    return opt
  end

  it("has torch's layout: state by parameter position, groups with their hyperparameters", function()
    local a, b = param({1.0, 2.0, 3.0}), param({1.0})
    local opt = dt.optim.SGD({{params = {b}}, {params = {a}, lr = 0.2}}, {lr = 0.1, momentum = 0.9})
    a.grad = dt.tensor({1.0, 1.0, 1.0}, {dtype = "float64"})
    opt:step()
    local sd = opt:state_dict()
    assert.are.same({1}, sd.param_groups[1].params)
    assert.are.same({2}, sd.param_groups[2].params)
    assert.are.equal(0.2, sd.param_groups[2].lr)
    assert.is_nil(sd.state[1]) -- b had no gradient
    assert.is_true(dt.is_tensor(sd.state[2].momentum_buffer))
    -- the tensors can be saved as they are
    local path = S.tmpname(".safetensors")
    dt.save({["state.2.momentum_buffer"] = sd.state[2].momentum_buffer}, path)
    assert.is_true(dt.equal(dt.load(path)["state.2.momentum_buffer"], opt.state[a].momentum_buffer))
    os.remove(path)
  end)

  it("round-trips: a new optimizer loaded from it continues exactly as the old one", function()
    local p = param(START)
    local opt = adam_after(2, p)
    local q = dt.tensor(values(p), {dtype = "float64", requires_grad = true})
    local opt2 = dt.optim.Adam({q}, {lr = 0.5}) -- its hyperparameters are replaced too
    opt2:load_state_dict(opt:state_dict())
    assert.are.equal(0.1, opt2.param_groups[1].lr)
    assert.is_true(opt2.param_groups[1].amsgrad)
    for k = 3, 4 do
      p.grad = dt.tensor(GRADS[k], {dtype = "float64"})
      q.grad = dt.tensor(GRADS[k], {dtype = "float64"})
      opt:step()
      opt2:step()
    end
    assert.is_true(dt.equal(p, q))
    S.close(ref_adam({lr = 0.1, amsgrad = true}, 4), values(q), 1e-12)
    -- the loaded state is a copy: the first optimizer's steps did not move the second's
    assert.are.equal(4, opt2.state[q].step:item())
    assert.are_not.equal(opt.state[p].exp_avg, opt2.state[q].exp_avg)
  end)

  it("loads state tensors saved in another dtype (cast to the parameter's)", function()
    local p = param(START)
    local opt = adam_after(1, p)
    local sd = opt:state_dict()
    sd.state[1].exp_avg = sd.state[1].exp_avg:float()
    local q = dt.tensor(START, {dtype = "float64", requires_grad = true})
    local opt2 = dt.optim.Adam({q})
    opt2:load_state_dict(sd)
    assert.are.equal("float64", opt2.state[q].exp_avg.dtype)
  end)

  it("raises when the state dict does not fit", function()
    local p = param(START)
    local sd = adam_after(1, p):state_dict()
    S.fails("Adam: load_state_dict: the state dict has 1 parameter groups, the optimizer 2",
            function() dt.optim.Adam({{params = {param({1.0})}}, {params = {param({1.0})}}}):load_state_dict(sd) end)
    S.fails("Adam: load_state_dict: parameter group 1 of the state dict has 1 parameters, the optimizer's 2",
            function() dt.optim.Adam({param({1.0}), param({1.0})}):load_state_dict(sd) end)
    S.fails("Adam: load_state_dict: state 'exp_avg' of parameter 1 has shape {3}, the parameter {2}",
            function() dt.optim.Adam({param({1.0, 2.0})}):load_state_dict(sd) end)
  end)
end)

describe("dt.optim.lr_scheduler", function()
  local LS = dt.optim.lr_scheduler
  local function optimizer(lr) return dt.optim.SGD({param({1.0})}, {lr = lr}) end

  -- the lrs of steps 0..n (0: after construction), stepping the optimizer first as torch wants
  local function sequence(opt, sched, n)
    local lrs = {sched:get_last_lr()[1]}
    for _ = 1, n do
      opt:step()
      sched:step()
      lrs[#lrs + 1] = sched:get_last_lr()[1]
      assert.are.equal(lrs[#lrs], opt.param_groups[1].lr)
    end
    return lrs
  end

  local function closed(n, f)
    local out = {}
    for t = 0, n do out[t + 1] = f(t) end
    return out
  end

  it("StepLR: base * gamma^floor(t / step_size)", function()
    local opt = optimizer(0.5)
    local lrs = sequence(opt, LS.StepLR(opt, 3, 0.5), 10)
    S.close(closed(10, function(t) return 0.5 * 0.5 ^ (t // 3) end), lrs, 1e-15)
    local opt2 = optimizer(0.5) -- by name
    S.close(lrs, sequence(opt2, LS.StepLR(opt2, {step_size = 3, gamma = 0.5}), 10), 0)
  end)

  it("CosineAnnealingLR: eta_min + (base - eta_min)(1 + cos(pi t / T_max)) / 2, over two periods", function()
    local opt = optimizer(0.1)
    local lrs = sequence(opt, LS.CosineAnnealingLR(opt, 8, 0.01), 16)
    S.close(closed(16, function(t) return 0.01 + 0.09 * (1 + math.cos(math.pi * t / 8)) / 2 end), lrs, 1e-12)
  end)

  it("LinearLR: base * (start + (end - start) min(t, total) / total)", function()
    local opt = optimizer(0.2)
    local lrs = sequence(opt, LS.LinearLR(opt, {start_factor = 0.25, end_factor = 1.0, total_iters = 4}), 8)
    S.close(closed(8, function(t) return 0.2 * (0.25 + 0.75 * math.min(t, 4) / 4) end), lrs, 1e-12)
    local opt2 = optimizer(0.3) -- torch's defaults: 1/3 -> 1 over 5 steps
    S.close(closed(6, function(t) return 0.3 * (1 / 3 + 2 / 3 * math.min(t, 5) / 5) end),
            sequence(opt2, LS.LinearLR(opt2), 6), 1e-12)
  end)

  it("LambdaLR: base * f(t), one function per group", function()
    local a, b = param({1.0}), param({1.0})
    local opt = dt.optim.SGD({{params = {a}, lr = 1}, {params = {b}, lr = 2}})
    local sched = LS.LambdaLR(opt, {function(t) return 0.5 ^ t end, function(t) return 1 / (t + 1) end})
    for _ = 1, 3 do
      opt:step()
      sched:step()
    end
    S.close({0.125, 0.5}, sched:get_last_lr(), 1e-15)
    S.fails("LambdaLR: expected 2 lr_lambdas (one per parameter group), got 1", LS.LambdaLR, opt, {function() return 1 end})
  end)

  it("cosine_with_warmup: linear warmup to the base lr, cosine decay to min_lr, then min_lr", function()
    local opt = optimizer(0.1)
    local lrs = sequence(opt, LS.cosine_with_warmup(opt, 4, 12, 0.01), 15)
    S.close(closed(15, function(t)
      if t < 4 then return 0.1 * (t + 1) / 4 end
      if t >= 12 then return 0.01 end
      return 0.01 + 0.09 * (1 + math.cos(math.pi * (t - 4) / 8)) / 2
    end), lrs, 1e-15)
  end)

  it("SequentialLR: LinearLR warmup then CosineAnnealingLR, as torch", function()
    local opt = optimizer(0.1)
    local warm = LS.LinearLR(opt, 0.1, 1.0, 5)
    local cos = LS.CosineAnnealingLR(opt, 10, 0.0)
    local lrs = sequence(opt, LS.SequentialLR(opt, {warm, cos}, {5}), 15)
    S.close(closed(15, function(t)
      if t < 5 then return 0.1 * (0.1 + 0.9 * t / 5) end
      return 0.1 * (1 + math.cos(math.pi * (t - 5) / 10)) / 2
    end), lrs, 1e-12)
  end)

  it("state_dict / load_state_dict resume a schedule where it was", function()
    local opt = optimizer(0.1)
    local sched = LS.SequentialLR(opt, {LS.LinearLR(opt, 0.5, 1.0, 3), LS.StepLR(opt, 2, 0.5)}, {3})
    for _ = 1, 5 do sched:step() end
    local sd, lr = sched:state_dict(), opt.param_groups[1].lr
    assert.are.equal(5, sd.last_epoch)
    local rest = {}
    for _ = 1, 4 do
      sched:step()
      rest[#rest + 1] = opt.param_groups[1].lr
    end
    local opt2 = optimizer(0.1)
    local sched2 = LS.SequentialLR(opt2, {LS.LinearLR(opt2, 0.5, 1.0, 3), LS.StepLR(opt2, 2, 0.5)}, {3})
    sched2:load_state_dict(sd)
    opt2.param_groups[1].lr = lr -- the optimizer's own state_dict carries the lr
    local rest2 = {}
    for _ = 1, 4 do
      sched2:step()
      rest2[#rest2 + 1] = opt2.param_groups[1].lr
    end
    S.close(rest, rest2, 0)
  end)

  it("raises on invalid arguments", function()
    local opt = optimizer(0.1)
    S.fails("StepLR: missing argument step_size", LS.StepLR, opt)
    S.fails("StepLR: unknown option 'step' (options: step_size, gamma, last_epoch)", LS.StepLR, opt, {step = 2})
    S.fails("LinearLR: start_factor must be in (0, 1], got 0", LS.LinearLR, opt, 0)
    S.fails("CosineAnnealingLR: T_max must be a positive number, got 0", LS.CosineAnnealingLR, opt, 0)
    S.fails("cosine_with_warmup: expected integers 0 <= warmup < total, got warmup 10, total 5", LS.cosine_with_warmup, opt, 10, 5)
    S.fails("StepLR: expected an optimizer (from dt.optim) as the first argument, got nil", LS.StepLR, nil, 3)
    S.fails("SequentialLR: expected 1 milestones (one fewer than the 2 schedulers), got 0",
            LS.SequentialLR, opt, {LS.StepLR(opt, 2), LS.StepLR(opt, 3)}, {})
  end)
end)

describe("dt.nn.utils.clip_grad_norm_ and clip_grad_value_", function()
  local clip = dt.nn.utils.clip_grad_norm_
  local function with_grads()
    local a, b = param({1.0, 1.0}), param({1.0, 1.0, 1.0})
    a.grad = dt.tensor({3.0, -4.0}, {dtype = "float64"})
    b.grad = dt.tensor({0.0, 12.0, 0.0}, {dtype = "float64"})
    return a, b
  end

  it("returns the total 2-norm over every gradient and scales them to max_norm", function()
    local a, b = with_grads()
    local total = clip({a, b}, 6.5)
    assert.are.equal(0, #total:size())
    S.close(13, total:item(), 1e-12)
    local coef = 6.5 / (13 + 1e-6)
    S.close({3 * coef, -4 * coef}, values(a.grad), 1e-12)
    S.close({0, 12 * coef, 0}, values(b.grad), 1e-12)
  end)

  it("leaves gradients whose norm is below max_norm unchanged", function()
    local a, b = with_grads()
    S.close(13, clip({a, b}, 100):item(), 1e-12)
    S.close({3, -4}, values(a.grad), 0)
  end)

  it("takes other orders: 1, 3 and inf", function()
    local a, b = with_grads()
    S.close(19, clip({a, b}, 1e9, 1):item(), 1e-12)
    S.close((27 + 64 + 1728) ^ (1 / 3), clip({a, b}, 1e9, 3):item(), 1e-12)
    S.close(12, clip({a, b}, 1e9, math.huge):item(), 0)
    local total = clip({a, b}, 6, "inf")
    S.close(12, total:item(), 0)
    S.close({0, 12 * 6 / (12 + 1e-6), 0}, values(b.grad), 1e-12)
  end)

  it("takes one tensor, skips parameters without a gradient, and gives 0 without any", function()
    local a, b = with_grads()
    local c = param({1.0})
    S.close(5, clip(a, 100):item(), 1e-12)
    S.close(13, clip({a, c, b}, 100):item(), 1e-12)
    assert.are.equal(0, clip({c}, 1):item())
  end)

  it("keeps the gradients' dtype; error_if_nonfinite raises on a nan or inf norm", function()
    local w = dt.tensor({1.0, 2.0}, {requires_grad = true})
    w.grad = dt.tensor({3.0, 4.0})
    local total = clip({w}, 1)
    assert.are.equal("float32", total.dtype)
    S.close(5, total:item(), 1e-6)
    w.grad = dt.tensor({0 / 0, 1.0})
    S.fails("clip_grad_norm_: the total norm of order 2 of the gradients is", clip, {w}, 1, 2, {error_if_nonfinite = true})
    assert.is_true(clip({w}, 1, {error_if_nonfinite = false}):item() ~= clip({w}, 1):item()) -- nan, scaled anyway
    S.fails("clip_grad_norm_: norm_type must be a positive number or math.huge (\"inf\"), got 0", clip, {w}, 1, 0)
  end)

  it("clip_grad_value_ clamps every gradient to [-v, v]", function()
    local a, b = with_grads()
    dt.nn.utils.clip_grad_value_({a, b}, 3.5)
    S.close({3, -3.5}, values(a.grad), 0)
    S.close({0, 3.5, 0}, values(b.grad), 0)
    S.fails("clip_grad_value_: clip_value must be a number >= 0, got -1", dt.nn.utils.clip_grad_value_, {a}, -1)
  end)
end)
