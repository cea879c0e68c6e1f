"""Custom calls with C targets (seed 004): the seed's examples compiled with gcc against the
installed header, registered from their shared library, run inside StableHLO and HLO programs."""
from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln.errors import CustomCallError, KilnError
from kiln.native import include_dir
from kiln.runtime.custom_call import REGISTRY

SRC = Path(__file__).parent / "custom_call_src"


def build(name: str, out_dir) -> str:
    lib = out_dir / f"lib{name}.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", f"-I{include_dir()}",
                    str(SRC / f"{name}.c"), "-o", str(lib)], check=True)
    return str(lib)


@pytest.fixture(scope="module")
def seed_lib(tmp_path_factory):
    path = build("seed_example", tmp_path_factory.mktemp("cc"))
    names = kiln.register_custom_call_library(path)
    assert names == ["do_custom_call", "do_custom_call_status", "scale_by_opaque"]
    return path


@pytest.fixture(scope="module")
def tuple_lib(tmp_path_factory):
    path = build("tuple_example", tmp_path_factory.mktemp("cc"))
    assert kiln.register_custom_call_library(path) == ["tuple_call"]
    return path


SEED = """
func.func @main(%b: tensor<128xf32>, %c: tensor<2048xf32>) -> tensor<2048xf32> {{
  %0 = stablehlo.custom_call @{target}(%b, %c) {attrs} : (tensor<128xf32>, tensor<2048xf32>) -> tensor<2048xf32>
  return %0 : tensor<2048xf32>
}}"""


def seed_inputs(rng):
    return rng.standard_normal(128).astype(np.float32), rng.random(2048).astype(np.float32)


def seed_expected(b, c):
    return b[np.arange(2048) % 128] + c


def test_seed_example_stablehlo(seed_lib, rng):
    exe = kiln.compile(SEED.format(target="do_custom_call", attrs=""))
    b, c = seed_inputs(rng)
    (a,) = exe(b, c)
    np.testing.assert_array_equal(a, seed_expected(b, c))


SEED_HLO = """HloModule do_it

ENTRY main {{
  p0 = f32[128] parameter(0)
  p1 = f32[2048] parameter(1)
  ROOT cc = f32[2048] custom-call(p0, p1), custom_call_target="{target}"{attrs}
}}
"""


def test_seed_example_hlo_text(seed_lib, rng):
    b, c = seed_inputs(rng)
    (a,) = kiln.compile(SEED_HLO.format(target="do_custom_call", attrs=""))(b, c)
    np.testing.assert_array_equal(a, seed_expected(b, c))


def test_status_returning_hlo_text(seed_lib, rng):
    exe = kiln.compile(SEED_HLO.format(target="do_custom_call_status",
                                       attrs=", api_version=API_VERSION_STATUS_RETURNING"))
    b, c = seed_inputs(rng)
    np.testing.assert_array_equal(exe(b, c)[0], seed_expected(b, c))
    c[7] = -np.inf
    with pytest.raises(CustomCallError, match="An error occurred: negative input"):
        exe(b, c)


def test_operands_computed_in_program(seed_lib, rng):
    # Operands produced by earlier ops and a result consumed by later ones: buffers must stay
    # alive across the call and the call must see the computed values.
    src = """
func.func @main(%b: tensor<128xf32>, %c: tensor<2048xf32>) -> tensor<2048xf32> {
  %b2 = stablehlo.add %b, %b : tensor<128xf32>
  %c2 = stablehlo.multiply %c, %c : tensor<2048xf32>
  %0 = stablehlo.custom_call @do_custom_call(%b2, %c2) : (tensor<128xf32>, tensor<2048xf32>) -> tensor<2048xf32>
  %1 = stablehlo.subtract %0, %c2 : tensor<2048xf32>
  return %1 : tensor<2048xf32>
}"""
    b, c = seed_inputs(rng)
    (a,) = kiln.compile(src)(b, c)
    np.testing.assert_array_equal(a, ((2 * b)[np.arange(2048) % 128] + c * c) - c * c)


def test_status_returning_success_and_failure(seed_lib, rng):
    exe = kiln.compile(SEED.format(target="do_custom_call_status", attrs="{api_version = 2 : i32}"))
    b, c = seed_inputs(rng)
    (a,) = exe(b, c)
    np.testing.assert_array_equal(a, seed_expected(b, c))
    c[1000] = -1.0  # the target's bad condition
    with pytest.raises(CustomCallError, match="An error occurred: negative input"):
        exe(b, c)
    # The executable is still usable after a failure.
    c[1000] = 0.5
    np.testing.assert_array_equal(exe(b, c)[0], seed_expected(b, c))


def test_failure_stops_the_computation(seed_lib, rng):
    # A Python target after the failing C call counts how often it runs: never.
    ran = []

    def after(results, operands, *, attributes, backend_config):
        ran.append(1)
        results[0][...] = operands[0]

    kiln.register_custom_call("count_after_failure", after)
    src = """
func.func @main(%b: tensor<128xf32>, %c: tensor<2048xf32>) -> tensor<2048xf32> {
  %0 = stablehlo.custom_call @do_custom_call_status(%b, %c) {api_version = 2 : i32} : (tensor<128xf32>, tensor<2048xf32>) -> tensor<2048xf32>
  %1 = stablehlo.custom_call @count_after_failure(%0) : (tensor<2048xf32>) -> tensor<2048xf32>
  return %1 : tensor<2048xf32>
}"""
    exe = kiln.compile(src)
    b, c = seed_inputs(rng)
    np.testing.assert_array_equal(exe(b, c)[0], seed_expected(b, c))
    assert len(ran) == 1
    c[0] = -3.0
    with pytest.raises(CustomCallError, match="negative input"):
        exe(b, c)
    assert len(ran) == 1


def test_opaque_unified_api(seed_lib, rng):
    src = """
func.func @main(%x: tensor<16xf32>) -> tensor<16xf32> {{
  %0 = stablehlo.custom_call @scale_by_opaque(%x) {{api_version = 3 : i32, backend_config = "{cfg}"}} : (tensor<16xf32>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}}"""
    x = rng.standard_normal(16).astype(np.float32)
    np.testing.assert_array_equal(kiln.compile(src.format(cfg="k=3"))(x)[0], x * 3)
    with pytest.raises(CustomCallError, match="opaque must be k=<digit>"):
        kiln.compile(src.format(cfg="bad"))(x)


TUPLE_T = "tuple<tensor<32xf32>, tuple<tensor<64xf32>, tensor<128xf32>>, tensor<256xf32>>"


def tuple_leaves():
    return [np.arange(n, dtype=np.float32) + k * 1000 for k, n in enumerate([32, 64, 128, 256])]


def tuple_expected(leaves):
    j = np.arange(512)
    scratch = 2 * leaves[3][np.arange(1024) % 256]
    return leaves[0][j % 32] + leaves[1][j % 64] + leaves[2][j % 128] + scratch[j] + scratch[j + 512]


@pytest.mark.parametrize("results", ["tuple", "multiple"])
def test_seed_tuple_example(tuple_lib, results):
    # The C code checks the nested pointer layout of `in` and `out` (custom_call_src/tuple_example.c).
    if results == "tuple":
        rtype = "tuple<tensor<512xf32>, tensor<1024xf32>>"
        first = f"%o = stablehlo.get_tuple_element %r[0] : ({rtype}) -> tensor<512xf32>"
        call = f"%r = stablehlo.custom_call @tuple_call(%p0) {{api_version = 2 : i32}} : ({TUPLE_T}) -> {rtype}"
    else:
        first = "%o = stablehlo.add %r#0, %r#0 : tensor<512xf32>"
        call = (f"%r:2 = stablehlo.custom_call @tuple_call(%p0) {{api_version = 2 : i32}} : ({TUPLE_T}) "
                "-> (tensor<512xf32>, tensor<1024xf32>)")
    src = f"""
func.func @main(%a: tensor<32xf32>, %b: tensor<64xf32>, %c: tensor<128xf32>, %d: tensor<256xf32>) -> tensor<512xf32> {{
  %inner = stablehlo.tuple %b, %c : tuple<tensor<64xf32>, tensor<128xf32>>
  %p0 = stablehlo.tuple %a, %inner, %d : {TUPLE_T}
  {call}
  {first}
  return %o : tensor<512xf32>
}}"""
    exe = kiln.compile(src)
    leaves = tuple_leaves()
    (r,) = exe(*leaves)
    expected = tuple_expected(leaves)
    np.testing.assert_array_equal(r, expected if results == "tuple" else expected * 2)
    # A wrong leaf in the wrong place is caught by the C code's layout check.
    with pytest.raises(CustomCallError, match="leaf 2: element 0 is 1000, expected 2000"):
        exe(leaves[0], leaves[1], leaves[1].repeat(2), leaves[3])


def test_ctypes_function_pointer(seed_lib, rng):
    fn = ctypes.CDLL(seed_lib).do_custom_call
    kiln.register_custom_call("seed_via_ctypes", fn, api_version=1)
    b, c = seed_inputs(rng)
    (a,) = kiln.compile(SEED.format(target="seed_via_ctypes", attrs=""))(b, c)
    np.testing.assert_array_equal(a, seed_expected(b, c))
    # api_version fixed at registration must match the call site's.
    with pytest.raises(KilnError, match="registered for api_version 1"):
        kiln.compile(SEED.format(target="seed_via_ctypes", attrs="{api_version = 2 : i32}"))


def test_ctypes_callback_as_c_target():
    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))

    @proto
    def negate(out, ins):
        x = (ctypes.c_int32 * 5).from_address(ins[0])
        y = (ctypes.c_int32 * 5).from_address(out)
        for i in range(5):
            y[i] = -x[i]

    kiln.register_custom_call("negate_cfunc", negate)
    src = """
func.func @main(%x: tensor<5xi32>) -> tensor<5xi32> {
  %0 = stablehlo.custom_call @negate_cfunc(%x) : (tensor<5xi32>) -> tensor<5xi32>
  return %0 : tensor<5xi32>
}"""
    x = np.array([1, -2, 0, 2**31 - 1, -2**31], np.int32)
    np.testing.assert_array_equal(kiln.compile(src)(x)[0], -x)


def test_c_target_in_long_loop_keeps_stack(seed_lib, rng):
    # 200,000 calls inside a stablehlo.while: the per-call pointer array lives in an
    # alloca_scope, so the stack does not grow per iteration (it would overflow otherwise).
    src = """
func.func @main(%b: tensor<128xf32>, %c: tensor<2048xf32>) -> tensor<2048xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %n = stablehlo.constant dense<200000> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %zero = stablehlo.constant dense<0.0> : tensor<128xf32>
  %r:2 = stablehlo.while(%i = %c0, %v = %c) : tensor<i32>, tensor<2048xf32>
   cond {
    %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %w = stablehlo.custom_call @do_custom_call(%zero, %v) : (tensor<128xf32>, tensor<2048xf32>) -> tensor<2048xf32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %w : tensor<i32>, tensor<2048xf32>
  }
  %s = stablehlo.custom_call @do_custom_call(%b, %r#1) : (tensor<128xf32>, tensor<2048xf32>) -> tensor<2048xf32>
  return %s : tensor<2048xf32>
}"""
    b, c = seed_inputs(rng)
    (a,) = kiln.compile(src)(b, c)
    np.testing.assert_array_equal(a, seed_expected(b, c))


def test_unknown_target_is_a_compile_error(seed_lib):
    with pytest.raises(KilnError) as info:
        kiln.compile(SEED.format(target="no_such_target", attrs=""), filename="prog.mlir")
    text = str(info.value)
    assert "unknown custom-call target 'no_such_target'" in text
    assert "do_custom_call" in text and "prog.mlir:3" in text


def test_cuda_only_target_is_rejected_on_cpu():
    kiln.register_custom_call("gpu_only_kernel", 0x1234, platform="CUDA")
    assert REGISTRY.lookup("gpu_only_kernel", "gpu").address == 0x1234
    with pytest.raises(KilnError, match="registered for CUDA, not for the CPU"):
        kiln.compile(SEED.format(target="gpu_only_kernel", attrs=""))


def test_typed_ffi_needs_a_python_target(seed_lib):
    with pytest.raises(KilnError, match="typed FFI"):
        kiln.compile(SEED.format(target="do_custom_call", attrs="{api_version = 4 : i32}"))


def test_registration_errors(tmp_path):
    with pytest.raises(KilnError, match="does not exist"):
        kiln.register_custom_call_library(tmp_path / "missing.so")
    (tmp_path / "bad.so").write_text("not a library")
    with pytest.raises(KilnError, match="cannot load"):
        kiln.register_custom_call_library(tmp_path / "bad.so")
    with pytest.raises(KilnError, match="platform"):
        kiln.register_custom_call("x", lambda *a, **k: None, platform="tpu")
    with pytest.raises(KilnError, match="api_version"):
        kiln.register_custom_call("x", lambda *a, **k: None, api_version=7)
    with pytest.raises(KilnError, match="Python callable"):
        kiln.register_custom_call("x", "not callable")


def test_flat_operands_with_kiln_tree_attributes(tuple_lib):
    # Front ends that flatten tuples (the HLO importer) keep the structure in kiln.operand_tree
    # / kiln.result_tree: the target must still see the seed's nested pointer arrays.
    src = """
func.func @main(%a: tensor<32xf32>, %b: tensor<64xf32>, %c: tensor<128xf32>, %d: tensor<256xf32>) -> tensor<512xf32> {
  %r:2 = stablehlo.custom_call @tuple_call(%a, %b, %c, %d) {api_version = 2 : i32,
      kiln.operand_tree = array<i32: 3, -1, 2, -1, -1, -1>, kiln.result_tree = array<i32: 2, -1, -1>}
    : (tensor<32xf32>, tensor<64xf32>, tensor<128xf32>, tensor<256xf32>) -> (tensor<512xf32>, tensor<1024xf32>)
  return %r#0 : tensor<512xf32>
}"""
    leaves = tuple_leaves()
    np.testing.assert_array_equal(kiln.compile(src)(*leaves)[0], tuple_expected(leaves))
    bad = src.replace("3, -1, 2, -1, -1, -1", "3, -1, -1, -1")
    with pytest.raises(KilnError, match="kiln.operand_tree does not match"):
        kiln.compile(bad)


def test_dynamic_result_is_a_clear_error(seed_lib):
    src = """
func.func @main(%x: tensor<?xf32>) -> tensor<i32> {
  %0 = stablehlo.custom_call @do_custom_call(%x) : (tensor<?xf32>) -> tensor<?xf32>
  %n = stablehlo.get_dimension_size %0, dim = 0 : (tensor<?xf32>) -> tensor<i32>
  return %n : tensor<i32>
}"""
    # A custom call's result shapes cannot be inferred: they must be static.
    with pytest.raises(KilnError, match="result 0 of custom call 'do_custom_call' has dynamic type"):
        kiln.compile(src)(np.zeros(3, np.float32))


def test_gpu_convention_registers_for_cuda(tmp_path):
    path = build("gpu_convention", tmp_path)
    assert kiln.register_custom_call_library(path) == ["gpu_do_custom_call"]
    target = REGISTRY.lookup("gpu_do_custom_call", "CUDA")
    assert target is not None and target.address == ctypes.cast(
        ctypes.CDLL(path).gpu_do_custom_call, ctypes.c_void_p).value
    assert REGISTRY.lookup("gpu_do_custom_call", "cpu") is None
    with pytest.raises(KilnError, match="registered for CUDA, not for the CPU"):
        kiln.compile(SEED.format(target="gpu_do_custom_call", attrs=""))


def test_seed_tuple_example_hlo_text(tuple_lib):
    # The seed's tuple example written as HLO: the importer flattens the tuples and records
    # their nesting, so the C code still sees nested pointer arrays and a scratch result.
    hlo = """HloModule tuple_example

ENTRY main {
  a = f32[32] parameter(0)
  b = f32[64] parameter(1)
  c = f32[128] parameter(2)
  d = f32[256] parameter(3)
  inner = (f32[64], f32[128]) tuple(b, c)
  p0 = (f32[32], (f32[64], f32[128]), f32[256]) tuple(a, inner, d)
  r = (f32[512], f32[1024]) custom-call(p0), custom_call_target="tuple_call", api_version=API_VERSION_STATUS_RETURNING
  ROOT o = f32[512] get-tuple-element(r), index=0
}
"""
    leaves = tuple_leaves()
    (r,) = kiln.compile(hlo)(*leaves)
    np.testing.assert_array_equal(r, tuple_expected(leaves))
