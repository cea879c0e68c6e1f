"""`kiln.compile` of a source in one trip to a compile worker (driver/front.py): the worker's
child imports the untrusted input and compiles it; the caller parses nothing, and a cached
compile needs neither a parse nor a worker."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln.driver import worker

AFFINE = """func.func @main(%x: tensor<3x4xf32>, %w: tensor<4x2xf32>) -> tensor<3x2xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %1 = stablehlo.tanh %0 : tensor<3x2xf32>
  return %1 : tensor<3x2xf32>
}"""


def _portable(text: str) -> bytes:
    from torch_mlir._mlir_libs import _stablehlo
    return bytes(_stablehlo.serialize_portable_artifact_str(text, _stablehlo.get_current_version()))


def _refuse(*args, **kwargs):
    raise AssertionError("the caller parsed the program")


def test_the_caller_makes_no_context_and_reads_nothing(monkeypatch):
    import kiln.context
    import kiln.frontend.untrusted as untrusted
    monkeypatch.setenv("KILN_CACHE", "0")
    monkeypatch.setattr(kiln.context, "make_context", _refuse)
    monkeypatch.setattr(untrusted, "read_in_child", _refuse)
    exe = kiln.compile(_portable(AFFINE.replace("tanh", "negate")), filename="affine.mlirbc")
    x, w = np.ones((3, 4), np.float32), np.full((4, 2), 0.5, np.float32)
    np.testing.assert_allclose(exe(x, w)[0], np.full((3, 2), -2.0))
    assert [str(s) for s in exe.arg_specs] == ["tensor<3x4xf32>", "tensor<4x2xf32>"]
    assert exe.filename == "affine.mlirbc" and exe.origins == {((3, 4), (4, 2)): "compiled"}
    monkeypatch.undo()
    assert "stablehlo.negate" in exe.ir()  # parsed here only when asked


def test_a_cached_source_needs_no_worker(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    source = AFFINE.replace("tanh", "exponential")
    kiln.compile(source, filename="cached.mlir")
    assert len(list(tmp_path.glob("*.kart"))) == 1
    monkeypatch.setattr(worker, "import_in_worker", _refuse)
    exe = kiln.compile(source, filename="cached.mlir")
    assert list(exe.origins.values()) == ["cache"]
    x, w = np.ones((3, 4), np.float32), np.zeros((4, 2), np.float32)
    np.testing.assert_allclose(exe(x, w)[0], np.ones((3, 2)))
    # Another name is another source (its locations differ): compiled, not found.
    monkeypatch.undo()
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    assert list(kiln.compile(source, filename="other.mlir").origins.values()) == ["compiled"]


def test_a_dynamic_source_is_imported_in_one_trip_and_compiled_per_shape(monkeypatch):
    import kiln.context
    monkeypatch.setenv("KILN_CACHE", "0")
    monkeypatch.setattr(kiln.context, "make_context", _refuse)
    exe = kiln.compile("func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {\n"
                       "  %0 = stablehlo.sine %x : tensor<?xf32>\n  return %0 : tensor<?xf32>\n}")
    assert exe.origins == {}  # nothing to compile until the shapes are known
    x = np.linspace(0, 1, 5, dtype=np.float32)
    np.testing.assert_allclose(exe(x)[0], np.sin(x), rtol=1e-6)


def test_import_errors_from_the_worker_keep_their_location():
    with pytest.raises(kiln.KilnError) as caught:
        kiln.compile("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                     "  %0 = stablehlo.no_such_op %x : tensor<4xf32>\n"
                     "  return %0 : tensor<4xf32>\n}", filename="bad.mlir")
    assert caught.value.location.startswith("bad.mlir:2")


def _pipes(pid: int) -> set[str]:
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("pipe:"):
            found.add(target)
    return found


def test_the_child_forked_ahead_holds_none_of_the_servers_pipes(monkeypatch):
    # Else a server that died while its child waits would not read as dead to the caller
    # (no end of file): the next compile would hang instead of replacing it.
    monkeypatch.setenv("KILN_CACHE", "0")
    kiln.compile(AFFINE.replace("tanh", "abs"))
    with worker._pool_lock:
        server = worker._idle[-1]
    pid = server.process.pid
    own = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in (0, 1)}
    deadline = time.monotonic() + 10
    while True:
        # The next compile's child is forked once the answer has gone, and its first step
        # puts /dev/null over the server's pipes; the child that answered may still be
        # exiting. Wait for the steady state: children, none holding those pipes.
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        holding = [c for c in children if own & _pipes(int(c))]
        if (children and not holding) or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert children
    assert not holding, f"children {holding} of the server hold its pipes {own}"
    # Killed alone, the server is replaced and the next compile works.
    os.kill(pid, signal.SIGKILL)
    exe = kiln.compile(AFFINE.replace("tanh", "floor"))
    x, w = np.full((3, 4), 0.3, np.float32), np.ones((4, 2), np.float32)
    np.testing.assert_allclose(exe(x, w)[0], np.ones((3, 2)))
