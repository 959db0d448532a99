import tinyton as tt


@tt.jit
def broken(out_ptr):
    tt.store(out_ptr, 1.0
