"""Compiles run in worker processes: a crash or a hang in the compiler becomes a KilnError
naming the stage and pass, with a reproducer, and the caller lives on."""
from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln import KilnError

import compile_faults

ADD = """func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %x, %y : tensor<4xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}"""


def test_a_crashing_pass_is_a_kiln_error_with_a_reproducer(tmp_path):
    with pytest.raises(KilnError) as caught:
        kiln.compile(ADD, dump_dir=tmp_path,
                     extra_passes={"bufferize": [compile_faults.segfault]})
    message = str(caught.value)
    assert "crashed (SIGSEGV)" in message
    assert "stage 'bufferize', pass 'py-segfault'" in message
    path = Path(re.search(r"reproducer: (\S+\.mlir)", message).group(1))
    assert path.parent == tmp_path  # with dump_dir, reproducers go beside the dumps
    text = path.read_text()
    assert "Replay: kiln-opt" in text and "py-segfault" in text
    # The reproducer is the input of the crashing pass: bufferized already, since it runs
    # after the stage's upstream passes.
    assert "memref" in text and "stablehlo.add" not in text
    # ... and the process that asked is still here and compiles on.
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(kiln.compile(ADD)(x, x)[0], (2 * x) ** 2)


def test_a_hanging_compile_times_out(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_COMPILE_TIMEOUT", "3")
    with pytest.raises(KilnError, match=r"did not finish in 3 s .*stage 'legalize', pass 'py-spin'"):
        kiln.compile(ADD, dump_dir=tmp_path, extra_passes={"legalize": [compile_faults.spin]})


def test_a_crash_in_a_script_leaves_the_script_running(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(
        "import sys, kiln\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import compile_faults\n"
        "try:\n"
        f"    kiln.compile({ADD!r}, extra_passes={{'fuse': [compile_faults.segfault]}})\n"
        "except kiln.KilnError as exc:\n"
        "    print('caught:', exc.one_line())\n"
        "print('still alive')\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "caught:" in done.stdout and "stage 'fuse'" in done.stdout
    assert "still alive" in done.stdout


def test_threads_compile_in_parallel_workers():
    programs = [ADD.replace("stablehlo.multiply", op)
                for op in ("stablehlo.multiply", "stablehlo.subtract", "stablehlo.maximum")]
    results, errors = {}, []

    def compile_one(i, text):
        try:
            results[i] = kiln.compile(text, filename=f"<thread {i}>")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=compile_one, args=(i, p)) for i, p in enumerate(programs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    x, y = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    s = x + y
    for i, expected in enumerate([s * s, s - s, np.maximum(s, s)]):
        np.testing.assert_allclose(results[i](x, y)[0], expected)


def test_lambdas_in_extra_passes_compile_in_process():
    seen = []
    exe = kiln.compile(ADD, extra_passes={"fuse": [lambda module: seen.append(True)]})
    assert seen == [True]  # it ran here: a lambda cannot be sent to a worker
    x = np.ones(4, np.float32)
    np.testing.assert_allclose(exe(x, x)[0], 4 * x)


def test_a_users_pass_exception_reaches_the_user_unchanged():
    with pytest.raises(compile_faults.PassFailed, match="my pass gave up"):
        kiln.compile(ADD, extra_passes={"optimize": [compile_faults.raises]})


def test_functions_of_a_script_compile_in_process(tmp_path):
    # A script's own pass is `__main__.mark` to pickle, a name no worker has: it runs here.
    marker = tmp_path / "ran"
    script = tmp_path / "script.py"
    script.write_text(
        "import kiln, numpy as np\n"
        f"def mark(module):\n    open({str(marker)!r}, 'w').close()\n"
        f"exe = kiln.compile({ADD!r}, extra_passes={{'fuse': [mark]}})\n"
        "x = np.ones(4, np.float32)\n"
        "print(exe(x, x)[0].tolist())\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[4.0, 4.0, 4.0, 4.0]" and marker.exists()
