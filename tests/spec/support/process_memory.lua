-- The process's memory as the memory specs read it (Linux /proc).
local M = {}

-- Resident bytes, or nil without /proc.
function M.rss_bytes()
  local f = io.open("/proc/self/statm")
  if not f then return nil end
  local _, resident = f:read("n", "n")
  f:close()
  return resident * 4096 -- pages of 4 KiB (x86-64, aarch64 Linux defaults)
end

-- Minor page faults of the process so far (field 10 of /proc/self/stat), or nil without /proc.
function M.minor_faults()
  local f = io.open("/proc/self/stat")
  if not f then return nil end
  local stat = f:read("a")
  f:close()
  local after_name = stat:match("%) (.*)$") -- the name may hold spaces; fields 3.. follow ") "
  local fields = {}
  for v in after_name:gmatch("%S+") do fields[#fields + 1] = v end
  return tonumber(fields[8]) -- field 10 counted from 1, here from field 3
end

-- AddressSanitizer keeps freed memory in quarantine (256 MiB by default): resident memory
-- then says nothing about leaks (LeakSanitizer reports them at exit in that build).
function M.sanitized()
  local f = io.open("/proc/self/maps")
  if not f then return false end
  local maps = f:read("a")
  f:close()
  return maps:find("libasan", 1, true) ~= nil
end

return M
