"""XLA's typed FFI in Kiln's runtime (runtime/kiln_ffi.c): handlers written in C++ against
jaxlib's unmodified headers (tests/py/custom_call_src/ffi_*.cc, built here with g++), registered
with JAX and with Kiln, called through `jax.ffi.ffi_call` in exported programs (serialized and
as StableHLO text), run by Kiln and compared with JAX."""
from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln.errors import CustomCallError, KilnError

jax = pytest.importorskip("jax")
pytest.importorskip("flatbuffers", reason="jax's Exported.serialize() needs the flatbuffers package")
import jax.numpy as jnp  # noqa: E402
from jax import export  # noqa: E402

SRC = Path(__file__).parent / "custom_call_src"
TARGETS = {"ffi_test.rms_norm": "RmsNorm", "ffi_test.rms_norm_fwd": "RmsNormFwd",
           "ffi_test.attrs": "Attrs", "ffi_test.fail": "Fail", "ffi_test.describe": "Describe",
           "ffi_test.axpy": "Axpy", "ffi_test.context": "Context", "ffi_test.pool": "Pool",
           "ffi_test.stream": "Stream", "ffi_test.token": "TokenThrough"}


def build(name: str, out_dir: Path) -> Path:
    lib = out_dir / f"lib{name}.so"
    subprocess.run(["g++", "-std=c++17", "-shared", "-fPIC", "-O1", "-w",
                    f"-I{jax.ffi.include_dir()}", str(SRC / f"{name}.cc"), "-o", str(lib)],
                   check=True)
    return lib


@pytest.fixture(scope="module")
def handlers(tmp_path_factory):
    path = build("ffi_handlers", tmp_path_factory.mktemp("ffi"))
    lib = ctypes.cdll.LoadLibrary(str(path))
    for name, symbol in TARGETS.items():
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu")
        kiln.register_custom_call(name, jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu",
                                  api_version=4)
    return path


def exported(fn, *args):
    checks = [export.DisabledSafetyCheck.custom_call(n) for n in TARGETS]
    return export.export(jax.jit(fn), disabled_checks=checks)(*args)


def both(fn, *args, text=True):
    """(JAX's result, Kiln's result of the serialized export, Kiln's of its StableHLO text)."""
    exp = exported(fn, *args)
    return (jax.jit(fn)(*args), kiln.compile(bytes(exp.serialize()))(*args),
            kiln.compile(exp.mlir_module())(*args) if text else None)


def rms_norm(x, eps=1e-5):
    return jax.ffi.ffi_call("ffi_test.rms_norm", jax.ShapeDtypeStruct(x.shape, x.dtype))(
        x, eps=np.float32(eps))


def test_rms_norm_matches_jax(handlers, rng):
    x = rng.standard_normal((4, 3, 8)).astype(np.float32)
    want, from_export, from_text = both(rms_norm, x)
    np.testing.assert_array_equal(np.asarray(from_export), np.asarray(want))
    # StableHLO text keeps JAX's calling convention only partly: its results come as a list.
    np.testing.assert_array_equal(np.asarray(from_text[0]), np.asarray(want))
    np.testing.assert_allclose(np.asarray(want), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5),
                               rtol=1e-5)


def test_several_results(handlers, rng):
    x = rng.standard_normal((5, 6)).astype(np.float32)

    def fwd(x):
        return jax.ffi.ffi_call("ffi_test.rms_norm_fwd",
                                (jax.ShapeDtypeStruct(x.shape, x.dtype),
                                 jax.ShapeDtypeStruct(x.shape[:-1], x.dtype)))(x, eps=np.float32(1e-5))
    (want_y, want_res), (y, res), _ = both(fwd, x)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(want_y))
    np.testing.assert_array_equal(np.asarray(res), np.asarray(want_res))


ATTRS = dict(b=True, i8=np.int8(-3), i16=np.int16(300), i32=np.int32(-70000),
             i64=np.int64(1 << 40), u8=np.uint8(200), u16=np.uint16(60000),
             u32=np.uint32(4000000000), u64=np.uint64(1 << 62), f32=np.float32(1.1),
             f64=np.float64(2.2), name="héllo", a32=np.array([1, -2], np.int32),
             a64=np.array([3, 4, 5], np.int64), af32=np.array([0.1], np.float32),
             af64=np.array([0.25, -1.0]), opts={"depth": np.int32(7), "mode": "fast"},
             point={"x": np.int64(9), "y": np.float64(0.125)})


def test_attributes_of_each_type(handlers):
    with jax.enable_x64(True):
        def f64(x):
            return jax.ffi.ffi_call("ffi_test.attrs", jax.ShapeDtypeStruct((40,), jnp.float64))(**ATTRS)
        want, got, _ = both(f64, np.float32(0), text=False)
    want = np.asarray(want)
    np.testing.assert_array_equal(got, want)
    # Each value arrived with its own type: f32 1.1 is not the f64 1.1.
    assert want[9] == np.float64(np.float32(1.1)) and want[10] == 2.2
    assert want[8] == float(1 << 62) and want[3] == -70000 and want[0] == 1


def test_attributes_with_a_wrong_type_get_the_handlers_error(handlers):
    text = """
func.func @main() -> tensor<f32> {
  %0 = stablehlo.custom_call @ffi_test.rms_norm_fwd() {api_version = 4 : i32,
    backend_config = {eps = 1.0e-05 : f64}} : () -> tensor<f32>
  return %0 : tensor<f32>
}"""
    with pytest.raises(CustomCallError, match="(?s)ffi_test.rms_norm_fwd.*INVALID_ARGUMENT.*"
                                              "Wrong number of arguments"):
        kiln.compile(text)()
    wrong_type = text.replace("rms_norm_fwd() {", "rms_norm(%x) {").replace(
        "@main()", "@main(%x: tensor<3xf32>)").replace("() -> tensor<f32>", "(tensor<3xf32>) -> tensor<3xf32>").replace(
        "-> tensor<f32> {", "-> tensor<3xf32> {").replace("return %0 : tensor<f32>", "return %0 : tensor<3xf32>")
    with pytest.raises(CustomCallError, match="(?s)Wrong scalar data type"):
        kiln.compile(wrong_type)(np.ones(3, np.float32))


def test_mismatched_signature_is_a_clean_error(handlers):
    def wrong_dtype(x):
        return jax.ffi.ffi_call("ffi_test.rms_norm", jax.ShapeDtypeStruct(x.shape, x.dtype))(
            x, eps=np.float32(1e-5))
    exp = exported(wrong_dtype, np.ones((2, 2), np.int32))
    with pytest.raises(CustomCallError, match=r"(?s)ffi_test.rms_norm.*Wrong buffer dtype"):
        kiln.compile(bytes(exp.serialize()))(np.ones((2, 2), np.int32))

    def missing_attribute(x):
        return jax.ffi.ffi_call("ffi_test.rms_norm", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    exp = exported(missing_attribute, np.ones((2, 2), np.float32))
    with pytest.raises(CustomCallError, match="Wrong number of attributes"):
        kiln.compile(bytes(exp.serialize()))(np.ones((2, 2), np.float32))


def test_failing_handler_reaches_the_caller(handlers):
    def f(x):
        return jax.ffi.ffi_call("ffi_test.fail", jax.ShapeDtypeStruct(x.shape, x.dtype))(
            x, reason="inputs must be positive")
    x = np.array([-1.0, 2.0], np.float32)
    with pytest.raises(Exception, match="negative input: inputs must be positive"):
        jax.block_until_ready(jax.jit(f)(x))
    exe = kiln.compile(bytes(exported(f, x).serialize()))
    with pytest.raises(CustomCallError, match=r"custom call 'ffi_test.fail' failed "
                                              r"\(OUT_OF_RANGE\): negative input: inputs must be positive"):
        exe(x)
    np.testing.assert_array_equal(exe(np.array([1.0, 2.0], np.float32)), [1.0, 2.0])  # still usable


DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, jnp.bfloat16, np.float32, np.float64, np.complex64, np.complex128]
SHAPES = [(), (3,), (2, 3), (2, 1, 3), (1, 2, 2, 2)]


@pytest.mark.parametrize("shape", SHAPES)
def test_every_buffer_dtype_and_rank(handlers, shape, rng):
    with jax.enable_x64(True):
        for dtype in DTYPES:
            x = (rng.standard_normal(shape) * 10).astype(dtype)

            def f(x):
                return jax.ffi.ffi_call("ffi_test.describe",
                                        (jax.ShapeDtypeStruct(x.shape, x.dtype),
                                         jax.ShapeDtypeStruct((8,), jnp.int64)))(x)
            (want_copy, want_info), (copy, info), _ = both(f, x)
            np.testing.assert_array_equal(np.asarray(copy), np.asarray(want_copy), err_msg=str(dtype))
            np.testing.assert_array_equal(info, np.asarray(want_info), err_msg=str(dtype))
            assert info[1] == len(shape) and list(info[3:3 + len(shape)]) == list(shape)


def test_fixed_ranks_and_remaining_arguments(handlers, rng):
    x, y, z = (rng.standard_normal(4) for _ in range(3))
    with jax.enable_x64(True):
        def f(a, x, y, z):
            return jax.ffi.ffi_call("ffi_test.axpy", jax.ShapeDtypeStruct(x.shape, x.dtype))(a, x, y, z)
        want, got, _ = both(f, np.float64(2.0), x, y, z)
    np.testing.assert_array_equal(got, np.asarray(want))
    np.testing.assert_allclose(got, 2 * x + y + z)


def test_cpu_execution_context(handlers):
    def f(name):
        return lambda x: jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((2,), jnp.int64))()
    with jax.enable_x64(True):
        exe = kiln.compile(bytes(exported(f("ffi_test.context"), np.float32(0)).serialize()))
        np.testing.assert_array_equal(exe(np.float32(0)), [0, 1])  # device 0, a run id
        # Kiln has no thread pool: the headers run the task in the caller and count 0 threads.
        pool = f("ffi_test.pool")
        assert jax.jit(pool)(np.float32(0))[1] == 1
        exe = kiln.compile(bytes(exported(pool, np.float32(0)).serialize()))
        np.testing.assert_array_equal(exe(np.float32(0)), [0, 1])
        # On the CPU there is no stream either: a handler asking for one gets the API's error.
        with pytest.raises(CustomCallError, match="no stream"):
            kiln.compile(bytes(exported(f("ffi_test.stream"), np.float32(0)).serialize()))(np.float32(0))


COUNTER = """
func.func @main(%x: tensor<3xi64>) -> tensor<3xi64> {{
  %0 = stablehlo.custom_call @{name}(%x) {{api_version = 4 : i32,
    backend_config = {{start = 5 : i64}}}} : (tensor<3xi64>) -> tensor<3xi64>
  return %0 : tensor<3xi64>
}}"""


def test_stages_state_and_scratch(tmp_path):
    path = build("ffi_stateful", tmp_path)
    # The library registers its handler bundle and state types itself, through XLA_FFI_GetApi.
    assert kiln.register_custom_call_library(path) == ["kiln_test.counter"]
    x = np.array([1, 2, 3], np.int64)
    exe = kiln.compile(COUNTER.format(name="kiln_test.counter"))
    # Instantiate set the counter once for the site; prepare's state (start * 1000) is made
    # for each call; execute counts its calls and copies through scratch memory.
    np.testing.assert_array_equal(exe(x)[0], x + 5000 + 5 + 1)
    np.testing.assert_array_equal(exe(x)[0], x + 5000 + 5 + 2)
    # The same bundle as a dictionary of stages, registered by hand: a new site, a new count.
    lib = ctypes.CDLL(str(path))
    kiln.register_custom_call("kiln_test.counter2", {
        "instantiate": lib.CounterInstantiateHandler, "prepare": lib.CounterPrepareSymbol,
        "execute": jax.ffi.pycapsule(lib.CounterExecuteSymbol)})
    np.testing.assert_array_equal(kiln.compile(COUNTER.format(name="kiln_test.counter2"))(x)[0],
                                  x + 5000 + 5 + 1)
    # Saved and loaded, the program makes (and instantiates) its site again.
    exe.save(tmp_path / "counter.kx")
    np.testing.assert_array_equal(kiln.load_executable(tmp_path / "counter.kx")(x)[0], x + 5006)
    # Without the prepare stage, execute cannot find the state it reads.
    kiln.register_custom_call("kiln_test.counter3", {"instantiate": lib.CounterInstantiateHandler,
                                                     "execute": lib.CounterExecuteSymbol})
    with pytest.raises(CustomCallError, match="Failed to get state"):
        kiln.compile(COUNTER.format(name="kiln_test.counter3"))(x)


def test_library_handlers_by_symbol(handlers, rng):
    names = kiln.register_custom_call_library(handlers, symbols={"ffi_test.by_symbol": "RmsNorm"},
                                              api_version=4)
    assert names == ["ffi_test.by_symbol"]
    x = rng.standard_normal((2, 4)).astype(np.float32)
    text = """
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = stablehlo.custom_call @ffi_test.by_symbol(%x) {api_version = 4 : i32,
    backend_config = {eps = 1.0e-05 : f32}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}"""
    np.testing.assert_array_equal(kiln.compile(text)(x)[0], np.asarray(jax.jit(rms_norm)(x)))
    with pytest.raises(KilnError, match="no symbol 'NoSuchHandler'"):
        kiln.register_custom_call_library(handlers, symbols=["NoSuchHandler"])


def test_registration_errors():
    with pytest.raises(KilnError, match="no 'execute' handler"):
        kiln.register_custom_call("ffi_test.bad", {"prepare": 1234})
    with pytest.raises(KilnError, match="unknown FFI execution stage"):
        kiln.register_custom_call("ffi_test.bad", {"execute": 1234, "run": 1})
    with pytest.raises(KilnError, match="need api_version 4"):
        kiln.register_custom_call("ffi_test.bad", {"execute": 1234}, api_version=1)


def test_attributes_the_ffi_cannot_pass_are_a_compile_error(handlers):
    text = """
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.custom_call @ffi_test.rms_norm(%x) {api_version = 4 : i32,
    backend_config = {eps = [1.0 : f32, "x"]}} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}"""
    with pytest.raises(KilnError, match="attribute 'eps'.*mixed or non-numeric") as info:
        kiln.compile(text)
    assert info.value.hint


# Tokens threaded through typed-FFI calls: each call takes the previous call's token.
TOKEN_CALLS = """
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<6xi64>) {
  %t0 = stablehlo.after_all : !stablehlo.token
  %a:3 = stablehlo.custom_call @ffi_test.token(%t0, %x) {api_version = 4 : i32,
    backend_config = {}} : (!stablehlo.token, tensor<4xf32>)
      -> (!stablehlo.token, tensor<4xf32>, tensor<6xi64>)
  %b:3 = stablehlo.custom_call @ffi_test.token(%a#0, %a#1) {api_version = 4 : i32,
    backend_config = {}} : (!stablehlo.token, tensor<4xf32>)
      -> (!stablehlo.token, tensor<4xf32>, tensor<6xi64>)
  return %b#1, %b#2 : tensor<4xf32>, tensor<6xi64>
}"""

TOKEN_CALLS_HLO = """
HloModule tokens

ENTRY main {
  x = f32[4] parameter(0)
  t0 = token[] after-all()
  a = (token[], f32[4], s64[6]) custom-call(t0, x), custom_call_target="ffi_test.token",
    api_version=API_VERSION_TYPED_FFI, backend_config={}
  a.token = token[] get-tuple-element(a), index=0
  a.y = f32[4] get-tuple-element(a), index=1
  b = (token[], f32[4], s64[6]) custom-call(a.token, a.y), custom_call_target="ffi_test.token",
    api_version=API_VERSION_TYPED_FFI, backend_config={}
  b.y = f32[4] get-tuple-element(b), index=1
  b.info = s64[6] get-tuple-element(b), index=2
  ROOT out = (f32[4], s64[6]) tuple(b.y, b.info)
}"""

# What the handler sees of each token: dtype TOKEN, rank 0, a null data pointer.
TOKEN_SEEN = [17, 0, 1, 17, 0, 1]


@pytest.mark.parametrize("source", [TOKEN_CALLS, TOKEN_CALLS_HLO], ids=["stablehlo", "hlo"])
def test_tokens_in_typed_ffi_calls(handlers, source):
    x = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    y, info = kiln.compile(source)(x)
    np.testing.assert_array_equal(y, 4 * x)
    np.testing.assert_array_equal(info, TOKEN_SEEN)


def test_tokens_in_tuples_and_python_targets(tmp_path):
    seen = []

    def scale(results, operands, *, attributes, backend_config):
        token, x = operands
        seen.append((token, results[0]))  # tokens have no data: Python targets see None
        results[1][...] = x * 3

    kiln.register_custom_call("py_test.token_scale", scale)
    text = """
func.func @main(%x: tensor<3xi32>) -> tensor<3xi32> {
  %t = stablehlo.after_all : !stablehlo.token
  %in = stablehlo.tuple %t, %x : tuple<!stablehlo.token, tensor<3xi32>>
  %r = stablehlo.custom_call @py_test.token_scale(%in)
    : (tuple<!stablehlo.token, tensor<3xi32>>) -> tuple<!stablehlo.token, tensor<3xi32>>
  %y = stablehlo.get_tuple_element %r[1] : (tuple<!stablehlo.token, tensor<3xi32>>) -> tensor<3xi32>
  return %y : tensor<3xi32>
}"""
    x = np.array([1, -2, 7], np.int32)
    exe = kiln.compile(text)
    np.testing.assert_array_equal(exe(x)[0], 3 * x)
    assert seen == [(None, None)]
    # The token leaves survive saving (the call-site spec records them).
    exe.save(tmp_path / "tokens.kx")
    np.testing.assert_array_equal(kiln.load_executable(tmp_path / "tokens.kx")(x)[0], 3 * x)
    assert seen == [(None, None)] * 2


def test_tokens_in_original_convention_calls(tmp_path):
    """api_version 1-3: a token is a null pointer in the `in` and `out` arrays."""
    src = tmp_path / "token_original.c"
    src.write_text(r"""
#include <stdint.h>
#include <stddef.h>
void token_original(void* out, const void** in) {
  void** outs = (void**)out;
  const float* x = (const float*)in[1];
  float* y = (float*)outs[1];
  int64_t* nulls = (int64_t*)outs[2];
  for (int i = 0; i < 4; ++i) y[i] = x[i] + 1.0f;
  nulls[0] = in[0] == NULL;
  nulls[1] = outs[0] == NULL;
}
""")
    lib = tmp_path / "libtoken_original.so"
    subprocess.run(["gcc", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    kiln.register_custom_call_library(lib, symbols=["token_original"], api_version=1)
    text = """
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<2xi64>) {
  %t = stablehlo.after_all : !stablehlo.token
  %r = stablehlo.custom_call @token_original(%t, %x) {api_version = 1 : i32}
    : (!stablehlo.token, tensor<4xf32>) -> tuple<!stablehlo.token, tensor<4xf32>, tensor<2xi64>>
  %y = stablehlo.get_tuple_element %r[1] : (tuple<!stablehlo.token, tensor<4xf32>, tensor<2xi64>>) -> tensor<4xf32>
  %n = stablehlo.get_tuple_element %r[2] : (tuple<!stablehlo.token, tensor<4xf32>, tensor<2xi64>>) -> tensor<2xi64>
  return %y, %n : tensor<4xf32>, tensor<2xi64>
}"""
    x = np.array([0.0, 1.5, -1.0, 2.0], np.float32)
    y, nulls = kiln.compile(text)(x)
    np.testing.assert_array_equal(y, x + 1)
    np.testing.assert_array_equal(nulls, [1, 1])
