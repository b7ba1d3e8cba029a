-- dt.utils for training loops: progress's plain lines and live bar (on a terminal, chosen by
-- itself: script(1) gives it one), its JSON lines read back, the summary and the sparkline,
-- rank 0 alone printing and writing; sparkline and read_jsonl; plot writing a PNG through
-- gnuplot, and saying what to install when gnuplot is absent (PATH stripped).
local S = require "tests.spec.support.spec_helpers"

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function lines(s)
  local out = {}
  for l in s:gmatch("[^\n]+") do out[#out + 1] = l end
  return out
end

local function have_gnuplot() return os.execute("command -v gnuplot >/dev/null 2>&1") == true end

-- runs a Lua program in the built dtlua; returns its output and exit status
local function run_program(prog, launcher)
  local file = S.tmpname(".lua")
  local f = assert(io.open(file, "w"))
  f:write(prog)
  f:close()
  local out, rc = S.run((launcher or "") .. " " .. S.sh_quote(file))
  os.remove(file)
  return out, rc
end

-- a progress over 10 steps with a loss 1/k and 1000 tokens per step, writing to files
local function ten_steps(opts)
  local out_path, log_path = S.tmpname(".txt"), S.tmpname(".jsonl")
  local out = assert(io.open(out_path, "w"))
  local w = dt.tensor({1.0}, {requires_grad = true})
  local opt = dt.optim.SGD({w}, {lr = 0.25})
  local o = {total = 10, every = 4, out = out, log = log_path, optimizer = opt, live = false}
  for k, v in pairs(opts or {}) do o[k] = v end
  local p = dt.utils.progress(o)
  for step = 1, 10 do
    local metrics = {loss = 1 / step, tokens = 1000}
    if step == 3 then metrics.loss = dt.tensor(1 / 3) end -- a 0-d tensor: its item()
    if step == 5 then metrics.grad_norm = 0.5 end
    p:update(step, metrics)
  end
  local summary = p:finish()
  out:close()
  local text, log = read(out_path), read(log_path)
  os.remove(out_path)
  return text, log_path, summary, log
end

describe("dt.utils.progress", function()
  it("prints plain lines every `every` steps (the first and the last too), then a summary and a sparkline", function()
    local text, log_path = ten_steps()
    os.remove(log_path)
    local l = lines(text)
    assert.are.equal(6, #l, text)
    assert.matches("^step 1/10 | loss 1 | lr 0.25 | [%d.]+[kMG]? tok/s | elapsed 0:00 | eta 0:00$", l[1])
    assert.matches("^step 4/10 | loss 0.25 | lr 0.25 |", l[2])
    assert.matches("^step 8/10 | loss 0.125 | lr 0.25 |", l[3])
    assert.matches("^step 10/10 | loss 0.1 | lr 0.25 |", l[4])
    assert.is_nil(text:find("\r", 1, true))
    assert.matches("^done: 10 steps in 0:00 %([%d.]+[kMG]? tok/s%) | loss 1 %-> 0.1 %(min 0.1 at step 10%)$", l[5])
    assert.are.equal("loss 1 " .. dt.utils.sparkline({1, 1 / 2, 1 / 3, 1 / 4, 1 / 5, 1 / 6, 1 / 7, 1 / 8, 1 / 9, 1 / 10}) .. " 0.1", l[6])
  end)

  it("prints other metrics by name and a desc first", function()
    local text, log_path = ten_steps({every = 5, desc = "train"})
    os.remove(log_path)
    local l = lines(text)
    assert.matches("^train step 5/10 | loss 0.2 | lr 0.25 | grad_norm 0.5 |", l[2])
    assert.matches("^train done: 10 steps", l[4])
  end)

  it("writes one JSON line per update (step, loss, lr, tokens_per_s, elapsed, the others), read back", function()
    local _, log_path, summary, log = ten_steps()
    assert.matches('^{"step":1,"loss":1,"lr":0.25,"tokens_per_s":[%d.e+]+,"elapsed":[%d.e+-]+,"tokens":1000}\n', log)
    local rows = dt.utils.read_jsonl(log_path)
    os.remove(log_path)
    assert.are.equal(10, #rows)
    for k, row in ipairs(rows) do
      assert.are.equal(k, row.step)
      S.close(1 / k, row.loss, 1e-7) -- step 3's loss was a float32 tensor
      assert.are.equal(0.25, row.lr)
      assert.are.equal(1000, row.tokens)
      assert.is_true(row.tokens_per_s > 0 and row.elapsed >= 0)
      if k > 1 then assert.is_true(row.elapsed >= rows[k - 1].elapsed) end
    end
    assert.are.equal(0.5, rows[5].grad_norm)
    assert.are.equal(10, summary.steps)
    assert.are.equal(10000, summary.tokens)
    S.close(0.1, summary.loss, 1e-15)
    assert.are.equal(10, summary.min_loss_step)
  end)

  it("draws a live bar with \\r when asked (live = true)", function()
    local text, log_path = ten_steps({live = true})
    os.remove(log_path)
    assert.truthy(text:find("\r[########################] 10/10  loss 0.1  lr 0.25  ", 1, true), text)
    assert.matches("\ndone: 10 steps", text)
  end)

  it("chooses the live bar on a terminal and plain lines otherwise; only rank 0 prints", function()
    local prog = [[
local p = dt.utils.progress{total = 3, every = 1}
for s = 1, 3 do p:update(s, {loss = 4 - s}) end
p:finish()
print("isatty", dt.utils.isatty())]]
    local out, rc = run_program(prog)
    assert.are.equal(0, rc, out)
    assert.matches("^step 1/3 | loss 3 | elapsed 0:00 | eta 0:00\nstep 2/3", out)
    assert.truthy(out:find("isatty\tfalse", 1, true))
    out, rc = run_program(prog, "-n 2")
    assert.are.equal(0, rc, out)
    local _, steps = out:gsub("step 1/3", "")
    assert.are.equal(1, steps, out)
    if os.execute("command -v script >/dev/null 2>&1") ~= true then
      print("progress_spec: no script(1), the terminal case is skipped")
      return
    end
    local file = S.tmpname(".lua")
    local f = assert(io.open(file, "w"))
    f:write(prog)
    f:close()
    local dtlua = S.DTLUA:sub(1, 1) == "/" and S.DTLUA or (os.getenv("PWD") .. "/" .. S.DTLUA)
    local p = io.popen("TERM=xterm timeout 60 script -qec " .. S.sh_quote(S.sh_quote(dtlua) .. " " .. S.sh_quote(file)) .. " /dev/null 2>&1")
    local tty = p:read("a")
    p:close()
    os.remove(file)
    assert.truthy(tty:find("\r[########################] 3/3  loss 1  ", 1, true), tty)
    assert.truthy(tty:find("isatty\ttrue", 1, true), tty)
  end)

  it("raises on unknown options and bad arguments", function()
    S.fails("progress: unknown option 'totl' (options: desc, every, live, log, optimizer, out, total, unicode, width)",
            dt.utils.progress, {totl = 3})
    S.fails("progress: every must be an integer >= 1, got 0", dt.utils.progress, {every = 0})
    local p = dt.utils.progress{out = io.open("/dev/null", "w"), live = false}
    S.fails("progress: update: step must be an integer, got 1.5", p.update, p, 1.5)
    S.fails("progress: update: metric loss is a table", p.update, p, 1, {loss = {}})
    S.fails("progress: cannot open the log: /nonexistent/m.jsonl", dt.utils.progress, {log = "/nonexistent/m.jsonl"})
  end)
end)

describe("dt.utils.sparkline", function()
  it("maps a series onto 8 levels, lowest _ and highest #", function()
    assert.are.equal("_.-~=+*#", dt.utils.sparkline({0, 1, 2, 3, 4, 5, 6, 7}))
    assert.are.equal("#_", dt.utils.sparkline({10, -10}))
    assert.are.equal("~~~", dt.utils.sparkline({2, 2, 2}))
    assert.are.equal("_?#", dt.utils.sparkline({0, 0 / 0, 1}))
    assert.are.equal("▁▄█", dt.utils.sparkline({0, 0.4, 1}, {unicode = true}))
    assert.are.equal("", dt.utils.sparkline({}))
  end)

  it("averages a long series into width buckets", function()
    local v = {}
    for i = 1, 100 do v[i] = i <= 50 and 0 or 1 end
    assert.are.equal("__________##########", dt.utils.sparkline(v, {width = 20}))
    assert.are.equal(60, #dt.utils.sparkline((function() local t = {} for i = 1, 1000 do t[i] = math.sin(i) end return t end)()))
  end)
end)

describe("dt.utils.read_jsonl", function()
  it("reads numbers, NaN and Infinity, strings with escapes, booleans, nested values; null is absent", function()
    local path = S.tmpname(".jsonl")
    local f = assert(io.open(path, "w"))
    f:write('{"step": 1, "loss": NaN, "x": -Infinity, "s": "a\\"b\\u00e9\\n", "ok": true, "n": null, "v": [1, {"k": 2e-3}]}\n\n')
    f:write('{"step":2,"loss":1.5e+2}\n')
    f:close()
    local rows = dt.utils.read_jsonl(path)
    assert.are.equal(2, #rows)
    assert.is_true(rows[1].loss ~= rows[1].loss)
    assert.are.equal(-math.huge, rows[1].x)
    assert.are.equal('a"bé\n', rows[1].s)
    assert.is_true(rows[1].ok)
    assert.is_nil(rows[1].n)
    assert.are.equal(0.002, rows[1].v[2].k)
    assert.are.equal(150, rows[2].loss)
    f = assert(io.open(path, "a"))
    f:write('{"step": 3, "loss": }\n')
    f:close()
    S.fails("read_jsonl: " .. path .. ":4: unexpected character '}' at column 21", dt.utils.read_jsonl, path)
    os.remove(path)
    S.fails("read_jsonl: cannot open /nonexistent/m.jsonl", dt.utils.read_jsonl, "/nonexistent/m.jsonl")
  end)
end)

describe("dt.utils.plot", function()
  local function metrics_file()
    local _, log_path = ten_steps()
    return log_path
  end

  it("draws the loss curve into a PNG with gnuplot", function()
    if not have_gnuplot() then
      print("progress_spec: gnuplot is not installed (apt-get install gnuplot-nox), the PNG case is skipped")
      return
    end
    local log_path, png = metrics_file(), S.tmpname(".png")
    assert.are.equal(png, dt.utils.plot(log_path, png))
    assert.are.equal("\137PNG\r\n\26\n", read(png):sub(1, 8))
    local png2 = S.tmpname(".png") -- another metric, other options
    assert.are.equal(png2, dt.utils.plot(log_path, png2, {key = "lr", title = "lr", width = 400, height = 300}))
    assert.are.equal("\137PNG", read(png2):sub(1, 4))
    S.fails("has no line with numbers 'step' and 'missing' to draw", dt.utils.plot, log_path, png, {key = "missing"})
    S.fails("plot: unknown option 'colour'", dt.utils.plot, log_path, png, {colour = "red"})
    os.remove(log_path)
    os.remove(png)
    os.remove(png2)
  end)

  it("says to install gnuplot-nox when gnuplot is absent (PATH stripped), and the sparkline still works", function()
    local log_path = metrics_file()
    local file = S.tmpname(".lua")
    local f = assert(io.open(file, "w"))
    f:write(string.format([[
local ok, msg = dt.utils.plot(%q, "loss.png")
print("returned", ok, msg ~= nil)
local losses = {}
for _, row in ipairs(dt.utils.read_jsonl(%q)) do losses[#losses + 1] = row.loss end
print("spark " .. dt.utils.sparkline(losses))]], log_path, log_path))
    f:close()
    local dtlua = S.DTLUA:sub(1, 1) == "/" and S.DTLUA or (os.getenv("PWD") .. "/" .. S.DTLUA)
    local p = io.popen("timeout 60 env PATH=/nonexistent " .. S.sh_quote(dtlua) .. " " .. S.sh_quote(file) .. " 2>&1; echo rc=$?")
    local out = p:read("a")
    p:close()
    os.remove(file)
    os.remove(log_path)
    assert.truthy(out:find("plot: gnuplot was not found on PATH, so loss.png was not drawn; install it " ..
                           "(Debian/Ubuntu: apt-get install gnuplot-nox)", 1, true), out)
    assert.truthy(out:find("returned\tnil\ttrue", 1, true), out)
    assert.truthy(out:find("spark #~", 1, true), out)
    assert.truthy(out:find("rc=0", 1, true), out)
  end)
end)
