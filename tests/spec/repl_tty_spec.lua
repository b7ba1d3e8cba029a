-- The REPL as a person uses it, in a terminal: tmux runs dtlua in a pane, keys are sent and
-- the screen is read back.  =expr, tab completion of dt names and tensor methods, history
-- kept across sessions, and the same on a mesh.  Skips with a line saying so without tmux.
local S = require "tests.spec.support.spec_helpers"

local function have_tmux() return os.execute("command -v tmux >/dev/null 2>&1") == true end

local base, nsessions, session = "dtlua_repl_" .. tostring(os.time()) .. "_" .. tostring(math.random(1e6)), 0
local history = os.tmpname()
-- a tmux server of this run's own (-S): parallel runs sharing the default server's socket
-- lost it when another run's last session ended
local socket = os.tmpname()
os.remove(socket)
local TMUX = "tmux -S " .. socket .. " "

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  p:close()
  return out
end
local function sleep(s) os.execute("sleep " .. s) end

local function start(args)
  nsessions = nsessions + 1
  session = base .. "_" .. nsessions
  local dtlua = S.DTLUA:sub(1, 1) == "/" and S.DTLUA or (os.getenv("PWD") .. "/" .. S.DTLUA)
  sh(string.format(TMUX .. "new-session -d -s %s -x 150 -y 50 %s", session,
    S.sh_quote("DTLUA_HISTORY=" .. history .. " " .. dtlua .. " " .. (args or ""))))
  sleep(0.5)
end
local function keys(...) sh(TMUX .. "send-keys -t " .. session .. " " .. table.concat({...}, " ")) sleep(0.4) end
local function screen() return sh(TMUX .. "capture-pane -p -t " .. session) end
local function stop() sh(TMUX .. "kill-session -t " .. session) end

-- waits until the screen shows text (a slow machine under load), then returns the screen
local function shows(text)
  local s
  for _ = 1, 20 do
    s = screen()
    if s:find(text, 1, true) then return s end
    sleep(0.2)
  end
  return s
end

describe("the REPL in a terminal (tmux)", function()
  if not have_tmux() then
    it("is skipped: tmux is not installed (apt-get install tmux)", function() end)
    return
  end
  after_each(function() stop() end)
  teardown(function() os.remove(history); os.remove(socket) end)

  it("=expr, completion of dt names and tensor methods, history across sessions", function()
    os.remove(history)
    start()
    keys("'x = dt.ones(2, 3)'", "Enter")
    keys("'=x:sum()'", "Enter")
    assert.matches("tensor(6.)", shows("tensor(6.)"), 1, true)
    keys("'=dt.manual_se'", "Tab")
    keys("'(3)'", "Enter") -- completed to dt.manual_seed(3): runs, shows nothing
    assert.is_nil(screen():find("manual_se(3)", 1, true), "completion did not complete dt.manual_se")
    keys("'=x:resha'", "Tab")
    keys("'(3, 2):size()'", "Enter")
    assert.matches("{3, 2}", shows("{3, 2}"), 1, true)
    keys("C-d")
    stop()
    -- a new session finds the lines of the last one (Up recalls the latest)
    start()
    keys("Up")
    assert.matches("=x:reshape(3, 2):size()", shows("=x:reshape(3, 2):size()"), 1, true)
    keys("C-c")
    stop()
  end)

  it("on a mesh: rank 0 reads and completes, every rank runs the line", function()
    start("-n 2")
    keys("'=dt.ran'", "Tab", "Tab") -- two matches or more: the list shows
    local s = shows("randn")
    assert.matches("randperm", s, 1, true)
    keys("C-u")
    keys("'=dt.rank() + 40'", "Enter")
    s = shows("[1] 41")
    assert.matches("[0] 40", s, 1, true)
    assert.matches("[1] 41", s, 1, true)
    stop()
  end)

  it("on a mesh: Ctrl-C interrupts the line on every rank, state kept; Ctrl-C at the prompt exits", function()
    start("-n 4")
    keys("'x = 5'", "Enter")
    keys("'while true do end'", "Enter")
    keys("C-c")
    assert.matches("[3] error: interrupted!", shows("[3] error: interrupted!"), 1, true)
    keys("C-l") -- ranks 0, 2, 3 wait in the barrier for rank 1, which loops
    keys("'if dt.rank() == 1 then while true do end else dt.barrier() end'", "Enter")
    keys("C-c")
    local s = shows("[3] error: interrupted!")
    for r = 0, 3 do assert.matches("[" .. r .. "] error: interrupted!", s, 1, true) end
    keys("'=x + dt.rank()'", "Enter")
    s = shows("[3] 8")
    assert.matches("[0] 5\n[1] 6\n[2] 7\n[3] 8", s, 1, true)
    keys("C-c")
    sleep(0.5)
    assert.are_not.equal(true, os.execute(TMUX .. "has-session -t " .. session .. " 2>/dev/null"))
  end)
end)
