-- Every ```lua block of README.md and doc/*.md runs as written, so that no documented example
-- can break unseen.  A block runs on one rank, or on the ranks its first line names
-- (`-- dtlua -n 4`); a block whose first line is `-- continued...` runs after the block before
-- it (in one program, on that block's ranks); a block that is not a whole program says why on
-- its first line (`-- fragment: ...`) and is only compiled.  Each runs in a fresh dtlua, in a
-- temporary directory (examples write files).
local S = require "tests.spec.support.spec_helpers"

local function blocks(path)
  local f = assert(io.open(path))
  local text = f:read("a")
  f:close()
  local list, n = {}, 0
  for body in text:gmatch("\n```lua\n(.-)\n```") do
    n = n + 1
    local b = {body = body, index = n, head = body:match("^[^\n]*")}
    local prev = list[#list]
    if b.head:match("^%-%- continued") and prev then
      b.body, b.head = prev.body .. "\n" .. body, prev.head
    end
    list[#list + 1] = b
  end
  return list
end

local files = {"README.md"}
for name in io.popen("ls doc/*.md"):lines() do files[#files + 1] = name end

describe("documented Lua examples", function()
  local total = 0
  for _, path in ipairs(files) do
    for _, b in ipairs(blocks(path)) do
      total = total + 1
      local first = b.head
      local what = path .. " example " .. b.index
      if first:match("^%-%- fragment:") then
        it(what .. " compiles (" .. first:sub(4) .. ")", function()
          assert(load(b.body, "=" .. what))
        end)
      else
        local ranks = tonumber(first:match("^%-%- dtlua %-n (%d+)")) or 1
        it(what .. " runs on " .. ranks .. " rank" .. (ranks > 1 and "s" or ""), function()
          local file = os.tmpname()
          local f = assert(io.open(file, "w"))
          f:write(b.body, "\n")
          f:close()
          local dir = os.tmpname()
          os.remove(dir)
          local dtlua = S.DTLUA:sub(1, 1) == "/" and S.DTLUA or (os.getenv("PWD") .. "/" .. S.DTLUA)
          local p = io.popen(string.format("mkdir -p %s && cd %s && timeout 60 %s %s %s 2>&1; echo \"rc=$?\"",
            S.sh_quote(dir), S.sh_quote(dir), S.sh_quote(dtlua), ranks > 1 and ("-n " .. ranks) or "", S.sh_quote(file)))
          local out = p:read("a")
          p:close()
          os.execute("rm -rf " .. S.sh_quote(dir) .. " " .. S.sh_quote(file))
          local rc = tonumber(out:match("rc=(%d+)\n?$"))
          assert.are.equal(0, rc, what .. " failed:\n" .. b.body .. "\n---- output:\n" .. out)
        end)
      end
    end
  end
  it("found the examples", function() assert.is_true(total >= 10, "only " .. total .. " blocks") end)
end)
