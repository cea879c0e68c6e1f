"""Compile-time savings that must not change what is compiled: pass managers reused within one
context (pipeline.py), small programs compiled at a lower LLVM level and tiny ones by LLVM's
quick code generation (targets/small_programs.py, quick_codegen.py), compile workers'
rehearsals (driver/rehearsal.py), and LLVM's own options (targets/llvm_options.py)."""
from __future__ import annotations

import numpy as np
import pytest
from torch_mlir import ir

import kiln
from kiln.context import make_context
from kiln.driver import cache
from kiln.driver.source_import import ImportRequest
from kiln.lowering import Pipeline
from kiln.pipeline import _reused, reuse_pass_managers
from kiln.targets import llvm_options
from kiln.targets.cpu import CpuTarget
from kiln.targets import quick_codegen
from kiln.targets.small_programs import (OPT_LEVEL_ATTR, QUICK_CODEGEN_ATTR, SMALL_OPT_LEVEL,
                                         TINY_WORK, is_small, known_work)

ADD = """func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""

BIG_ADD = ADD.replace("4xf32", "1024x1024xf32")

MATMUL = """func.func @main(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}
"""

WHILE = """func.func @main(%n: tensor<i32>) -> tensor<i32> {
  %one = stablehlo.constant dense<1> : tensor<i32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r = stablehlo.while(%i = %zero) : tensor<i32>
    cond {
      %c = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %next = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %next : tensor<i32>
    }
  return %r : tensor<i32>
}
"""

DYNAMIC = ADD.replace("4xf32", "?xf32")


def parse(text: str, context: ir.Context | None = None) -> ir.Module:
    with context or make_context():
        return ir.Module.parse(text)


# -- small programs --------------------------------------------------------------------------------
def test_small_programs_are_those_with_little_work_known_at_compile_time():
    assert is_small(parse(ADD))
    assert not is_small(parse(BIG_ADD))            # a million elements
    assert not is_small(parse(MATMUL))             # 64^3 multiply-adds
    assert is_small(parse(MATMUL), limit=64 ** 3 + 64 ** 2)  # ... counted as such (and the return)
    assert not is_small(parse(WHILE))              # a trip count the data decides
    assert not is_small(parse(DYNAMIC))            # sizes known only at run time


def test_a_small_program_compiles_at_the_small_level_unless_the_option_says():
    module = parse(ADD)
    target = CpuTarget()
    target.after_optimize(module)
    assert target.opt_level(module) == SMALL_OPT_LEVEL
    assert OPT_LEVEL_ATTR in module.operation.attributes
    explicit = CpuTarget(opt_level=2)
    other = parse(ADD)
    explicit.after_optimize(other)
    assert explicit.opt_level(other) == 2 and OPT_LEVEL_ATTR not in other.operation.attributes
    big = parse(BIG_ADD)
    target.after_optimize(big)
    assert target.opt_level(big) == 2


def test_tiny_programs_also_get_quick_code_generation(monkeypatch):
    tiny, small = parse(ADD), parse(ADD.replace("4xf32", "2048xf32"))
    assert known_work(tiny) <= TINY_WORK < known_work(small)
    target = CpuTarget()
    for module in (tiny, small):
        target.after_optimize(module)
        assert target.opt_level(module) == SMALL_OPT_LEVEL
    assert QUICK_CODEGEN_ATTR in tiny.operation.attributes and target.quick_codegen(tiny)
    assert QUICK_CODEGEN_ATTR not in small.operation.attributes and not target.quick_codegen(small)
    # opt_level=0 is LLVM's O0 throughout, as clang's -O0; any other level never is.
    assert CpuTarget(opt_level=0).quick_codegen(small)
    assert not CpuTarget(opt_level=1).quick_codegen(tiny)
    monkeypatch.setenv("KILN_QUICK_CODEGEN", "0")  # to compare: the full code generator
    assert not target.quick_codegen(tiny)
    request = ImportRequest(ADD, "add.mlir", None, "cpu", {})
    without = cache.source_key(request)
    monkeypatch.delenv("KILN_QUICK_CODEGEN")
    assert cache.source_key(request) != without  # ... and cached apart


def test_the_packed_entry_point_passes_each_argument_of_the_c_interface():
    text = ("define void @_mlir_ciface_main(ptr %0, ptr noalias %1, ptr %2) {\n  ret void\n}\n")
    wrapper = quick_codegen._packed_entry(text, "main")
    assert "define void @_mlir__mlir_ciface_main(ptr %args)" in wrapper
    assert "call void @_mlir_ciface_main(ptr %arg0, ptr %arg1, ptr %arg2)" in wrapper
    with pytest.raises(kiln.KilnError, match="no C interface for @other"):
        quick_codegen._packed_entry(text, "other")


@pytest.mark.parametrize("options", [{}, {"opt_level": 0}, {"opt_level": 2}])
def test_small_programs_compute_the_same_at_either_level(options):
    a = np.array([1.5, -2.0, 3.25, 0.0], np.float32)
    b = np.array([0.5, 4.0, -1.25, 7.0], np.float32)
    exe = kiln.compile(ADD, **options)
    np.testing.assert_array_equal(exe(a, b)[0], a + b)
    text = """func.func @main(%a: tensor<3x4xf32>, %b: tensor<4x3xf32>) -> tensor<3x3xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<3x4xf32>, tensor<4x3xf32>) -> tensor<3x3xf32>
  %1 = stablehlo.exponential %0 : tensor<3x3xf32>
  return %1 : tensor<3x3xf32>
}
"""
    x = (np.arange(12, dtype=np.float32) / 12).reshape(3, 4)
    exe = kiln.compile(text, **options)
    np.testing.assert_allclose(exe(x, x.T.copy())[0], np.exp(x @ x.T), rtol=1e-5)


# -- pass managers reused --------------------------------------------------------------------------
def test_pass_managers_are_reused_within_one_context_and_see_each_run_s_module():
    context = make_context()
    seen = []

    def record(module: ir.Module) -> None:
        seen.append(module)

    pipeline = Pipeline([record, "canonicalize"])
    reuse_pass_managers(context)
    try:
        first, second = parse(ADD, context), parse(ADD, context)
        pipeline.run(first)
        assert len(_reused.idle) == 1
        kept = next(iter(_reused.idle.values()))
        pipeline.run(second)
        assert next(iter(_reused.idle.values()))[0] is kept[0]  # the same manager ran again
        assert seen == [first, second]
        assert kept[1].module is None  # the cache keeps no module alive
        # Another context's runs build their own.
        pipeline.run(parse(ADD))
        assert len(_reused.idle) == 1 and seen[-1] is not second
    finally:
        reuse_pass_managers(None)
    assert not _reused.idle


def test_a_pass_manager_whose_run_failed_is_not_kept():
    context = make_context()

    def fail(module: ir.Module) -> None:
        raise ValueError("this pass fails")

    reuse_pass_managers(context)
    try:
        with pytest.raises(ValueError, match="this pass fails"):
            Pipeline([fail, "canonicalize"]).run(parse(ADD, context))
        assert not _reused.idle
        # Observed runs (timing, dumps) build their own managers too.
        Pipeline(["canonicalize"]).trace(parse(ADD, context))
        assert not _reused.idle
    finally:
        reuse_pass_managers(None)


# -- LLVM's options --------------------------------------------------------------------------------
def test_llvm_options_come_from_the_environment_and_key_the_cache(monkeypatch):
    monkeypatch.setenv("KILN_LLVM_OPTIONS", "-vectorize-slp=false  -disable-lsr")
    assert llvm_options.requested()[-2:] == ("-vectorize-slp=false", "-disable-lsr")
    request = ImportRequest(ADD, "add.mlir", None, "cpu", {})
    with_options = cache.source_key(request)
    monkeypatch.delenv("KILN_LLVM_OPTIONS")
    assert cache.source_key(request) != with_options


def test_a_malformed_llvm_option_is_a_kiln_error():
    with pytest.raises(kiln.KilnError, match="'vectorize' is not an LLVM option"):
        llvm_options._parse(("vectorize",))


# -- Kiln's build id, remembered ------------------------------------------------------------------
def test_the_build_digest_is_remembered_under_the_files_fingerprint(monkeypatch, tmp_path):
    from kiln.driver import artifact
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KILN_CACHE", raising=False)
    files = artifact._build_files()
    assert any(name.endswith("artifact.py") for name, _ in files)
    digest = artifact._digest_files(files)
    assert artifact.kiln_build().endswith("+" + digest)  # the same digest, remembered or not
    fingerprint = artifact._fingerprint(files)
    assert artifact._remembered_build(fingerprint) is None
    artifact._remember_build(fingerprint, "0123456789abcdef")
    assert artifact._remembered_build(fingerprint) == "0123456789abcdef"
    # A file that changes (its size or time) changes the fingerprint: computed afresh.
    extra = tmp_path / "module.py"
    extra.write_text("x = 1\n")
    changed = artifact._fingerprint(files + [("module.py", extra)])
    assert changed != fingerprint and artifact._remembered_build(changed) is None
    monkeypatch.setenv("KILN_CACHE", "0")  # the cache off: nothing read or written
    assert artifact._remembered_build(fingerprint) is None


# -- passes that apply to certain ops ---------------------------------------------------------------
def _recorder(log: list, label: str, applies_to=None):
    from kiln.pipeline import PyPass
    return PyPass(label, lambda module: log.append(label),
                  applies_to=None if applies_to is None else frozenset(applies_to))


def _to_subtract(module: ir.Module) -> None:
    """Rewrite the one stablehlo.add into a stablehlo.subtract."""
    from kiln.lowering.ir_util import walk
    add = next(op for op in walk(module.operation) if op.name == "stablehlo.add")
    with ir.InsertionPoint(add), add.location:
        sub = ir.Operation.create("stablehlo.subtract", results=[add.results[0].type],
                                  operands=list(add.operands))
    add.results[0].replace_all_uses_with(sub.results[0])
    add.erase()


def test_a_pass_runs_only_on_a_module_with_the_ops_it_applies_to():
    log: list = []
    Pipeline([_recorder(log, "sorts", {"stablehlo.sort"}),
              _recorder(log, "adds", {"stablehlo.add"}),
              _recorder(log, "any-stablehlo", {"stablehlo."}),
              _recorder(log, "subtracts", {"stablehlo.subtract"}),
              _to_subtract,  # ... after which the op names are collected again
              _recorder(log, "subtracts-after", {"stablehlo.subtract"}),
              _recorder(log, "adds-after", {"stablehlo.add"}),
              _recorder(log, "always")]).run(parse(ADD))
    assert log == ["adds", "any-stablehlo", "subtracts-after", "always"]


def test_op_names_are_collected_again_after_upstream_passes():
    unused = ADD + """func.func private @unused(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""
    log: list = []
    # symbol-dce erases the unused function: the pass on multiplies after it has nothing to do.
    Pipeline([_recorder(log, "before", {"stablehlo.multiply"}), "symbol-dce",
              _recorder(log, "after", {"stablehlo.multiply"})]).run(parse(unused))
    assert log == ["before"]


def test_pattern_passes_apply_to_their_root_ops():
    from kiln.lowering.registry import get
    assert get("kiln-lower-sort").applies_to == {"stablehlo.sort"}
    assert get("kiln-lower-linalg-ops").applies_to == {"stablehlo.triangular_solve",
                                                      "stablehlo.cholesky"}
    assert get("kiln-fuse-shared-elementwise").applies_to is None  # always runs


# -- compile workers' rehearsals -------------------------------------------------------------------
def test_both_rehearsals_compile(tmp_path):
    from kiln.driver import rehearsal
    from kiln.driver.source_import import import_and_compile
    for source, name in ((rehearsal.MLIR_TEXT, "text"), (rehearsal.JAX_EXPORT, "export")):
        told = []
        import_and_compile(ImportRequest(source, name, None, "cpu", {}), make_context(),
                           told.append)
        assert told[-1][0] == "ok" and told[-1][1], (name, told[-1])


def test_requests_that_come_while_a_child_rehearses_are_served():
    # Back to back, each request finds the child forked after the previous answer still
    # rehearsing (driver/worker.py): it finishes a stage, then takes the request.
    x = np.arange(6, dtype=np.float32)
    for scale in range(1, 9):
        text = ADD.replace("4xf32", "6xf32").replace("stablehlo.add %a, %b",
                                                     "stablehlo.multiply %a, %b")
        exe = kiln.compile(text + f"// {scale}\n")  # distinct sources: no cache hits
        np.testing.assert_array_equal(exe(x, x + scale)[0], x * (x + scale))


def test_ir_llvmlite_cannot_read_is_compiled_by_execution_engine():
    # MLIR's newer LLVM prints a NaN with a payload as `+nan(0x3F)`, which llvmlite's LLVM
    # cannot parse: the tiny program is compiled the other way, with the same bits.
    import ml_dtypes
    text = """func.func @main(%a: tensor<2xbf16>) -> tensor<4xbf16> {
  %c = stablehlo.constant dense<[0x7FFF, 0x3F80]> : tensor<2xbf16>
  %0 = stablehlo.concatenate %c, %a, dim = 0 : (tensor<2xbf16>, tensor<2xbf16>) -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}"""
    lowered = parse(kiln.compile(text).ir("lower"))
    assert quick_codegen.compile_object(lowered, "main") is None
    a = np.array([1.5, -2.0], ml_dtypes.bfloat16)
    out = np.asarray(kiln.compile(text)(a)[0]).view(np.uint16)
    assert [hex(x) for x in out] == ["0x7fff", "0x3f80", "0x3fc0", "0xc000"]
