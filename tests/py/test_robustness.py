"""Inputs and events that used to hang, crash or leak: each now ends in a result, a located
KilnError or KeyboardInterrupt, and leaves the process (and the executable) usable."""
from __future__ import annotations

import ctypes
import os
import signal
import threading
import time

import numpy as np
import pytest

import kiln
from kiln.native import runtime_library


def _hlo(body: str) -> str:
    return "HloModule m\n" + body


def test_hlo_instruction_cycle_is_a_located_error():
    src = _hlo("ENTRY main {\n  p = f32[2] parameter(0)\n  a = f32[2] add(p, b)\n"
               "  b = f32[2] add(p, a)\n  ROOT r = f32[2] add(a, b)\n}\n")
    with pytest.raises(kiln.KilnError, match=r"cycle: a -> b -> a") as info:
        kiln.compile(src, filename="cycle.hlo")
    assert info.value.location == "cycle.hlo:4:3"


@pytest.mark.parametrize("number", ["-2", "-2147483648", "2"])
def test_hlo_parameter_number_out_of_range(number):
    src = _hlo(f"ENTRY main {{\n  p = f32[2] parameter(0)\n  q = f32[2] parameter({number})\n"
               "  ROOT r = f32[2] add(p, q)\n}\n")
    with pytest.raises(kiln.KilnError, match=f"parameter {number} but computation 'main'"):
        kiln.compile(src, filename="p.hlo")


def test_hlo_recursive_computation_is_a_located_error():
    src = _hlo("body {\n  p = f32[] parameter(0)\n"
               "  ROOT w = f32[] while(p), condition=cond, body=body\n}\n"
               "cond {\n  p = f32[] parameter(0)\n  ROOT c = pred[] constant(true)\n}\n"
               "ENTRY main {\n  p = f32[] parameter(0)\n"
               "  ROOT w = f32[] while(p), condition=cond, body=body\n}\n")
    with pytest.raises(kiln.KilnError, match="computation 'body' calls itself"):
        kiln.compile(src, filename="rec.hlo")


def _pool_live_bytes() -> int:
    lib = ctypes.CDLL(str(runtime_library()))
    stats = (ctypes.c_int64 * 3)()
    lib.KilnPoolStats(stats)
    return stats[0]


def test_temporaries_beyond_memory_are_a_kiln_error_naming_the_size(monkeypatch):
    # Past the compile-time size limit (test_size_limits.py) to the allocator's own check.
    monkeypatch.setenv("KILN_MAX_BUFFER_BYTES", str(1 << 62))
    n = 1 << 40  # 4 TiB of f32: no machine this runs on has it
    src = (f"func.func @main(%x: tensor<f32>) -> tensor<f32> {{\n"
           f"  %b = stablehlo.broadcast_in_dim %x, dims = [] : (tensor<f32>) -> tensor<{n}xf32>\n"
           f"  %c = stablehlo.exponential %b : tensor<{n}xf32>\n"
           f"  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
           f"  %r = stablehlo.reduce(%c init: %z) applies stablehlo.maximum across dimensions = [0]"
           f" : (tensor<{n}xf32>, tensor<f32>) -> tensor<f32>\n"
           f"  return %r : tensor<f32>\n}}")
    exe = kiln.compile(src)
    with pytest.raises(kiln.KilnError, match=r"out of memory: a temporary buffer of (\d+) bytes") \
            as info:
        exe(np.float32(1))
    size = int(info.value.message.split("buffer of ")[1].split()[0])
    assert 4 * n <= size < 4 * n + 4096  # the buffer, plus its alignment


FOREVER = """func.func @main(%x: tensor<f32>) -> tensor<f32> {
  %r = stablehlo.while(%a = %x) : tensor<f32>
    cond {
      %t = stablehlo.constant dense<true> : tensor<i1>
      stablehlo.return %t : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1.0> : tensor<f32>
      %n = stablehlo.add %a, %one : tensor<f32>
      stablehlo.return %n : tensor<f32>
    }
  return %r : tensor<f32>
}"""


def test_ctrl_c_stops_a_while_true_and_the_executable_stays_usable():
    exe = kiln.compile(FOREVER)
    for _ in range(2):
        timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
        start = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            exe(np.float32(0))
        assert time.monotonic() - start < 3.0
    # Python's own SIGINT handling is back in place after the call.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_run_time_limit_stops_a_program_that_loops_forever():
    """KILN_RUN_TIMEOUT bounds each call (a mutant whose counter wraps around its bound looped
    forever under the mutation fuzzer): the loop's polls stop it with a KilnError, its
    temporaries freed, and the executable stays usable. Read when the runtime loads: a fresh
    process. A bad value is an error, not no limit."""
    import subprocess
    import sys
    code = ("import time, numpy as np, kiln, sys\n"
            "exe = kiln.compile(sys.stdin.read())\n"
            "start = time.monotonic()\n"
            "try:\n    exe(np.float32(0))\n"
            "except kiln.KilnError as e:\n    print('stopped:', e.message)\n"
            "print('seconds:', time.monotonic() - start)\n")
    done = subprocess.run([sys.executable, "-c", code], input=FOREVER, capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, KILN_RUN_TIMEOUT="0.5"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "stopped: the program ran past its time limit of 0.5 s (KILN_RUN_TIMEOUT)" \
        in done.stdout, done.stdout
    assert 0.5 <= float(done.stdout.split("seconds:")[1]) < 5.0
    bad = subprocess.run([sys.executable, "-c", code], input=FOREVER, capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, KILN_RUN_TIMEOUT="soon"))
    assert "KILN_RUN_TIMEOUT='soon': expected a number of seconds" in bad.stdout + bad.stderr


def _rss_mb() -> float:
    # Hand free heap memory back first: glibc keeps freed blocks (how much depends on what
    # ran before in this process), which is not a leak.
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def test_failing_custom_calls_free_the_program_temporaries():
    n = 1 << 20

    def failing(results, operands, **_):
        raise RuntimeError("target failed")

    kiln.register_custom_call("robustness_fails", failing)
    src = (f"func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{\n"
           f"  %e = stablehlo.exponential %x : tensor<{n}xf32>\n"
           f"  %c = stablehlo.custom_call @robustness_fails(%e) : (tensor<{n}xf32>) -> tensor<{n}xf32>\n"
           f"  %r = stablehlo.add %c, %e : tensor<{n}xf32>\n"
           f"  return %r : tensor<{n}xf32>\n}}")
    exe = kiln.compile(src)
    x = np.ones(n, np.float32)
    live_before = _pool_live_bytes()
    # Warm up the allocator and Kiln's pool; a leak then keeps climbing (4 MB a call).
    for _ in range(100):
        with pytest.raises(RuntimeError):
            exe(x)
    rss = _rss_mb()
    for _ in range(300):
        with pytest.raises(RuntimeError, match="target failed"):
            exe(x)
    assert _rss_mb() - rss < 50
    assert _pool_live_bytes() == live_before


def test_results_equal_only_once_signless_are_distinct_buffers():
    # s32->s8 and s32->u8 are one arith.trunci after legalization: returned twice, the buffer
    # used to crash buffer-results-to-out-params (SIGSEGV).
    src = ("func.func @main(%x: tensor<4xi32>) -> (tensor<4xi8>, tensor<4xui8>) {\n"
           "  %a = stablehlo.convert %x : (tensor<4xi32>) -> tensor<4xi8>\n"
           "  %b = stablehlo.convert %x : (tensor<4xi32>) -> tensor<4xui8>\n"
           "  return %a, %b : tensor<4xi8>, tensor<4xui8>\n}")
    x = np.array([1, -1, 300, 5], np.int32)
    a, b = kiln.compile(src)(x)
    np.testing.assert_array_equal(a, x.astype(np.int8))
    np.testing.assert_array_equal(b, x.astype(np.uint8))


def test_jax_dtype_conversions_program_runs():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    import ml_dtypes

    def f(x):
        outs = []
        for dt in (jnp.float16, jnp.bfloat16, jnp.int8, jnp.uint8, jnp.bool_):
            y = x.astype(dt)
            outs += [y, y.astype(jnp.float32)]
        outs.append(jax.lax.bitcast_convert_type(x, jnp.uint8))
        return outs

    # In range for every target type: out-of-range float->int conversion is implementation-
    # defined in StableHLO (XLA wraps, Kiln saturates).
    x = np.array([0.0, 1.5, 2.25, 127.0, 100.75, 1e-3, 3.0, 7.0], np.float32)
    exported = jax.export.export(jax.jit(f))(x)
    got = kiln.compile(bytes(exported.serialize()))(x)
    want = f(x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype == ml_dtypes.bfloat16 or w.dtype == np.float16:
            np.testing.assert_array_equal(g.view(np.uint16), w.view(np.uint16))
        else:
            np.testing.assert_array_equal(g, w)


SCALAR_ADD = ("func.func @main(%x: tensor<f32>) -> tensor<f32> {\n"
              "  %0 = stablehlo.add %x, %x : tensor<f32>\n  return %0 : tensor<f32>\n}")


@pytest.mark.parametrize("value, what", [(None, "NoneType"), ("1.5", "str")])
def test_rank0_arguments_refuse_none_and_strings(value, what):
    with pytest.raises(kiln.KilnError, match=f"argument 0 of @main must be tensor<f32>, got {what}"):
        kiln.compile(SCALAR_ADD)(value)


def test_rank0_arguments_take_python_numbers_but_not_lossy_ones():
    assert kiln.compile(SCALAR_ADD)(1.5)[0] == np.float32(3.0)
    identity = kiln.compile("func.func @main(%x: tensor<i32>) -> tensor<i32> {\n"
                            "  return %x : tensor<i32>\n}")
    assert identity(7)[0] == 7
    with pytest.raises(kiln.KilnError, match="got float64 values"):
        identity(1.5)


@pytest.mark.parametrize("result_type", ["tensor<" + "1x" * 65 + "f32>",
                                         "tensor<1099511627776x1024xf32>"])
def test_results_numpy_cannot_hold_are_kiln_errors(result_type, monkeypatch):
    # Past the compile-time size limit (test_size_limits.py) to the result allocation.
    monkeypatch.setenv("KILN_MAX_BUFFER_BYTES", str(1 << 62))
    src = (f"func.func @main(%x: tensor<f32>) -> {result_type} {{\n"
           f"  %0 = stablehlo.broadcast_in_dim %x, dims = [] : (tensor<f32>) -> {result_type}\n"
           f"  return %0 : {result_type}\n}}")
    with pytest.raises(kiln.KilnError, match="result 0 of @main .* cannot be allocated"):
        kiln.compile(src)(np.float32(1))


def test_deep_nesting_is_a_located_error_not_a_crash():
    depth = 2400  # overflowed the MLIR parser's stack (SIGSEGV)
    inner = "%r = stablehlo.constant dense<1.0> : tensor<f32>\n"
    src = ("func.func @main(%x: tensor<f32>) -> tensor<f32> {\n"
           + "%c = stablehlo.constant dense<true> : tensor<i1>\n"
           + "".join("%r = \"stablehlo.if\"(%c) ({\n" for _ in range(depth)) + "x")
    with pytest.raises(kiln.KilnError, match="nesting deeper than 256 levels") as info:
        kiln.compile(src, filename="deep.mlir")
    assert info.value.location.startswith("deep.mlir:")


def test_corrupt_bytecode_never_kills_the_process():
    import random
    from torch_mlir._mlir_libs import _stablehlo
    src = ("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
           "  %0 = stablehlo.exponential %x : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}")
    artifact = _stablehlo.serialize_portable_artifact_str(src, _stablehlo.get_current_version())
    rng = random.Random(3)
    outcomes = set()
    for _ in range(60):
        data = bytearray(artifact)
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        try:
            kiln.compile(bytes(data))
            outcomes.add("ok")
        except kiln.KilnError:
            outcomes.add("error")
    assert outcomes <= {"ok", "error"} and "error" in outcomes


def test_absurd_result_numbers_are_a_located_error_not_a_hang():
    # `%r#2147483647` made the MLIR parser reserve 2^31 results: an abort or a hang.
    src = ("func.func @main(%x: tensor<f32>) -> tensor<f32> {\n"
           "  %r:2 = stablehlo.optimization_barrier %x, %x : tensor<f32>, tensor<f32>\n"
           "  return %r#2147483647 : tensor<f32>\n}")
    with pytest.raises(kiln.KilnError, match="result number 2147483647 is out of range") as info:
        kiln.compile(src, filename="r.mlir")
    assert info.value.location == "r.mlir:3:13"


def test_a_dynamic_entry_not_named_main_specializes():
    # Shape specialisation renamed such an entry outside any MLIR context (a stray RuntimeError).
    src = ("func.func @f(%n: tensor<i64>, %x: tensor<?xf32>) -> tensor<?xf32> {\n"
           "  %0 = stablehlo.add %x, %x : tensor<?xf32>\n  return %0 : tensor<?xf32>\n}")
    exe = kiln.compile(src)
    (y,) = exe(np.int64(3), np.ones(3, np.float32))
    np.testing.assert_array_equal(y, np.full(3, 2, np.float32))


def test_a_reader_that_hangs_is_stopped(monkeypatch):
    # Some corrupt bytecode makes MLIR's reader loop forever; Kiln's reader process gives up.
    import kiln.frontend.untrusted as untrusted
    from torch_mlir._mlir_libs import _stablehlo
    artifact = _stablehlo.serialize_portable_artifact_str(SCALAR_ADD, _stablehlo.get_current_version())
    monkeypatch.setenv("KILN_READ_TIMEOUT", "0")  # a reader server where every read is too slow
    monkeypatch.setattr(untrusted, "_server", None)
    try:
        with pytest.raises(kiln.KilnError, match="did not finish reading this input"):
            kiln.compile(bytes(artifact))
    finally:
        if untrusted._server is not None:
            untrusted._server.kill()
            untrusted._server.wait()
        untrusted._server = None


def test_ctrl_c_works_after_a_compile_in_this_process():
    # LLVM installs SIGINT/SIGSEGV handlers of its own when it writes object code; a compile
    # in the caller's process must leave the process's handlers as they were (this once sent
    # Ctrl-C round in circles between LLVM's handler and Kiln's until the stack overflowed).
    kiln.compile(FOREVER.replace("1.0", "2.0"), isolate=False)
    test_ctrl_c_stops_a_while_true_and_the_executable_stays_usable()
