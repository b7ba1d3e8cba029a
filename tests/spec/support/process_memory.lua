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
