-- The BLAS kernels in use: dt.config() and `dtlua -v` name them; on a CPU with AVX2 they are
-- not OpenBLAS's generic ones; the program's one re-exec that picks them (src/cli/blas_core.c)
-- keeps argv, stdin, the exit status and MPI.
local S = require("tests.spec.support.spec_helpers")
local H = require("tests.spec.support.launch_helpers")
local run, sh_quote = S.run, S.sh_quote

-- OpenBLAS cores without AVX2 kernels (x86_64 names of 0.3.x)
local generic = {Prescott = true, Core2 = true, Penryn = true, Dunnington = true, Nehalem = true, Atom = true,
                 Sandybridge = true, Katmai = true, Coppermine = true, Northwood = true, Banias = true,
                 Athlon = true, Opteron = true, ["Opteron(SSE3)"] = true, Barcelona = true, Bobcat = true,
                 Bulldozer = true, Piledriver = true, Steamroller = true, Excavator = true, Nano = true}

-- makes the program re-exec once even where OpenBLAS's own pick is fine
local FORCE = "DTLUA_TEST_BLAS_REEXEC=1"

describe("BLAS kernels: dt.config(), dtlua -v, the core re-exec", function()
  it("dt.config() names the BLAS, its kernels, threads and the CPU's vector ISA", function()
    local c = dt.config()
    assert.is_truthy(({openblas = true, blis = true, none = true})[c.blas])
    assert.are.equal("string", type(c.blas_core))
    assert.is_true(math.type(c.blas_threads) == "integer" and c.blas_threads >= 1)
    assert.is_truthy(({amx = true, avx512 = true, avx2 = true, sse = true})[c.cpu])
    assert.are_not.equal(dt.config(), c) -- a fresh table each call
    local out, rc = run("-v")
    assert.are.equal(0, rc)
    assert.is_truthy(out:find("BLAS: " .. c.blas .. ", " .. c.blas_core .. " kernels", 1, true), out)
  end)

  it("runs OpenBLAS's AVX2 (or wider) kernels on a CPU with AVX2", function()
    local c = dt.config()
    if c.blas ~= "openblas" or c.cpu == "sse" or os.getenv("OPENBLAS_CORETYPE") then
      print(string.format("skip: BLAS %s, CPU %s, OPENBLAS_CORETYPE %s (needs OpenBLAS, AVX2, no forced core)",
                          c.blas, c.cpu, tostring(os.getenv("OPENBLAS_CORETYPE"))))
      return
    end
    -- the interpreter run fresh, as a user runs it: no variable set
    local out, rc = run("-e " .. sh_quote("io.write(dt.config().blas_core)"))
    assert.are.equal(0, rc)
    assert.is_nil(generic[out], "generic OpenBLAS core " .. out .. " on a CPU with " .. c.cpu)
  end)

  it("a core the user set is kept, and named", function()
    if dt.config().blas ~= "openblas" then return end
    local out = run("-e " .. sh_quote("io.write(dt.config().blas_core, ' ', tostring(os.getenv('DTLUA_BLAS_CORE_SET')))"),
                    nil, "OPENBLAS_CORETYPE=Prescott")
    assert.are.equal("Prescott nil", out)
  end)

  it("the re-exec keeps argv, stdin and the exit status, and happens once", function()
    local out, rc = run("- a 'b c'", "print(os.getenv('DTLUA_BLAS_CORE_SET'), #arg, ...) os.exit(3)", FORCE)
    assert.are.equal(3, rc)
    assert.are.equal("test\t2\ta\tb c\n", out)
    out, rc = run("-e " .. sh_quote("print(arg[1], arg[0]) error('boom')") .. " x", nil, FORCE)
    assert.are.equal(1, rc)
    assert.is_truthy(out:find("boom", 1, true), out)
    -- a nested dtlua inherits the marker: no second re-exec, the same core
    out, rc = run("-e " .. sh_quote("print(os.getenv('DTLUA_BLAS_CORE_SET'))"), nil, FORCE .. " DTLUA_BLAS_CORE_SET=x")
    assert.are.equal(0, rc)
    assert.are.equal("x\n", out)
  end)

  it("the re-exec keeps an mpirun rank's place (MPI_Init comes after it)", function()
    if not H.mpirun_prefix() then
      print("skip: no mpirun or no MPI build")
      return
    end
    local out, rc = H.mrun(2, "-e " .. sh_quote("print(dt.distributed.get_rank(), os.getenv('DTLUA_BLAS_CORE_SET'))"),
                           FORCE)
    assert.are.equal(0, rc, out)
    local ranks = {}
    for r in out:gmatch("(%d)\ttest") do ranks[#ranks + 1] = r end
    table.sort(ranks)
    assert.are.same({"0", "1"}, ranks, out)
  end)
end)
