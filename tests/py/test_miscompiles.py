"""Regression tests for silent wrong answers Kiln once gave, each checked against an answer
computed independently (numpy, or JAX on XLA:CPU).

A `stablehlo.case` result that is both rescaled and read afterwards: One-Shot Bufferize did
not see that the `scf.index_switch` Kiln lowered the case to aliases what its branches yield,
so the rescale wrote in place into the case's result and a later `max` read the rescaled
values (Kiln 3.0 where JAX gives 6.013). kiln-switches-as-ifs (lowering/switches_as_ifs.py)
turns such switches into scf.if chains before bufferization, on both targets; on the GPU
emulator the same program gave 0.714 for the max. kiln-if-chains-as-switches
(lowering/if_chains_as_switches.py) puts each chain back as one switch after bufferization,
so the GPU plan still runs the case as one host "switch" step.
"""
from __future__ import annotations

import numpy as np
import pytest

import kiln

# scatter-add into broadcast zeros, then case(negate | sort along rows), then r * 0.5 and
# max(r): every tensor of the same shape shares one tensor.empty after CSE, so each in-place
# decision of bufferization matters.
SCATTER_CASE_MAX = """
func.func public @main(%y: tensor<6x3xf32>, %idx: tensor<4xi32>, %p: tensor<i32>)
    -> (tensor<6x3xf32>, tensor<f32>) {
  %i = stablehlo.broadcast_in_dim %idx, dims = [0] : (tensor<4xi32>) -> tensor<4x1xi32>
  %rows = "stablehlo.gather"(%y, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1],
      collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>,
      indices_are_sorted = false, slice_sizes = array<i64: 1, 3>}>
      : (tensor<6x3xf32>, tensor<4x1xi32>) -> tensor<4x3xf32>
  %zero_scalar = stablehlo.constant dense<0.0> : tensor<f32>
  %zero = stablehlo.broadcast_in_dim %zero_scalar, dims = [] : (tensor<f32>) -> tensor<6x3xf32>
  %z = "stablehlo.scatter"(%zero, %i, %rows) <{indices_are_sorted = false,
      scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1],
      inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>,
      unique_indices = false}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) : (tensor<6x3xf32>, tensor<4x1xi32>, tensor<4x3xf32>) -> tensor<6x3xf32>
  %r = "stablehlo.case"(%p) ({
    %n = stablehlo.negate %z : tensor<6x3xf32>
    stablehlo.return %n : tensor<6x3xf32>
  }, {
    %sorted = "stablehlo.sort"(%z) <{dimension = 0 : i64, is_stable = true}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %lt = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    }) : (tensor<6x3xf32>) -> tensor<6x3xf32>
    stablehlo.return %sorted : tensor<6x3xf32>
  }) : (tensor<i32>) -> tensor<6x3xf32>
  %half_scalar = stablehlo.constant dense<0.5> : tensor<f32>
  %half = stablehlo.broadcast_in_dim %half_scalar, dims = [] : (tensor<f32>) -> tensor<6x3xf32>
  %scaled = stablehlo.multiply %r, %half : tensor<6x3xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %max = stablehlo.reduce(%r init: %ninf) applies stablehlo.maximum across dimensions = [0, 1]
      : (tensor<6x3xf32>, tensor<f32>) -> tensor<f32>
  return %scaled, %max : tensor<6x3xf32>, tensor<f32>
}
"""


def _scatter_case_max_expected(y, idx, branch):
    z = np.zeros((6, 3), np.float32)
    np.add.at(z, idx, y[idx])
    # stablehlo.case: an index out of [0, N) takes the last branch.
    r = -z if branch == 0 else np.sort(z, axis=0)
    return r * np.float32(0.5), r.max()


@pytest.mark.parametrize("branch", [0, 1, 7])
def test_case_result_read_after_an_in_place_candidate(branch):
    y = (np.arange(18, dtype=np.float32).reshape(6, 3) / 7 - 1).astype(np.float32)
    idx = np.array([5, 0, 2, 2], np.int32)
    scaled, top = kiln.compile(SCATTER_CASE_MAX)(y, idx, np.int32(branch))
    want_scaled, want_top = _scatter_case_max_expected(y, idx, branch)
    np.testing.assert_array_equal(scaled, want_scaled)
    assert top == want_top


@pytest.mark.parametrize("branch", [0, 1, 7])
def test_case_result_read_after_an_in_place_candidate_on_gpu(branch):
    import json

    from kiln.runtime.gpu_plan import nested_regions

    y = (np.arange(18, dtype=np.float32).reshape(6, 3) / 7 - 1).astype(np.float32)
    idx = np.array([5, 0, 2, 2], np.int32)
    exe = kiln.compile(SCATTER_CASE_MAX, target="gpu-emulator")
    scaled, top = exe(y, idx, np.int32(branch))
    want_scaled, want_top = _scatter_case_max_expected(y, idx, branch)
    np.testing.assert_array_equal(scaled, want_scaled)
    assert top == want_top
    # The case is still one host switch step (one index read back), not a chain of ifs.
    plan = json.loads(next(iter(exe._cache.values())).artifact.code)["plan"]
    kinds, pending = [], list(plan["steps"])
    while pending:
        step = pending.pop()
        kinds.append(step["op"])
        for region in nested_regions(step):
            pending.extend(region["steps"])
    assert kinds.count("switch") == 1 and "if" not in kinds


def test_jax_max_after_scatter_and_cond_with_sort():
    """The program the miscompile was found with, against JAX on XLA:CPU, from StableHLO text
    and from HLO text."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax import lax

    def program(x, w, idx, scale):
        y = jnp.tanh(x @ w) + jnp.sum(w, axis=0)
        y = lax.fori_loop(0, 3, lambda i, v: v * scale + i.astype(v.dtype), y)
        z = jnp.zeros((6, 3), jnp.float32).at[idx].add(y[idx])
        z = lax.cond(scale > 0, lambda t: jnp.sort(t, axis=0), lambda t: -t, z)
        as_bf16 = (z * 0.5).astype(jnp.bfloat16).astype(jnp.float32)
        return as_bf16, jnp.max(z)

    rng = np.random.default_rng(7)
    inputs = [rng.standard_normal((6, 4)).astype(np.float32),
              rng.standard_normal((4, 3)).astype(np.float32),
              np.array([5, 0, 2, 2], np.int32), np.float32(0.75)]
    lowered = jax.jit(program).lower(*inputs)
    want = [np.asarray(v) for v in jax.jit(program)(*inputs)]
    for text in (lowered.as_text(), lowered.compiler_ir("hlo").as_hlo_text()):
        got = kiln.compile(text)(*inputs)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-2, atol=1e-6)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
