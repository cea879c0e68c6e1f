"""Kiln shares a process with TensorFlow, PyTorch and JAX in any import order
(python/kiln/mlir_loading.py): each order, in a fresh interpreter, imports them, compiles and
runs a Kiln program with the whole compiler in that process (KILN_COMPILE_IN_PROCESS=1), and
computes something with each framework.

TensorFlow put its LLVM's symbols in the global scope, and torch-mlir's LLVM, loaded after
it, registered its options in TensorFlow's registry and aborted. A test is skipped only when
a framework it names is not installed (the `test` extra installs them all for CI).

Not Kiln's: jaxlib 0.10.2 and TensorFlow 2.21 abort together as soon as JAX computes anything
(`import tensorflow; import jax.numpy as jnp; jnp.ones(3)`, no Kiln involved), so with both
present JAX is only imported, and Kiln's own use of jaxlib (CHLO input) is what runs.
"""
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

FRAMEWORKS = ("tensorflow", "torch", "jax")

# What each framework computes once everything is imported.
USE = {
    "tensorflow": "import tensorflow as tf\nassert float(tf.reduce_sum(tf.ones(3))) == 3.0",
    "torch": "import torch\nassert float(torch.ones(3).sum()) == 3.0",
    "jax": "import jax.numpy as jnp\nassert float(jnp.ones(3).sum()) == 3.0",
    # Not in CI's environment (torch_xla 2.9 needs torch 2.9): run this file as a script in
    # one that has it (see the end of this file).
    "torch_xla": ("import torch, torch_xla\n"
                  "assert float(torch.ones(3, device=torch_xla.device()).sum().cpu()) == 3.0"),
}

# A program with a CHLO op (Kiln converts CHLO through jaxlib's MLIR when jax is there) and an
# mhlo.erf custom call, as torch_xla writes it.
PROGRAM = """
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = stablehlo.custom_call @mhlo.erf(%x) {mhlo.attributes = {}, mhlo.version = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = stablehlo.exponential %x : tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}
"""
CHLO_PROGRAM = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = chlo.erf_inv %x : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def _script(order) -> str:
    lines = [f"import {name}" for name in order]
    lines.append(textwrap.dedent(f"""
        import math
        import numpy as np
        import kiln
        x = np.array([0.1, 0.2, -0.3, 0.5], np.float32)
        erf, exp = kiln.compile({PROGRAM!r})(x)
        assert np.allclose(erf, [math.erf(v) for v in x], atol=1e-6), erf
        assert np.allclose(exp, np.exp(x), rtol=1e-6), exp
    """))
    if "jax" in order:
        lines.append(textwrap.dedent(f"""
            from scipy.special import erfinv
            got = kiln.compile({CHLO_PROGRAM!r})(x)[0]
            assert np.allclose(got, erfinv(x), atol=1e-6), got
        """))
    for name in order:
        if name in USE and not (name == "jax" and "tensorflow" in order):
            lines.append(USE[name])
    lines.append("print('all computed')")
    return "\n".join(lines)


def _run(order, in_process: bool = True):
    missing = [n for n in order if n != "kiln" and importlib.util.find_spec(n) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed")
    result = _subprocess(order, in_process)
    assert result.returncode == 0 and "all computed" in result.stdout, \
        f"order {order}: exit {result.returncode}\n{result.stderr[-3000:]}"


def _subprocess(order, in_process: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if in_process:
        env["KILN_COMPILE_IN_PROCESS"] = "1"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("PJRT_DEVICE", "CPU")  # torch_xla's device
    return subprocess.run([sys.executable, "-c", _script(order)], capture_output=True,
                          text=True, env=env, timeout=600)


# All three frameworks before Kiln (in two orders: the other, FRAMEWORKS then Kiln, is the
# compile-worker test below; TensorFlow right before Kiln is the order that aborted) and after
# it: what matters is which LLVM copies are loaded before torch-mlir's, and these put every
# framework on either side of Kiln. Each order is a fresh interpreter importing TensorFlow
# (9-20 s on CI's 2 cores), so the list is kept short: TensorFlow alone on either side is
# contained in these.
ORDERS = [("kiln", *FRAMEWORKS), (*FRAMEWORKS[::-1], "kiln")]


@pytest.mark.parametrize("order", ORDERS, ids=lambda o: "-".join(o))
def test_import_order(order):
    _run(order)


def test_frameworks_first_with_compile_workers():
    """The ordinary path: compiles in a worker process, the caller links the code in."""
    _run((*FRAMEWORKS, "kiln"), in_process=False)


def test_private_loading_is_what_makes_tensorflow_first_work():
    """Without it (KILN_MLIR_DEEPBIND=0) the abort comes back: the test above is not passing
    by accident."""
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow not installed")
    env = dict(os.environ, KILN_MLIR_DEEPBIND="0", KILN_COMPILE_IN_PROCESS="1",
               TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, "-c", "import tensorflow\nimport kiln"],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode != 0
    assert "registered more than once" in result.stderr


def test_importing_kiln_loads_torch_mlir_privately():
    code = textwrap.dedent("""
        import kiln
        from kiln import mlir_loading
        assert mlir_loading._handle is not None
        import os
        maps = open('/proc/self/maps').read()
        assert maps.count(mlir_loading.LIBRARY) >= 1
        # one copy: torch_mlir's extension modules use the library loaded first
        paths = {line.split()[-1] for line in maps.splitlines() if mlir_loading.LIBRARY in line}
        assert len(paths) == 1, paths
        print('ok')
    """)
    if not hasattr(os, "RTLD_DEEPBIND"):
        pytest.skip("no RTLD_DEEPBIND on this platform (nothing to load privately)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]


if __name__ == "__main__":
    # python tests/py/test_import_order.py tensorflow torch torch_xla jax kiln
    # One order, in an environment with other frameworks than CI's (torch_xla's).
    order = tuple(sys.argv[1:])
    done = _subprocess(order, in_process=True)
    print(f"{' '.join(order)}: {'computed' if done.returncode == 0 and 'all computed' in done.stdout else 'FAILED'}")
    if done.returncode:
        print(done.stderr[-3000:])
    sys.exit(done.returncode)
