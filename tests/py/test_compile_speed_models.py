"""Compile time that scales with distinct work (issue 27): repeated kernels are compiled once
(kiln-dedupe-kernels), and the entry is folded into its C-interface wrapper, so a model with
hundreds of weight arguments makes no call with thousands of operands for LLVM to select
(kiln-inline-entry-into-c-interface)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from torch_mlir import ir

import kiln
from kiln.context import make_context
from kiln.lowering import Pipeline
from kiln.lowering.codegen.dedupe_kernels import dedupe_kernels
from kiln.pipeline import run_stages
from kiln.targets import get_target

NEW_PASSES = ("kiln-dedupe-kernels", "kiln-inline-entry-into-c-interface")

# Three products of the same shapes, each followed by the same elementwise op: the blocks a
# model repeats. Each product gets an outlined gemm function, each big elementwise op a
# parallel loop body.
REPEATED_BLOCKS = """
func.func @main(%x: tensor<256x256xf32>, %w: tensor<256x256xf32>) -> tensor<256x256xf32> {
  %0 = stablehlo.dot %x, %w : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %1 = stablehlo.tanh %0 : tensor<256x256xf32>
  %2 = stablehlo.dot %1, %w : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %3 = stablehlo.tanh %2 : tensor<256x256xf32>
  %4 = stablehlo.dot %3, %w : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %5 = stablehlo.tanh %4 : tensor<256x256xf32>
  return %5 : tensor<256x256xf32>
}
"""


def many_arguments(count: int, size: int = 3) -> str:
    """@main(a0..aN: tensor<SIZExf32>) = a0 + a1 + ... (a model's weights as arguments)."""
    kind = f"tensor<{size}xf32>"
    params = ", ".join(f"%a{i}: {kind}" for i in range(count))
    lines = [f"func.func @main({params}) -> {kind} {{"]
    last = "%a0"
    for i in range(1, count):
        lines.append(f"  %s{i} = stablehlo.add {last}, %a{i} : {kind}")
        last = f"%s{i}"
    lines += [f"  return {last} : {kind}", "}"]
    return "\n".join(lines)


def lowered(text: str, without: tuple[str, ...] = ()) -> ir.Module:
    """`text` through every CPU stage (LLVM dialect), optionally leaving steps out."""
    stages = get_target("cpu").stages(None)
    for stage in stages:
        stage.steps = [s for s in stage.steps if str(s).split("{")[0] not in without]
    with make_context():
        module = ir.Module.parse(text)
    run_stages(module, stages, "t.mlir")
    return module


def defined_functions(module: ir.Module) -> dict[str, ir.Operation]:
    found = {}
    for op in module.body.operations:
        op = op.operation
        if op.name == "llvm.func" and len(op.regions[0].blocks):
            found[ir.StringAttr(op.attributes["sym_name"]).value] = op
    return found


def only_result(results) -> np.ndarray:
    assert isinstance(results, (list, tuple)) and len(results) == 1
    return np.asarray(results[0])


def kernels(module: ir.Module) -> list[str]:
    return sorted(n for n in defined_functions(module)
                  if n.startswith(("kiln_gemm_", "kiln_parallel_body_")))


def test_repeated_blocks_compile_each_distinct_kernel_once():
    without = kernels(lowered(REPEATED_BLOCKS, without=("kiln-dedupe-kernels",)))
    deduped = lowered(REPEATED_BLOCKS)
    with_pass = kernels(deduped)
    # One gemm function per product without the pass; the three are the same code.
    assert len([k for k in without if k.startswith("kiln_gemm_")]) == 3
    assert len([k for k in with_pass if k.startswith("kiln_gemm_")]) == 1
    assert len(with_pass) < len(without)
    # Every call and function address names a function that is still there.
    text = str(deduped)
    named = set(re.findall(r"@(kiln_(?:gemm|parallel_body)_\w+)", text))
    assert named == set(with_pass)


def test_repeated_blocks_still_compute_the_same():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 256)).astype(np.float32)
    w = (rng.standard_normal((256, 256)) / 16).astype(np.float32)
    out = only_result(kiln.compile(REPEATED_BLOCKS)(x, w))
    expected = x.astype(np.float64)
    for _ in range(3):
        expected = np.tanh(expected @ w)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


LLVM_FUNCS = """
module {
  llvm.func @kiln_parallel_for(!llvm.ptr, i64)
  llvm.func internal @body_a(%p: !llvm.ptr, %n: i64) {
    %c = llvm.mlir.constant(2.0 : f32) : f32
    llvm.store %c, %p : f32, !llvm.ptr
    llvm.return
  }
  llvm.func internal @body_b(%p: !llvm.ptr, %n: i64) {
    %c = llvm.mlir.constant(2.0 : f32) : f32
    llvm.store %c, %p : f32, !llvm.ptr
    llvm.return
  }
  llvm.func internal @body_c(%p: !llvm.ptr, %n: i64) {
    %c = llvm.mlir.constant(3.0 : f32) : f32
    llvm.store %c, %p : f32, !llvm.ptr
    llvm.return
  }
  llvm.func @exported_copy(%p: !llvm.ptr, %n: i64) {
    %c = llvm.mlir.constant(2.0 : f32) : f32
    llvm.store %c, %p : f32, !llvm.ptr
    llvm.return
  }
  llvm.func @main(%p: !llvm.ptr, %n: i64) {
    llvm.call @body_a(%p, %n) : (!llvm.ptr, i64) -> ()
    llvm.call @body_b(%p, %n) : (!llvm.ptr, i64) -> ()
    llvm.call @body_c(%p, %n) : (!llvm.ptr, i64) -> ()
    %f = llvm.mlir.addressof @body_b : !llvm.ptr
    llvm.call @kiln_parallel_for(%f, %n) : (!llvm.ptr, i64) -> ()
    llvm.return
  }
}
"""


def test_identical_internal_functions_merge_and_their_uses_follow():
    with make_context():
        module = ir.Module.parse(LLVM_FUNCS)
        assert dedupe_kernels(module) == 1
        assert module.operation.verify()
        text = str(module)
    assert set(defined_functions(module)) == {"body_a", "body_c", "exported_copy", "main"}
    assert "@body_b" not in text  # the call and the function pointer both name @body_a
    assert text.count("llvm.call @body_a(") == 2
    assert "llvm.mlir.addressof @body_a" in text
    assert "llvm.call @body_c(" in text  # different code stays apart


def test_merging_again_finds_nothing():
    with make_context():
        module = ir.Module.parse(LLVM_FUNCS)
        dedupe_kernels(module)
        assert dedupe_kernels(module) == 0


def test_the_entry_is_folded_into_its_c_interface():
    module = lowered(many_arguments(3))
    functions = defined_functions(module)
    entry, wrapper = functions["main"], functions["_mlir_ciface_main"]
    assert str(entry.attributes["linkage"]) == "#llvm.linkage<internal>"
    assert "always_inline" in entry.attributes
    # The wrapper is what the runtime calls: it stays visible, and is not inlined anywhere.
    assert str(wrapper.attributes["linkage"]) == "#llvm.linkage<external>"
    assert "always_inline" not in wrapper.attributes


def test_without_a_c_interface_nothing_changes():
    with make_context():
        module = ir.Module.parse(LLVM_FUNCS)
        Pipeline(["kiln-inline-entry-into-c-interface"]).run(module, filename="t.mlir")
        assert "always_inline" not in str(module)


@pytest.mark.parametrize("count", [1, 300])
def test_many_arguments_compile_and_run(count):
    """300 arguments of 64 floats (too much work for the small-program path: LLVM at O2) pass
    1,500 descriptor fields. Before the entry was folded into its wrapper, the call passing
    them cost LLVM's instruction selection time quadratic in their number: this program's
    compile took 1.72 s of CPU instead of 0.96 (2026-11-27), ResNet50's 58 s instead of 6.7."""
    rng = np.random.default_rng(count)
    args = [rng.standard_normal(64).astype(np.float32) for _ in range(count)]
    exe = kiln.compile(many_arguments(count, 64))
    out = only_result(exe(*args))
    np.testing.assert_allclose(out, np.sum(np.asarray(args, np.float64), axis=0),
                               rtol=1e-5, atol=1e-4)
