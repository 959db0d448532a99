"""Two kernels in one file: `tinyton compile` needs -k to pick one."""

import tinyton as tt


@tt.jit
def first(out_ptr):
    tt.store(out_ptr, 1.0)


@tt.jit
def second(out_ptr):
    tt.store(out_ptr, 2.0)


@tt.jit
def doubled(x):
    return x * 2


@tt.jit
def blocked(out_ptr, n, BLOCK: tt.constexpr):
    offsets = tt.arange(0, BLOCK)
    tt.store(out_ptr + offsets, 1.0, mask=offsets < n)
