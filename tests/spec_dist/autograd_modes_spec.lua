-- Grad modes are held in each rank's context (doc/autograd.md): with the threads backend the
-- ranks are threads of one process, and one rank's no_grad must not switch another's.

describe("grad modes per rank", function()
  it("a rank inside no_grad leaves the other ranks' mode as it was", function()
    local x = dt.ones(2, {requires_grad = true})
    local odd = dt.rank() % 2 == 1
    local _ <close> = dt.set_grad_enabled(not odd) -- odd ranks off, even ranks on
    dt.barrier() -- every rank has switched before anyone looks
    local enabled, recorded = dt.is_grad_enabled(), (x * 2).requires_grad
    dt.barrier()
    assert.are.equal(not odd, enabled)
    assert.are.equal(not odd, recorded)
  end)

  it("the function forms restore each rank's own mode", function()
    local before = dt.is_grad_enabled()
    local inside = dt.no_grad(function()
      dt.barrier()
      return dt.is_grad_enabled()
    end)
    assert.is_false(inside)
    assert.are.equal(before, dt.is_grad_enabled())
    assert.is_true(before)
  end)
end)
