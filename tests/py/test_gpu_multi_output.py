"""Multi-output fusion on the GPU target (lowering/gpu/multi_output.py): an elementwise
producer also needed elsewhere is computed in its consumer's kernel, which writes both
results; run through `target="gpu-emulator"` and compared with numpy."""
from __future__ import annotations

import numpy as np

import kiln

PROGRAM = """func.func @main(%x: tensor<4x300xf32>, %b: tensor<300xf32>) -> (tensor<4x300xf32>, tensor<4x300xf32>) {
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<300xf32>) -> tensor<4x300xf32>
  %s = stablehlo.add %x, %bb : tensor<4x300xf32>
  %y = stablehlo.tanh %s : tensor<4x300xf32>
  %z = stablehlo.multiply %y, %y : tensor<4x300xf32>
  %w = stablehlo.subtract %z, %x : tensor<4x300xf32>
  return %y, %w : tensor<4x300xf32>, tensor<4x300xf32>
}"""


def test_a_producer_also_returned_is_written_by_its_consumers_kernel():
    exe = kiln.compile(PROGRAM, target="gpu-emulator")
    launches = [line for line in str(exe.thunks()).splitlines() if "kernel-launch" in line]
    assert len(launches) == 1, exe.thunks()      # one pass over x and b, two results written
    reads, writes = launches[0].split("reads:")[1].split("writes:")
    assert reads.count("{") == 2 and writes.count("{") == 2   # reads x and b, writes y and w
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 300)).astype(np.float32)
    b = rng.standard_normal(300).astype(np.float32)
    y, w = exe(x, b)
    want_y = np.tanh(x + b)
    np.testing.assert_allclose(y, want_y, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(w, want_y * want_y - x, rtol=1e-5, atol=1e-5)
    # the same results as the CPU target
    cpu_y, cpu_w = kiln.compile(PROGRAM)(x, b)
    np.testing.assert_allclose(y, cpu_y, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(w, cpu_w, rtol=1e-5, atol=1e-5)


def test_the_fused_kernel_assembles_for_the_gpu():
    exe = kiln.compile(PROGRAM, target="gpu")
    assert len([l for l in str(exe.thunks()).splitlines() if "kernel-launch" in l]) == 1
