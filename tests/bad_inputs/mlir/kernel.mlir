// A tt kernel: input of tinyton-to-llvm, not of the fusion passes.
builtin.module {
  func.func @store_pid(%out: !tt.ptr<i32>) {
    %pid = tt.program_id 0 : i32
    tt.store %out, %pid : !tt.ptr<i32>, i32
    func.return
  }
}
