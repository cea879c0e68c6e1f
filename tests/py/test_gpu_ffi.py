"""XLA's typed FFI (custom calls with api_version 4) on the GPU target: C++ handlers built
here with g++ against jaxlib's unmodified headers (tests/py/custom_call_src/ffi_handlers.cc,
as test_ffi.py builds it, plus a GPU-style handler below), registered for platform "CUDA",
run as steps of the execution plan through `target="gpu-emulator"` (device pointers are host
addresses there) and compared with numpy and with the same handlers on the CPU target; and
compiled for `target="gpu"` (PTX and cubin without a GPU, the plan holding the FFI step)."""
from __future__ import annotations

import ctypes
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln.errors import CustomCallError, KilnError
from kiln.runtime.custom_call import REGISTRY
from kiln.runtime.gpu_emulator import EMULATOR_FFI_STREAM

jax = pytest.importorskip("jax")

SRC = Path(__file__).parent / "custom_call_src"
# Kiln's names for the shared handlers (distinct from test_ffi.py's, which register for the
# CPU in the same process), by their symbols.
SHARED = {"gpu_ffi.rms_norm": "RmsNorm", "gpu_ffi.rms_norm_fwd": "RmsNormFwd",
          "gpu_ffi.attrs": "Attrs", "gpu_ffi.fail": "Fail", "gpu_ffi.token": "TokenThrough",
          "gpu_ffi.describe": "Describe"}

# A GPU-style handler: the stream decoded as a cudaStream_t (CUDA's own spelling of the
# type, declared here: no CUDA headers needed) and written to its result, beside a scaled
# copy of its operand; cudaStream_t is what XLA's GPU handlers ask for.
GPU_SOURCE = r"""
#include <cstdint>
#include <optional>
#include "xla/ffi/api/ffi.h"

struct CUstream_st;
typedef CUstream_st* cudaStream_t;
namespace ffi = xla::ffi;

static ffi::Error ScaleImpl(cudaStream_t stream, float factor, ffi::Buffer<ffi::F32> x,
                            ffi::ResultBuffer<ffi::F32> y, ffi::ResultBuffer<ffi::S64> seen) {
  for (size_t i = 0; i < x.element_count(); ++i) y->typed_data()[i] = factor * x.typed_data()[i];
  seen->typed_data()[0] = reinterpret_cast<int64_t>(stream);
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(ScaleOnStream, ScaleImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Attr<float>("factor")
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::S64>>());

// Scratch memory: its input reversed through a scratch block (on a GPU, device memory; the
// tests' "device" memory is host memory, so the handler may touch it).
static ffi::Error ReverseImpl(ffi::ScratchAllocator scratch, ffi::Buffer<ffi::F32> x,
                              ffi::ResultBuffer<ffi::F32> y) {
  size_t n = x.element_count();
  std::optional<void*> block = scratch.Allocate(n * sizeof(float), 128);
  if (!block.has_value()) return ffi::Error::Internal("no scratch memory");
  float* tmp = static_cast<float*>(*block);
  for (size_t i = 0; i < n; ++i) tmp[i] = x.typed_data()[n - 1 - i];
  for (size_t i = 0; i < n; ++i) y->typed_data()[i] = tmp[i];
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(ReverseThroughScratch, ReverseImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ScratchAllocator>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
"""


def _build(source: Path, out: Path) -> ctypes.CDLL:
    subprocess.run(["g++", "-std=c++17", "-shared", "-fPIC", "-O1", "-w",
                    f"-I{jax.ffi.include_dir()}", str(source), "-o", str(out)], check=True)
    return ctypes.cdll.LoadLibrary(str(out))


@pytest.fixture(scope="module")
def handlers(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gpu_ffi")
    shared = _build(SRC / "ffi_handlers.cc", directory / "libffi_handlers.so")
    (directory / "gpu.cc").write_text(GPU_SOURCE)
    gpu = _build(directory / "gpu.cc", directory / "libgpu_ffi.so")
    registered = {**{name: getattr(shared, symbol) for name, symbol in SHARED.items()},
                  "gpu_ffi.scale": gpu.ScaleOnStream,
                  "gpu_ffi.reverse": gpu.ReverseThroughScratch}
    for name, function in registered.items():
        for platform in ("CUDA", "cpu"):   # the CPU target's results to compare with
            kiln.register_custom_call(name, jax.ffi.pycapsule(function), platform=platform,
                                      api_version=4)
    yield registered
    for name in registered:
        for platform in ("CUDA", "cpu"):
            REGISTRY.unregister(name, platform)


RMS_NORM = """func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = stablehlo.exponential %x : tensor<4x8xf32>
  %y = stablehlo.custom_call @gpu_ffi.rms_norm(%e) {api_version = 4 : i32,
    backend_config = {eps = 1.0e-05 : f32}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %z = stablehlo.add %y, %x : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}"""


def rms_norm(x, eps=1e-5):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)


def test_a_handler_runs_between_kernels_as_on_the_cpu(handlers, rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    exe = kiln.compile(RMS_NORM, target="gpu-emulator")
    (got,) = exe(x)
    np.testing.assert_allclose(got, rms_norm(np.exp(x)) + x, rtol=1e-5, atol=1e-6)
    (on_cpu,) = kiln.compile(RMS_NORM)(x)
    np.testing.assert_allclose(got, on_cpu, rtol=1e-6, atol=1e-6)
    kinds = [t.kind for t in exe.thunks()]
    assert kinds == ["kernel-launch", "custom-call", "kernel-launch"]
    assert exe.thunks()[1].target == "gpu_ffi.rms_norm"


def test_the_stream_decodes_to_the_emulators_sentinel(handlers, rng):
    # PlatformStream<cudaStream_t> succeeds in the emulator: a non-null stand-in, documented
    program = """func.func @main(%x: tensor<6xf32>) -> (tensor<6xf32>, tensor<1xi64>) {
  %y, %s = stablehlo.custom_call @gpu_ffi.scale(%x) {
    mhlo.backend_config = {factor = 2.5 : f32}} : (tensor<6xf32>) -> (tensor<6xf32>, tensor<1xi64>)
  %z = stablehlo.sine %y : tensor<6xf32>
  return %z, %s : tensor<6xf32>, tensor<1xi64>
}"""
    x = rng.standard_normal(6).astype(np.float32)
    z, stream = kiln.compile(program, target="gpu-emulator")(x)
    np.testing.assert_allclose(z, np.sin(2.5 * x), rtol=1e-5, atol=1e-6)
    assert int(stream[0]) == EMULATOR_FFI_STREAM != 0
    # the CPU target has no stream: the handler's decoding fails there, as XLA's does
    with pytest.raises(CustomCallError, match="no stream"):
        kiln.compile(program)(x)


def test_attributes_of_each_type_arrive_as_on_the_cpu(handlers):
    program = """func.func @main() -> tensor<40xf64> {
  %r = stablehlo.custom_call @gpu_ffi.attrs() {api_version = 4 : i32, backend_config = {
    b = true, i8 = -3 : i8, i16 = 300 : i16, i32 = -70000 : i32, i64 = 1099511627776 : i64,
    u8 = 200 : ui8, u16 = 60000 : ui16, u32 = 4000000000 : ui32, u64 = 4611686018427387904 : ui64,
    f32 = 1.1 : f32, f64 = 2.2 : f64, name = "hello", a32 = array<i32: 1, -2>,
    a64 = array<i64: 3, 4, 5>, af32 = array<f32: 0.1>, af64 = array<f64: 0.25, -1.0>,
    opts = {depth = 7 : i32, mode = "fast"}, point = {x = 9 : i64, y = 0.125 : f64}}}
    : () -> tensor<40xf64>
  return %r : tensor<40xf64>
}"""
    (got,) = kiln.compile(program, target="gpu-emulator")()
    (want,) = kiln.compile(program)()
    np.testing.assert_array_equal(got, want)
    assert got[0] == 1 and got[3] == -70000 and got[9] == np.float64(np.float32(1.1))
    assert got[10] == 2.2 and got[11] == 5   # len("hello")


def test_several_results_and_unsigned_operands(handlers, rng):
    x = rng.standard_normal((5, 6)).astype(np.float32)
    program = """func.func @main(%x: tensor<5x6xf32>) -> (tensor<5x6xf32>, tensor<5xf32>) {
  %y, %r = stablehlo.custom_call @gpu_ffi.rms_norm_fwd(%x) {api_version = 4 : i32,
    backend_config = {eps = 1.0e-05 : f32}} : (tensor<5x6xf32>) -> (tensor<5x6xf32>, tensor<5xf32>)
  return %y, %r : tensor<5x6xf32>, tensor<5xf32>
}"""
    y, scale = kiln.compile(program, target="gpu-emulator")(x)
    np.testing.assert_allclose(y, rms_norm(x), rtol=1e-5)
    np.testing.assert_allclose(scale, 1 / np.sqrt((x * x).mean(-1) + 1e-5), rtol=1e-5)
    # an unsigned operand keeps its FFI data type (U32), though the buffers are signless
    describe = """func.func @main(%x: tensor<2x3xui32>) -> (tensor<2x3xui32>, tensor<8xi64>) {
  %c, %i = stablehlo.custom_call @gpu_ffi.describe(%x) {api_version = 4 : i32,
    backend_config = {}} : (tensor<2x3xui32>) -> (tensor<2x3xui32>, tensor<8xi64>)
  return %c, %i : tensor<2x3xui32>, tensor<8xi64>
}"""
    u = np.arange(6, dtype=np.uint32).reshape(2, 3) * 1000000000
    copy, info = kiln.compile(describe, target="gpu-emulator")(u)
    want_copy, want_info = kiln.compile(describe)(u)
    np.testing.assert_array_equal(copy, u)
    np.testing.assert_array_equal(info, want_info)
    assert info[0] == 8   # XLA's U32


def test_tokens_reach_the_handler_as_xla_passes_them(handlers):
    program = """func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<6xi64>) {
  %t0 = stablehlo.after_all : !stablehlo.token
  %a:3 = stablehlo.custom_call @gpu_ffi.token(%t0, %x) {api_version = 4 : i32,
    backend_config = {}} : (!stablehlo.token, tensor<4xf32>)
      -> (!stablehlo.token, tensor<4xf32>, tensor<6xi64>)
  %b:3 = stablehlo.custom_call @gpu_ffi.token(%a#0, %a#1) {api_version = 4 : i32,
    backend_config = {}} : (!stablehlo.token, tensor<4xf32>)
      -> (!stablehlo.token, tensor<4xf32>, tensor<6xi64>)
  return %b#1, %b#2 : tensor<4xf32>, tensor<6xi64>
}"""
    x = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    y, info = kiln.compile(program, target="gpu-emulator")(x)
    np.testing.assert_array_equal(y, 4 * x)
    np.testing.assert_array_equal(info, [17, 0, 1, 17, 0, 1])   # TOKEN, rank 0, null data


def test_a_handlers_error_is_a_custom_call_error(handlers):
    program = """func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = stablehlo.custom_call @gpu_ffi.fail(%x) {api_version = 4 : i32,
    backend_config = {reason = "inputs must be positive"}} : (tensor<2xf32>) -> tensor<2xf32>
  %z = stablehlo.abs %y : tensor<2xf32>
  return %z : tensor<2xf32>
}"""
    exe = kiln.compile(program, target="gpu-emulator")
    with pytest.raises(CustomCallError, match=r"custom call 'gpu_ffi.fail' failed "
                                              r"\(OUT_OF_RANGE\): negative input: inputs must "
                                              r"be positive"):
        exe(np.array([-1.0, 2.0], np.float32))
    (got,) = exe(np.array([1.0, -2.0], np.float32))   # still usable
    np.testing.assert_array_equal(got, [1.0, 2.0])


def test_wrong_signatures_are_the_handlers_errors(handlers):
    program = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %y = stablehlo.custom_call @gpu_ffi.rms_norm(%x) {api_version = 4 : i32,
    backend_config = {eps = 1.0e-05 : f64}} : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}"""
    with pytest.raises(CustomCallError, match="(?s)gpu_ffi.rms_norm.*Wrong scalar data type"):
        kiln.compile(program, target="gpu-emulator")(np.ones(3, np.float32))


def test_a_handler_inside_a_loop_and_beside_command_buffers(handlers, rng):
    # Full reductions between elementwise kernels make a run of launches, one command
    # buffer; the FFI call after it is never captured in one (XLA captures only handlers
    # declared command-buffer compatible).
    chain = "\n".join(f"""  %t{i} = stablehlo.tanh %k{i - 1} : tensor<4x8xf32>
  %s{i} = stablehlo.reduce(%k{i - 1} init: %c0) applies stablehlo.add across dimensions = [0, 1]
    : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
  %b{i} = stablehlo.broadcast_in_dim %s{i}, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
  %k{i} = stablehlo.add %t{i}, %b{i} : tensor<4x8xf32>""" for i in range(1, 7))
    program = f"""func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {{
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %two = stablehlo.constant dense<2> : tensor<i32>
  %r:2 = stablehlo.while(%i = %zero, %v = %x) : tensor<i32>, tensor<4x8xf32>
  cond {{
    %p = stablehlo.compare LT, %i, %two : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }} do {{
    %y = stablehlo.custom_call @gpu_ffi.rms_norm(%v) {{api_version = 4 : i32,
      backend_config = {{eps = 1.0e-05 : f32}}}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %t = stablehlo.multiply %y, %y : tensor<4x8xf32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %t : tensor<i32>, tensor<4x8xf32>
  }}
  %k0 = stablehlo.add %r#1, %x : tensor<4x8xf32>
  %c0 = stablehlo.constant dense<0.0> : tensor<f32>
{chain}
  %f = stablehlo.custom_call @gpu_ffi.rms_norm(%k6) {{api_version = 4 : i32,
    backend_config = {{eps = 1.0e-05 : f32}}}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %f : tensor<4x8xf32>
}}"""
    x = rng.standard_normal((4, 8)).astype(np.float32)
    exe = kiln.compile(program, target="gpu-emulator")
    (got,) = exe(x)
    (want,) = kiln.compile(program)(x)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
    (again,) = exe(x)   # the sites and the recorded command buffer serve a second call
    np.testing.assert_array_equal(again, got)
    thunks = exe.thunks()
    calls = [t for t in thunks if t.kind == "custom-call"]
    assert len(calls) == 1 and calls[0].command_buffer is None
    assert any(t.command_buffer for t in thunks if t.kind == "kernel-launch")
    loop = next(t for t in thunks if t.kind == "while")
    assert "custom-call" in [t.kind for t in loop.nested[1]]


def test_the_gpu_target_plans_the_ffi_step_and_assembles(handlers):
    exe = kiln.compile(RMS_NORM, target="gpu", gpu_arch="sm_80")
    bundle = json.loads(next(iter(exe._cache.values())).artifact.code)
    (step,) = [s for s in bundle["plan"]["steps"] if s["op"] == "custom-call"]
    assert step["target"] == "gpu_ffi.rms_norm" and step["api_version"] == 4
    assert step["ffi"]["operands"] == [["f32", [4, 8]]]
    assert step["ffi"]["results"] == [["f32", [4, 8]]]
    assert step["ffi"]["attributes"] == [["eps", "scalar", "f32", pytest.approx(1e-5)]]
    assert bundle["cubin"] and bundle["ptx"]
    kinds = [t.kind for t in exe.thunks()]
    assert kinds == ["kernel-launch", "custom-call", "kernel-launch"]
    assert "target=gpu_ffi.rms_norm" in str(exe.thunks())


def test_what_the_gpu_cannot_pass_is_refused_where_written(handlers):
    # a Python target is no device function; an api_version 1-3 target takes no token
    kiln.register_custom_call("gpu_ffi.python", lambda results, operands, **_: None,
                              platform="CUDA")
    try:
        with pytest.raises(KilnError) as info:
            kiln.compile(RMS_NORM.replace("gpu_ffi.rms_norm", "gpu_ffi.python"),
                         target="gpu-emulator")
        assert "Python callable" in info.value.message and info.value.location
    finally:
        REGISTRY.unregister("gpu_ffi.python", "CUDA")
    # never called: the compile refuses the token first
    kiln.register_custom_call("gpu_ffi.stream_convention", handlers["gpu_ffi.scale"],
                              platform="CUDA", api_version=2)
    try:
        program = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %t = stablehlo.after_all : !stablehlo.token
  %y, %t2 = stablehlo.custom_call @gpu_ffi.stream_convention(%x, %t) {api_version = 2 : i32}
    : (tensor<4xf32>, !stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)
  return %y : tensor<4xf32>
}"""
        with pytest.raises(KilnError) as info:
            kiln.compile(program, target="gpu-emulator")
        assert "token" in info.value.message and info.value.location.endswith(":3:13")
        assert "api_version 4" in info.value.hint
    finally:
        REGISTRY.unregister("gpu_ffi.stream_convention", "CUDA")


class HostMemoryDriver:
    """The CUDA driver calls a plan without kernels makes, served from host memory (no GPU
    here): what the handler is given can be checked as CudaRuntime passes it."""

    class CUresult:
        CUDA_SUCCESS = 0

    def __init__(self):
        self.blocks: list = []   # kept alive: their addresses are the device pointers

    @staticmethod
    def CUdeviceptr(pointer):   # noqa: N802 - the driver's name
        return pointer

    def cuMemAlloc(self, nbytes):   # noqa: N802
        block = ctypes.create_string_buffer(nbytes)
        self.blocks.append(block)
        return 0, ctypes.addressof(block)

    def cuMemcpyHtoDAsync(self, dst, src, nbytes, stream):   # noqa: N802
        ctypes.memmove(dst, src, nbytes)
        return (0,)

    cuMemcpyDtoHAsync = cuMemcpyDtoDAsync = cuMemcpyHtoDAsync

    def cuStreamSynchronize(self, stream):   # noqa: N802
        return (0,)


def test_on_the_cuda_runtime_the_handler_gets_the_plans_stream(handlers, rng):
    from kiln.runtime.cuda import CudaRuntime
    from kiln.runtime.gpu_plan import PlanInvoker
    program = """func.func @main(%x: tensor<6xf32>) -> (tensor<6xf32>, tensor<1xi64>) {
  %y, %s = stablehlo.custom_call @gpu_ffi.scale(%x) {api_version = 4 : i32,
    backend_config = {factor = -2.0 : f32}} : (tensor<6xf32>) -> (tensor<6xf32>, tensor<1xi64>)
  return %y, %s : tensor<6xf32>, tensor<1xi64>
}"""
    bundle = json.loads(next(iter(kiln.compile(program, target="gpu")._cache.values()))
                        .artifact.code)
    runtime = CudaRuntime.__new__(CudaRuntime)   # no device: host memory behind the driver
    runtime.cu, runtime.stream, runtime._images = HostMemoryDriver(), 0x5EED0000, []
    runtime.ffi_device_memory = lambda: (None, None)  # no libcuda here; see the next test
    x = rng.standard_normal(6).astype(np.float32)
    y, stream = np.empty(6, np.float32), np.zeros(1, np.int64)
    PlanInvoker(bundle, lambda: runtime, "scale")([x, y, stream])
    np.testing.assert_array_equal(y, -2.0 * x)
    assert int(stream[0]) == 0x5EED0000   # the CUstream the plan's work is queued on


def test_on_the_cuda_runtime_scratch_memory_comes_from_the_device_allocator(handlers, rng):
    from kiln.runtime.cuda import CudaRuntime
    from kiln.runtime.gpu_plan import PlanInvoker
    program = """func.func @main(%x: tensor<5xf32>) -> tensor<5xf32> {
  %y = stablehlo.custom_call @gpu_ffi.reverse(%x) {api_version = 4 : i32,
    backend_config = {}} : (tensor<5xf32>) -> tensor<5xf32>
  return %y : tensor<5xf32>
}"""
    bundle = json.loads(next(iter(kiln.compile(program, target="gpu")._cache.values()))
                        .artifact.code)
    runtime = CudaRuntime.__new__(CudaRuntime)
    runtime.cu, runtime.stream, runtime._images = HostMemoryDriver(), 0x5EED0000, []
    # cuMemAlloc_v2 and cuMemFree_v2 stand-ins, over host memory, that record their calls
    blocks, freed = {}, []
    alloc_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t)
    free_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)

    def alloc(out, size):
        block = ctypes.create_string_buffer(size + 256)
        address = (ctypes.addressof(block) + 255) // 256 * 256   # cuMemAlloc's alignment
        blocks[address] = (block, size)
        out[0] = address
        return 0

    def free(address):
        freed.append(address)
        return 0

    callbacks = alloc_type(alloc), free_type(free)
    runtime.ffi_device_memory = lambda: tuple(ctypes.cast(c, ctypes.c_void_p).value
                                              for c in callbacks)
    x = rng.standard_normal(5).astype(np.float32)
    y = np.empty(5, np.float32)
    PlanInvoker(bundle, lambda: runtime, "reverse")([x, y])
    np.testing.assert_array_equal(y, x[::-1])
    assert [size for _, size in blocks.values()] == [5 * 4]   # one block, from the allocator
    assert freed == list(blocks)                              # ... given back after the call


def test_a_jax_ffi_call_runs_on_the_emulated_gpu_as_in_jax(handlers, rng):
    # jax.ffi.ffi_call's form: api_version 4, mhlo.backend_config, explicit layouts
    from jax import export
    jax.ffi.register_ffi_target("gpu_ffi.rms_norm", jax.ffi.pycapsule(handlers["gpu_ffi.rms_norm"]),
                                platform="cpu")

    def f(x):
        y = jax.ffi.ffi_call("gpu_ffi.rms_norm", jax.ShapeDtypeStruct(x.shape, x.dtype))(
            jax.numpy.tanh(x), eps=np.float32(1e-5))
        return y * 2

    x = rng.standard_normal((3, 16)).astype(np.float32)
    exp = export.export(jax.jit(f), disabled_checks=[
        export.DisabledSafetyCheck.custom_call("gpu_ffi.rms_norm")])(x)
    (got,) = kiln.compile(exp.mlir_module(), target="gpu-emulator")(x)
    np.testing.assert_allclose(got, np.asarray(jax.jit(f)(x)), rtol=1e-5, atol=1e-6)
