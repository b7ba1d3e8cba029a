-- dt.utils for training loops (doc/optim.md): progress (a progress line or bar on rank 0,
-- metrics.jsonl), plot (a metric's curve as a PNG through gnuplot), sparkline, read_jsonl,
-- isatty and monotonic_time.
-- Returns {utils = {...}}: init.lua installs it into dt.utils (with autograd's checkpoint).
local core = require "dtensor.core"
local progress = require "dtensor.utils.progress"
local plot = require "dtensor.utils.plot"
local jsonl = require "dtensor.utils.jsonl"
local sparkline = require "dtensor.utils.sparkline"

local FDS = {[io.stdin] = 0, [io.stdout] = 1, [io.stderr] = 2}

-- isatty(f = io.stdout): whether f (io.stdin, io.stdout, io.stderr or a descriptor number) is
-- a terminal
local function isatty(f)
  if f == nil then f = io.stdout end
  local fd = FDS[f] or (math.type(f) == "integer" and f)
  if not fd then error("isatty: expected io.stdin, io.stdout, io.stderr or a file descriptor number, got " .. type(f), 2) end
  return core._isatty(fd)
end

return {utils = {
  progress = progress.new,
  plot = plot.plot,
  sparkline = sparkline,
  read_jsonl = jsonl.read,
  isatty = isatty,
  monotonic_time = function() return core._monotonic_time() end, -- seconds, for intervals
}}
