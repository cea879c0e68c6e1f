module attributes {gpu.container_module} {
  gpu.module @k {
    llvm.func @k(%x: f32) -> f32 {
      %0 = math.erf %x : f32
      llvm.return %0 : f32
    }
  }
  func.func @main() {
    return
  }
}
