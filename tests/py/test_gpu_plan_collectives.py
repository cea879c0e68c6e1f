"""Collectives on the GPU plan, host-staged: each `kiln.collective.*` call is a plan step that
downloads its operands, runs Kiln's collective runtime on the host as the CPU target does,
and uploads its results; the devices are threads meeting on the fabric. The JAX programs
of test_multi_device.py (shard_map collectives, jit with shardings) in the emulator,
against JAX's own results."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kiln

HERE = Path(__file__).parent
PROGRAMS = ["psum_2", "psum_4", "all_gather_2", "ppermute_4", "psum_scatter_2",
            "all_to_all_4", "pmax_index_2", "mesh2x2_psum_y", "jit_shardings_2", "gspmd_psum_2"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_multi_device")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    done = subprocess.run([sys.executable, str(HERE / "multi_device" / "make_programs.py"),
                           str(out)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.parametrize("name", PROGRAMS)
def test_jax_collectives_on_the_emulated_gpu_match_jax(exported, name):
    inputs = np.load(exported / f"{name}.in.npz")
    expected = np.load(exported / f"{name}.out.npz")
    exe = kiln.compile((exported / f"{name}.jax").read_bytes(), filename=name,
                       target="gpu-emulator")
    got = exe(*[inputs[f"arr_{i}"] for i in range(len(inputs.files))])
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(expected.files)
    for g, i in zip(got, range(len(expected.files))):
        e = expected[f"arr_{i}"]
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


ALL_REDUCE = """module @m attributes {mhlo.num_replicas = 2 : i32} {
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<ui32>) {
  %e = stablehlo.exponential %x : tensor<4xf32>
  %y = "stablehlo.all_reduce"(%e) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %r = stablehlo.replica_id : tensor<ui32>
  %z = stablehlo.add %y, %y : tensor<4xf32>
  return %z, %r : tensor<4xf32>, tensor<ui32>
}
}"""


def test_all_reduce_between_kernels_on_two_devices():
    exe = kiln.compile(ALL_REDUCE, target="gpu-emulator")
    assert exe.num_devices == 2
    x = np.linspace(-1, 1, 4, dtype=np.float32)
    per_device = exe.run_devices([[x], [2 * x]])
    for device, (total, replica) in enumerate(per_device):
        np.testing.assert_allclose(total, 2 * (np.exp(x) + np.exp(2 * x)), rtol=1e-6)
        assert replica.dtype == np.uint32 and int(replica) == device
    calls = [t for t in exe.thunks() if t.kind == "custom-call"]
    assert [t.target for t in calls] == ["kiln.collective.all_reduce",
                                         "kiln.collective.device_id"]
    assert calls[0].reads and calls[0].writes
