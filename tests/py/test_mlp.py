"""The foundation's acceptance program: tanh(max(x@w1, 0)@w2) against numpy."""
import numpy as np

import kiln

MLP = """
func.func @main(%x: tensor<256x512xf32>, %w1: tensor<512x512xf32>, %w2: tensor<512x256xf32>) -> tensor<256x256xf32> {
  %h = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<256x512xf32>, tensor<512x512xf32>) -> tensor<256x512xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<256x512xf32>
  %r = stablehlo.maximum %h, %zero : tensor<256x512xf32>
  %o = stablehlo.dot_general %r, %w2, contracting_dims = [1] x [0] : (tensor<256x512xf32>, tensor<512x256xf32>) -> tensor<256x256xf32>
  %t = stablehlo.tanh %o : tensor<256x256xf32>
  return %t : tensor<256x256xf32>
}
"""


def test_mlp_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 512), dtype=np.float32)
    w1 = rng.standard_normal((512, 512), dtype=np.float32) / np.float32(np.sqrt(512))
    w2 = rng.standard_normal((512, 256), dtype=np.float32) / np.float32(np.sqrt(512))
    (out,) = kiln.compile(MLP)(x, w1, w2)
    x64, w164, w264 = (a.astype(np.float64) for a in (x, w1, w2))
    expected = np.tanh(np.maximum(x64 @ w164, 0) @ w264)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
