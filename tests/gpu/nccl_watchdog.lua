-- The NCCL watchdog on a GPU (tests/gpu/run.sh runs it with DTLUA_TIMEOUT=5 under -n 2 and
-- expects the run to fail naming the rank and the op): rank 0 waits in an NCCL recv that
-- rank 1 never sends, so the collective stays pending on the GPU until the watchdog ends
-- the world.
local D = dt.distributed
if dt.rank() == 0 then
  D.recv(dt.zeros({4}):to("cuda"), 1)
  print("nccl_watchdog: the recv returned, which it must not")
else
  local t0 = os.clock()
  while os.clock() - t0 < 20 do end -- busy, in no collective
end
