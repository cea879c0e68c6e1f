"""Command buffers in the GPU execution plan (seed 002): runs of launches and copies with no
host step between them are one `command-buffer` step, recorded once and replayed while the
buffers and arguments it was recorded with stay the same. The emulator really records (a
list of commands, not run) and replays; the CUDA runtime captures a graph, checked here
against a driver that records the calls made to it."""
from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax

import kiln
from kiln.lowering.gpu.host import COMMAND_BUFFER_MIN_COMMANDS, group_command_buffers
from kiln.runtime import gpu_emulator
from kiln.runtime.cuda import CudaRuntime
from kiln.runtime.gpu_plan import PlanInvoker


def jax_program(f, *args) -> bytes:
    specs = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in args]
    return export.export(jax.jit(f))(*specs).serialize()


def chain(x):
    """Six fusions separated by full reductions: a dozen launches in a row."""
    for k in range(6):
        x = jnp.tanh(x) * (1 + k / 10) + x.mean()
    return x


X = np.linspace(-1, 1, 24, dtype=np.float32)


def bundle_of(exe) -> dict:
    return json.loads(next(iter(exe._cache.values())).artifact.code)


def test_runs_of_commands_are_grouped():
    steps = [{"op": "alloc", "id": 1, "bytes": 4}] + [
        {"op": "launch", "n": n} for n in range(COMMAND_BUFFER_MIN_COMMANDS)] + [
        {"op": "download", "id": 2}, {"op": "launch", "n": 9}, {"op": "alloc", "id": 3}]
    grouped = group_command_buffers(steps)
    # the leading alloc stays out (nothing recorded before it), the run of launches is one
    # command buffer, the download ends it, a lone launch and a trailing alloc stay steps
    assert [s["op"] for s in grouped] == ["alloc", "command-buffer", "download", "launch",
                                          "alloc"]
    assert [s["n"] for s in grouped[1]["steps"]] == list(range(COMMAND_BUFFER_MIN_COMMANDS))
    short = group_command_buffers([{"op": "launch"}] * (COMMAND_BUFFER_MIN_COMMANDS - 1))
    assert all(s["op"] == "launch" for s in short)


def test_plan_and_thunks_show_command_buffers():
    exe = kiln.compile(jax_program(chain, X), target="gpu-emulator")
    np.testing.assert_allclose(exe(X), chain(X), rtol=1e-5, atol=1e-5)
    steps = bundle_of(exe)["plan"]["steps"]
    buffers = [s for s in steps if s["op"] == "command-buffer"]
    assert len(buffers) == 1
    assert sum(s["op"] == "launch" for s in buffers[0]["steps"]) >= 12
    thunks = exe.thunks()
    # the members stay thunks of their own kinds, each naming its command buffer ...
    launches = [t for t in thunks if t.kind == "kernel-launch"]
    assert len(launches) >= 12 and {t.command_buffer for t in launches} == {"command_buffer.1"}
    # ... and the text shows them under it, as XLA prints a command buffer thunk
    text = str(thunks).splitlines()
    head = next(i for i, line in enumerate(text) if line.startswith("command-buffer"))
    assert "command_buffer.1" in text[head]
    assert all(line.startswith("  ") for line in text[head + 1:head + 13])
    plan_text = kiln.compile(jax_program(chain, X), target="gpu").thunks()
    assert "command-buffer" in str(plan_text)


@pytest.fixture
def recording(monkeypatch):
    """Counts of the emulator's recordings, replays and kernels run."""
    counts = {"recorded": 0, "replayed": 0, "kernels": 0}
    runtime = gpu_emulator.EmulatorRuntime
    begin, replay, run = runtime.begin_capture, runtime.launch_graph, runtime._run_kernel

    def counting(key, original):
        def wrapper(self, *args):
            counts[key] += 1
            return original(self, *args)
        return wrapper
    monkeypatch.setattr(runtime, "begin_capture", counting("recorded", begin))
    monkeypatch.setattr(runtime, "launch_graph", counting("replayed", replay))
    monkeypatch.setattr(runtime, "_run_kernel", counting("kernels", run))
    return counts


def test_emulator_records_once_and_replays_with_new_data(recording):
    exe = kiln.compile(jax_program(chain, X), target="gpu-emulator")
    steps = bundle_of(exe)["plan"]["steps"]
    launches = sum(s["op"] == "launch" for s in steps) + sum(
        inner["op"] == "launch" for s in steps if s["op"] == "command-buffer"
        for inner in s["steps"])
    for scale in (1.0, -0.5, 2.0, 3.0):   # the replays read each call's arguments
        np.testing.assert_allclose(exe(X * scale), chain(X * scale), rtol=1e-5, atol=1e-5)
    # the first call's buffers are fresh allocations; from the second call on, the pool
    # hands the same ones back in the same order: recorded no more, replayed each call
    assert recording["recorded"] <= 2 and recording["replayed"] == 4
    recorded = recording["recorded"]
    for _ in range(3):
        exe(X)
    assert recording["recorded"] == recorded and recording["replayed"] == 7
    assert recording["kernels"] == 7 * launches


def test_moved_buffers_are_recorded_again(recording):
    exe = kiln.compile(jax_program(chain, X), target="gpu-emulator")
    invoker = next(iter(exe._cache.values())).invoke.device(0)
    exe(X)
    recorded = recording["recorded"]
    invoker._pool.clear()   # the next call's buffers are new allocations, elsewhere
    np.testing.assert_allclose(exe(X + 1), chain(X + 1), rtol=1e-5, atol=1e-5)
    assert recording["recorded"] == recorded + 1 and recording["replayed"] == 2


def test_command_buffers_in_a_loop_body(recording):
    f = lambda x: lax.fori_loop(0, 4, lambda i, v: chain(v) / 100, x)   # noqa: E731
    exe = kiln.compile(jax_program(f, X), target="gpu-emulator")
    for _ in range(2):
        np.testing.assert_allclose(exe(X), f(X), rtol=1e-4, atol=1e-5)
    assert recording["replayed"] == 8
    # recorded again only while the loop's buffers settle into the pool
    assert recording["recorded"] < recording["replayed"]


class RecordingDriver:
    """The CUDA driver functions the plan uses, recording each call; buffers are numbers."""

    class CUresult:
        CUDA_SUCCESS = 0

    class CUstreamCaptureMode:
        CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1

    def __init__(self):
        self.calls: list[str] = []
        self.next_pointer = 1 << 20

    @staticmethod
    def CUdeviceptr(pointer):   # noqa: N802 - the driver's name
        return pointer

    def __getattr__(self, name):
        if not name.startswith("cu"):
            raise AttributeError(name)

        def call(*args):
            self.calls.append(name)
            if name == "cuMemAlloc":
                self.next_pointer += 1 << 16
                return 0, self.next_pointer
            if name in ("cuModuleLoadData", "cuModuleGetFunction", "cuStreamEndCapture",
                        "cuGraphInstantiate"):
                return 0, f"{name}-handle"
            return (0,)
        return call


def test_cuda_runtime_captures_a_graph_once():
    exe = kiln.compile(jax_program(chain, X), target="gpu")
    bundle = bundle_of(exe)
    runtime = CudaRuntime.__new__(CudaRuntime)   # no device: the recording driver instead
    runtime.cu, runtime.stream, runtime._images = RecordingDriver(), "stream", []
    invoker = PlanInvoker(bundle, lambda: runtime, "chain")
    out = np.empty_like(X)
    invoker([X, out])
    first = runtime.cu.calls
    begin = first.index("cuStreamBeginCapture")
    end = first.index("cuStreamEndCapture")
    launches = first[begin + 1:end]
    assert "cuLaunchKernel" in launches
    assert set(launches) <= {"cuLaunchKernel", "cuMemcpyDtoDAsync"}   # commands only
    assert first[end + 1:end + 3] == ["cuGraphInstantiate", "cuGraphLaunch"]
    runtime.cu.calls = []
    invoker([X, out])
    second = runtime.cu.calls
    # replayed: no capture, no launch of its own, one graph launch
    assert "cuStreamBeginCapture" not in second and "cuLaunchKernel" not in second
    assert second.count("cuGraphLaunch") == 1 and "cuMemAlloc" not in second
