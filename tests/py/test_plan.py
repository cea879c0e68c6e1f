"""The execution plan: buffer assignment and thunk sequence read off the `codegen` stage."""
import numpy as np
import pytest

import kiln
from kiln.errors import KilnError

MLP = """
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = stablehlo.add %0, %b : tensor<4x16xf32>
  %2 = stablehlo.tanh %1 : tensor<4x16xf32>
  return %2 : tensor<4x16xf32>
}"""

CHAIN = """
func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {
  %0 = stablehlo.custom_call @plan_test_double(%x) : (tensor<64xf32>) -> tensor<64xf32>
  %1 = stablehlo.custom_call @plan_test_double(%0) : (tensor<64xf32>) -> tensor<64xf32>
  %2 = stablehlo.custom_call @plan_test_double(%1) : (tensor<64xf32>) -> tensor<64xf32>
  %3 = stablehlo.custom_call @plan_test_double(%2) : (tensor<64xf32>) -> tensor<64xf32>
  return %3 : tensor<64xf32>
}"""

WHILE = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c5 = stablehlo.constant dense<5> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<4xf32>
   cond {
    %p = stablehlo.compare LT, %i, %c5 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %n = stablehlo.add %i, %c1 : tensor<i32>
    %w = stablehlo.add %v, %v : tensor<4xf32>
    stablehlo.return %n, %w : tensor<i32>, tensor<4xf32>
  }
  return %r#1 : tensor<4xf32>
}"""

MATMUL = """
func.func @main(%x: tensor<256x256xf32>, %w: tensor<256x256xf32>) -> tensor<256x256xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %1 = stablehlo.tanh %0 : tensor<256x256xf32>
  return %1 : tensor<256x256xf32>
}"""


def _double(results, operands, **_):
    results[0][...] = operands[0] * 2


def _slice_sizes(thunk, assignment, which):
    return [assignment.slice_of(b).size for b in getattr(thunk, which)]


def test_mlp_buffers_match_shapes_and_kernels_write_the_result():
    exe = kiln.compile(MLP)
    assignment = exe.buffer_assignment()
    sizes = {(b.kind, b.parameter): b.size for b in assignment.buffers}
    assert sizes == {("parameter", 0): 4 * 8 * 4, ("parameter", 1): 8 * 16 * 4,
                     ("parameter", 2): 4 * 16 * 4, ("output", 3): 4 * 16 * 4}
    assert assignment.peak_bytes <= assignment.total_bytes
    thunks = exe.thunks()
    assert thunks and all(t.kind == "kernel" for t in thunks)
    output = next(b for b in assignment.buffers if b.kind == "output")
    assert output in thunks[-1].writes
    # The dot reads x and w; the last kernel reads the bias.
    params = [b for b in assignment.buffers if b.kind == "parameter"]
    assert any(params[0] in t.reads and params[1] in t.reads for t in thunks)
    text = str(assignment)
    assert "allocation 0: size 128, parameter 0:" in text
    assert "maybe-live-out" in text and "Total bytes used: " in text
    assert "{3, 0, 256}" in str(thunks)


def test_custom_call_chain_reuses_temporaries_with_disjoint_live_ranges():
    kiln.register_custom_call("plan_test_double", _double)
    exe = kiln.compile(CHAIN)
    np.testing.assert_array_equal(exe(np.ones(64, np.float32))[0], np.full(64, 16, np.float32))
    thunks = exe.thunks()
    assert [t.kind for t in thunks] == ["custom-call"] * 4
    assert {t.target for t in thunks} == {"plan_test_double"}
    assignment = exe.buffer_assignment()
    temps = assignment.temps
    assert len(temps) == 3 and all(t.size == 64 * 4 for t in temps)
    first, _, third = temps
    assert first.live[1] < third.live[0]
    assert first.offset == third.offset
    assert (first, third) in assignment.shared()
    assert assignment.temp_bytes == 2 * 64 * 4
    assert assignment.peak_bytes < assignment.total_bytes
    # Each call reads what the previous one wrote.
    for before, after in zip(thunks, thunks[1:]):
        assert before.writes == after.reads
    assert "preallocated-temp" in str(assignment)
    assert "custom-call" in str(thunks) and "target=plan_test_double" in str(thunks)


def test_while_loop_nests_its_condition_and_body():
    exe = kiln.compile(WHILE)
    thunks = exe.thunks()
    loops = [t for t in thunks if t.kind == "while"]
    assert len(loops) == 1
    condition, body = loops[0].nested
    assert not condition  # the condition is scalar code: no thunk of its own
    assert any(t.kind == "kernel" and t.writes for t in body)
    # The loop carries its vector in the caller's output buffer: one copy in, then the body
    # updates it in place (kiln-update-carried-in-place).
    output = next(b for b in exe.buffer_assignment().buffers if b.kind == "output")
    assert thunks[0].kind == "copy" and thunks[0].writes == [output]
    assert any(t.writes == [output] for t in body)
    assignment = exe.buffer_assignment()
    assert assignment.peak_bytes <= assignment.total_bytes
    assert "region 1:" in str(thunks)


def test_large_matmul_is_a_blas_thunk_on_full_buffers():
    exe = kiln.compile(MATMUL)
    thunks = exe.thunks()
    kinds = [t.kind for t in thunks]
    assert "blas" in kinds
    gemm = thunks[kinds.index("blas")]
    assignment = exe.buffer_assignment()
    # Both factors, and the accumulator it updates in place.
    assert _slice_sizes(gemm, assignment, "reads") == [256 * 256 * 4] * 3
    assert gemm.writes[0] in gemm.reads
    assert _slice_sizes(gemm, assignment, "writes") == [256 * 256 * 4]
    # Work after the gemm consumes what it wrote.
    assert any(gemm.writes[0] in t.reads for t in thunks[kinds.index("blas") + 1:])
    assert assignment.peak_bytes <= assignment.total_bytes


def test_dynamic_program_needs_shapes():
    exe = kiln.compile("""
func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  %0 = stablehlo.add %x, %x : tensor<?xf32>
  return %0 : tensor<?xf32>
}""")
    with pytest.raises(KilnError, match="static size"):
        exe.buffer_assignment()
    assignment = exe.buffer_assignment((8,))
    assert sorted(b.size for b in assignment.buffers) == [32, 32]
