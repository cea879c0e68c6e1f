"""Custom calls in the GPU execution plan, with seed 004's GPU calling convention
`void f(CUstream, void** buffers, const char* opaque, size_t opaque_len[, status])`. The
emulator passes the null stream and device pointers that are host addresses, so real C
targets built here with gcc run between the emulated kernels."""
from __future__ import annotations

import ctypes
import json
import subprocess

import numpy as np
import pytest

import kiln
from kiln.errors import CustomCallError, KilnError
from kiln.native import include_dir
from kiln.runtime.custom_call import REGISTRY, runtime

SOURCE = r"""
#include <stdlib.h>
#include <string.h>
#include "kiln/custom_call.h"

/* out[i] = a[i] * scale + b[i] for 16 floats; scale from the opaque bytes; a stream that is
   not null (there is none in the emulator) would show as +1000 */
void gpu_axpy(void* stream, void** buffers, const char* opaque, size_t opaque_len) {
  const float* a = buffers[0];
  const float* b = buffers[1];
  float* out = buffers[2];
  char text[32] = {0};
  memcpy(text, opaque, opaque_len < 31 ? opaque_len : 31);
  float scale = (float)atof(text);
  for (int i = 0; i < 16; i++) out[i] = a[i] * scale + b[i] + (stream ? 1000.0f : 0.0f);
}

/* api_version 2: two results, the sum and the count of positive elements */
void gpu_stats(void* stream, void** buffers, const char* opaque, size_t opaque_len,
               XlaCustomCallStatus* status) {
  const float* x = buffers[0];
  float* sum = buffers[1];
  int* positive = buffers[2];
  *sum = 0; *positive = 0;
  for (int i = 0; i < 16; i++) { *sum += x[i]; *positive += x[i] > 0; }
}

void gpu_refuses(void* stream, void** buffers, const char* opaque, size_t opaque_len,
                 XlaCustomCallStatus* status) {
  XlaCustomCallStatusSetFailure(status, "the device said no", 18);
}
"""

AXPY = """func.func @main(%a: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<16xf32> {
  %s = stablehlo.sine %a : tensor<16xf32>
  %y = stablehlo.custom_call @gpu_axpy(%s, %b) {backend_config = "2.5"} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %z = stablehlo.multiply %y, %y : tensor<16xf32>
  return %z : tensor<16xf32>
}"""


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gpu_cc")
    (directory / "targets.c").write_text(SOURCE)
    library = directory / "libtargets.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", f"-I{include_dir()}",
                    str(directory / "targets.c"), "-o", str(library)], check=True)
    runtime()   # XlaCustomCallStatusSetFailure resolves against the loaded runtime
    lib = ctypes.CDLL(str(library))
    names = {"gpu_axpy": 1, "gpu_stats": 2, "gpu_refuses": 2}
    for name, api in names.items():
        address = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        kiln.register_custom_call(name, address, platform="CUDA", api_version=api)
    yield lib
    for name in names:
        REGISTRY.unregister(name, "CUDA")


@pytest.fixture
def inputs():
    return np.linspace(-3, 3, 16, dtype=np.float32), np.arange(16, dtype=np.float32)


def test_a_c_target_runs_between_kernels_with_the_null_stream(targets, inputs):
    a, b = inputs
    exe = kiln.compile(AXPY, target="gpu-emulator")
    (got,) = exe(a, b)
    np.testing.assert_allclose(got, (np.sin(a) * 2.5 + b) ** 2, rtol=1e-5)
    kinds = [t.kind for t in exe.thunks()]
    assert kinds == ["kernel-launch", "custom-call", "kernel-launch"]
    call = exe.thunks()[1]
    assert call.target == "gpu_axpy" and len(call.reads) == 2 and len(call.writes) == 1
    assert "custom-call" in str(exe.thunks()) and "target=gpu_axpy" in str(exe.thunks())


def test_status_returning_target_with_two_results(targets, inputs):
    a, _ = inputs
    program = """func.func @main(%x: tensor<16xf32>) -> (tensor<f32>, tensor<i32>) {
  %e = stablehlo.exponential %x : tensor<16xf32>
  %s, %n = stablehlo.custom_call @gpu_stats(%e) {api_version = 2 : i32} : (tensor<16xf32>) -> (tensor<f32>, tensor<i32>)
  %c = stablehlo.constant dense<1> : tensor<i32>
  %m = stablehlo.add %n, %c : tensor<i32>
  return %s, %m : tensor<f32>, tensor<i32>
}"""
    total, count = kiln.compile(program, target="gpu-emulator")(a - 1)
    np.testing.assert_allclose(total, np.exp(a - 1).sum(), rtol=1e-5)
    assert int(count) == 16 + 1


def test_a_failing_target_raises_its_message(targets, inputs):
    program = AXPY.replace("gpu_axpy", "gpu_refuses").replace(
        '{backend_config = "2.5"}', "{api_version = 2 : i32}")
    with pytest.raises(CustomCallError) as info:
        kiln.compile(program, target="gpu-emulator")(*inputs)
    assert "gpu_refuses" in info.value.message and "the device said no" in info.value.message


def test_a_custom_call_inside_a_loop(targets, inputs):
    # the call is a step of the while's body: three calls, kernels between them
    a, b = inputs
    program = """func.func @main(%a: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<16xf32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %three = stablehlo.constant dense<3> : tensor<i32>
  %r:2 = stablehlo.while(%i = %zero, %v = %a) : tensor<i32>, tensor<16xf32>
  cond {
    %p = stablehlo.compare LT, %i, %three : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %y = stablehlo.custom_call @gpu_axpy(%v, %b) {backend_config = "0.5"} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    %t = stablehlo.tanh %y : tensor<16xf32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %t : tensor<i32>, tensor<16xf32>
  }
  return %r#1 : tensor<16xf32>
}"""
    exe = kiln.compile(program, target="gpu-emulator")
    (got,) = exe(a, b)
    want = a
    for _ in range(3):
        want = np.tanh(want * 0.5 + b)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    loop = exe.thunks()[0]
    assert loop.kind == "while" and "custom-call" in [t.kind for t in loop.nested[1]]


def test_gpu_target_plans_the_call_and_assembles(targets):
    exe = kiln.compile(AXPY, target="gpu", gpu_arch="sm_80")
    bundle = json.loads(next(iter(exe._cache.values())).artifact.code)
    (step,) = [s for s in bundle["plan"]["steps"] if s["op"] == "custom-call"]
    assert step["target"] == "gpu_axpy" and step["api_version"] == 1
    assert step["opaque"] == "2.5"
    assert len(step["operands"]) == 2 and len(step["results"]) == 1
    assert bundle["cubin"]


def test_targets_registered_only_for_the_cpu_are_still_refused(inputs):
    kiln.register_custom_call("cpu_only_op", lambda results, operands, **_: None,
                              platform="cpu")
    try:
        with pytest.raises(KilnError) as info:
            kiln.compile(AXPY.replace("gpu_axpy", "cpu_only_op"), target="gpu-emulator")
        error = info.value
        assert "cpu_only_op" in error.message and "CUDA" in error.message
        assert error.location and "platform='CUDA'" in error.hint
    finally:
        REGISTRY.unregister("cpu_only_op", "cpu")


def test_typed_ffi_calls_are_named(targets):
    program = AXPY.replace('{backend_config = "2.5"}', "{api_version = 4 : i32}")
    with pytest.raises(KilnError) as info:
        kiln.compile(program, target="gpu-emulator")
    assert "api_version 4" in info.value.message and info.value.location
