-- dt.utils.progress{...}: the progress of a long loop on rank 0 (doc/optim.md): step, loss,
-- lr, tokens/s, elapsed, ETA; a live bar redrawn with \r on a terminal, plain lines every
-- `every` steps otherwise; one JSON line per update in `log` (metrics.jsonl); at finish, a
-- summary and a sparkline of the loss.  Every rank calls update (a tensor metric's item() is
-- a collective for a DTensor); only rank 0 prints and writes.
local core = require "dtensor.core"
local jsonl = require "dtensor.utils.jsonl"
local sparkline = require "dtensor.utils.sparkline"
local clock = core._monotonic_time
local M = {}
local show = require "dtensor.value_text" -- a value for an error message

local Progress = {}
Progress.__index = Progress

local OPTIONS = {total = true, every = true, log = true, live = true, optimizer = true, desc = true, out = true,
                 unicode = true, width = true}
local LOG_FIRST = {"step", "loss", "lr", "tokens_per_s", "elapsed"} -- the JSON keys, in this order

-- 75 -> "1:15", 3725 -> "1:02:05"
local function duration(s)
  if s ~= s or s == math.huge then return "?" end
  s = math.floor(s + 0.5)
  local h, m = s // 3600, s % 3600 // 60
  if h > 0 then return string.format("%d:%02d:%02d", h, m, s % 60) end
  return string.format("%d:%02d", m, s % 60)
end
M.duration = duration

-- 12345 -> "12.3k"
local function rate_text(r)
  if r >= 1e9 then return string.format("%.1fG", r / 1e9) end
  if r >= 1e6 then return string.format("%.1fM", r / 1e6) end
  if r >= 1e3 then return string.format("%.1fk", r / 1e3) end
  return string.format("%.1f", r)
end

local function value_text(v)
  if type(v) ~= "number" then return tostring(v) end
  if math.type(v) == "integer" then return tostring(v) end
  return string.format("%.4g", v)
end

function M.new(opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("progress: expected an options table, got " .. type(opts), 2) end
  for k in pairs(opts) do
    if not OPTIONS[k] then
      local names = {}
      for name in pairs(OPTIONS) do names[#names + 1] = name end
      table.sort(names)
      error(string.format("progress: unknown option '%s' (options: %s)", show(k), table.concat(names, ", ")), 2)
    end
  end
  local total = opts.total
  if total ~= nil and (math.type(total) ~= "integer" or total < 0) then
    error("progress: total must be an integer >= 0, got " .. show(total), 2)
  end
  local every = opts.every or (total and math.max(1, total // 20)) or 10
  if math.type(every) ~= "integer" or every < 1 then error("progress: every must be an integer >= 1, got " .. show(every), 2) end
  local self = setmetatable({total = total, every = every, desc = opts.desc, optimizer = opts.optimizer,
                             unicode = opts.unicode, width = opts.width or 60, rank0 = core.rank() == 0,
                             losses = {}, loss_steps = {}, tokens = 0, updates = 0}, Progress)
  local now = clock()
  self.t0, self.last_t, self.window_t, self.window_tokens, self.window_step = now, now, now, 0, nil
  if self.rank0 then
    self.out = opts.out or io.stdout
    if opts.live == nil then
      local term = os.getenv("TERM")
      self.live = self.out == io.stdout and core._isatty(1) and term ~= nil and term ~= "dumb"
    else
      self.live = opts.live and true or false
    end
    if opts.log then
      local f, err = io.open(opts.log, "w")
      if not f then error("progress: cannot open the log: " .. tostring(err), 2) end
      self.log = f
    end
  end
  return self
end

-- the learning rate to report: metrics.lr, else the optimizer's first group's
local function current_lr(self, m)
  if m.lr ~= nil then return m.lr end
  local opt = self.optimizer
  local lr = opt and opt.param_groups and opt.param_groups[1] and opt.param_groups[1].lr
  if type(lr) == "userdata" then lr = lr:item() end -- a tensor lr (dt.compile'd steps)
  return lr
end

local function eta(self, step, elapsed)
  if not self.total or not self.first_step or step <= self.first_step - 1 then return nil end
  local done = step - (self.first_step - 1)
  return elapsed / done * math.max(0, self.total - step)
end

-- the fields of a line: loss, lr, other metrics (sorted), tokens/s
local function fields(self, m, lr, tok_rate)
  local parts = {}
  if m.loss ~= nil then parts[#parts + 1] = "loss " .. value_text(m.loss) end
  if lr ~= nil then parts[#parts + 1] = "lr " .. string.format("%.3g", lr) end
  local keys = {}
  for k in pairs(m) do if k ~= "loss" and k ~= "lr" and k ~= "tokens" then keys[#keys + 1] = k end end
  table.sort(keys)
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. " " .. value_text(m[k]) end
  if tok_rate then parts[#parts + 1] = rate_text(tok_rate) .. " tok/s" end
  return parts
end

local function plain_line(self, step, m, lr, tok_rate, elapsed)
  local head = "step " .. step .. (self.total and ("/" .. self.total) or "")
  if self.desc then head = self.desc .. " " .. head end
  local parts = {head}
  for _, f in ipairs(fields(self, m, lr, tok_rate)) do parts[#parts + 1] = f end
  parts[#parts + 1] = "elapsed " .. duration(elapsed)
  local left = eta(self, step, elapsed)
  if left then parts[#parts + 1] = "eta " .. duration(left) end
  return table.concat(parts, " | ")
end

local function live_line(self, step, m, lr, tok_rate, elapsed)
  local bar = ""
  if self.total and self.total > 0 then
    local n = 24
    local filled = math.min(n, math.floor(step / self.total * n))
    bar = "[" .. string.rep("#", filled) .. string.rep(".", n - filled) .. "] "
  end
  local parts = {(self.desc and (self.desc .. " ") or "") .. bar .. step .. (self.total and ("/" .. self.total) or "")}
  for _, f in ipairs(fields(self, m, lr, tok_rate)) do parts[#parts + 1] = f end
  local left = eta(self, step, elapsed)
  parts[#parts + 1] = duration(elapsed) .. (left and ("<" .. duration(left)) or "")
  return table.concat(parts, "  ")
end

-- p:update(step, {loss =, tokens =, lr =, ...}): record one step.  Metrics are numbers or
-- 0-d tensors (their item(), on every rank); tokens counts this step's tokens (for
-- tokens/s); lr defaults to the optimizer's.  Any other metric is printed and logged too.
function Progress:update(step, metrics)
  if math.type(step) ~= "integer" then error("progress: update: step must be an integer, got " .. show(step), 2) end
  if metrics ~= nil and type(metrics) ~= "table" then
    error("progress: update: metrics must be a table {loss =, tokens =, ...}, got " .. type(metrics), 2)
  end
  local m = {}
  for k, v in pairs(metrics or {}) do
    if type(k) ~= "string" then error("progress: update: metric names must be strings, got " .. show(k), 2) end
    if core.is_tensor(v) then v = v:item() end
    if type(v) ~= "number" and type(v) ~= "string" and type(v) ~= "boolean" then
      error(string.format("progress: update: metric %s is a %s (numbers, strings, booleans or 0-d tensors)", show(k), type(v)), 2)
    end
    m[k] = v
  end
  self.first_step = self.first_step or step
  self.updates = self.updates + 1
  self.step = step
  if type(m.loss) == "number" then
    local n = #self.losses + 1
    self.losses[n], self.loss_steps[n] = m.loss, step
  end
  local now = clock()
  local since = now - self.last_t
  self.last_t = now
  local tokens = type(m.tokens) == "number" and m.tokens or nil
  if tokens then self.tokens, self.window_tokens = self.tokens + tokens, self.window_tokens + tokens end
  if not self.rank0 then return end
  local elapsed, lr = now - self.t0, current_lr(self, m)
  if self.log then
    local row = {}
    for k, v in pairs(m) do row[k] = v end
    row.step, row.lr, row.elapsed = step, lr, math.floor(elapsed * 1e6 + 0.5) / 1e6 -- microseconds
    if tokens and since > 0 then row.tokens_per_s = tonumber(string.format("%.6g", tokens / since)) end
    self.log:write(jsonl.encode(row, LOG_FIRST), "\n")
    self.log:flush() -- so that a crash keeps every line, and tail -f shows them
  end
  local last = self.total and step >= self.total
  local due
  if self.live then
    due = last or self.drawn_t == nil or now - self.drawn_t >= 0.1
  else
    due = last or step % self.every == 0 or self.updates == 1
  end
  if not due then return end
  local window = now - self.window_t
  local tok_rate = (self.window_tokens > 0 and window > 0) and self.window_tokens / window or nil
  self.window_t, self.window_tokens = now, 0
  if self.live then
    local line = live_line(self, step, m, lr, tok_rate, elapsed)
    local pad = math.max(0, (self.drawn_len or 0) - #line)
    self.out:write("\r", line, string.rep(" ", pad))
    self.drawn_t, self.drawn_len = now, #line
  else
    self.out:write(plain_line(self, step, m, lr, tok_rate, elapsed), "\n")
  end
  self.out:flush()
end

-- p:finish(): a summary line and a sparkline of the loss (rank 0); closes the log.  Returns
-- {steps, elapsed, tokens, tokens_per_s, loss (the last), min_loss, min_loss_step} on every
-- rank.  Idempotent; p can be a <close> variable.
function Progress:finish()
  if self.summary then return self.summary end
  local elapsed = clock() - self.t0
  local s = {steps = self.updates, elapsed = elapsed, tokens = self.tokens,
             tokens_per_s = (self.tokens > 0 and elapsed > 0) and self.tokens / elapsed or nil}
  local min_i
  for i, l in ipairs(self.losses) do
    if l == l and (min_i == nil or l < self.losses[min_i]) then min_i = i end
  end
  s.loss = self.losses[#self.losses]
  if min_i then s.min_loss, s.min_loss_step = self.losses[min_i], self.loss_steps[min_i] end
  self.summary = s
  if not self.rank0 then return s end
  if self.live and self.drawn_t then self.out:write("\n") end
  local line = string.format("%sdone: %d steps in %s", self.desc and (self.desc .. " ") or "", s.steps, duration(elapsed))
  if s.tokens_per_s then line = line .. " (" .. rate_text(s.tokens_per_s) .. " tok/s)" end
  if #self.losses > 0 then
    line = line .. string.format(" | loss %s -> %s", value_text(self.losses[1]), value_text(s.loss))
    if min_i then line = line .. string.format(" (min %s at step %d)", value_text(s.min_loss), s.min_loss_step) end
  end
  self.out:write(line, "\n")
  if #self.losses > 1 then
    self.out:write("loss ", value_text(self.losses[1]), " ", sparkline(self.losses, {width = self.width, unicode = self.unicode}),
                   " ", value_text(s.loss), "\n")
  end
  self.out:flush()
  if self.log then
    self.log:close()
    self.log = nil
  end
  return s
end

Progress.__close = Progress.finish

return M
