"""The GPU target's device code without a GPU: the PTX of JAX programs assembles with ptxas
for sm_80 and sm_90, within the hardware's limits, and `kiln compile --target gpu` writes an
executable holding the cubin and the plan."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

import kiln
from kiln.driver.artifact import Artifact
from kiln.errors import KilnError
from kiln.lowering.gpu import ptx
from kiln.lowering.llvm_text import for_older_llvm

# sm_80 and sm_90: 255 registers a thread at most, 48 KiB of static shared memory a block.
MAX_REGISTERS = 255
MAX_STATIC_SHARED = 48 * 1024


def jax_program(f, *shapes, dtype=np.float32) -> bytes:
    specs = [jax.ShapeDtypeStruct(s, dtype) for s in shapes]
    return export.export(jax.jit(f))(*specs).serialize()


def transformer_ish(x, w, b):
    h = jax.nn.gelu(x @ w + b)
    return jax.nn.softmax(h, axis=-1), h.sum(), jnp.log1p(jnp.abs(h)).max(0)


PROGRAMS = {
    # name: (function, argument shapes, kernels at least)
    "mlp": (transformer_ish, [(16, 32), (32, 64), (64,)], 5),
    "elementwise": (lambda x: jnp.tanh(x) * jnp.exp(-x * x) + jnp.sqrt(jnp.abs(x)), [(128, 96)], 1),
    "reductions": (lambda x, y: (jax.nn.softmax(x, axis=-1), x.max(1), y.sum(), y.min()),
                   [(64, 1000), (1 << 20,)], 6),
}


def bundle_of(exe) -> dict:
    return json.loads(next(iter(exe._cache.values())).artifact.code)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_ptx_assembles_within_limits(name, arch):
    f, shapes, kernels = PROGRAMS[name]
    exe = kiln.compile(jax_program(f, *shapes), target="gpu", gpu_arch=arch)
    bundle = bundle_of(exe)
    assert f".target {arch}" in bundle["ptx"]
    assert bundle["ptx"].count(".visible .entry") == len(bundle["kernels"]) >= kernels
    cubin = __import__("base64").b64decode(bundle["cubin"])
    assert cubin[:4] == b"\x7fELF"
    resources = {r["name"]: r for r in bundle["resources"]}
    assert set(resources) == set(bundle["kernels"])
    for r in resources.values():
        assert 0 < r["registers"] <= MAX_REGISTERS, r
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0, r
        assert r["shared_bytes"] <= MAX_STATIC_SHARED, r


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_block_reductions_use_shuffles_barriers_and_shared_memory(arch):
    # row sums of 1000 and a full sum of 2^20 (its 1024 partial rows, then the partials):
    # a block per row, 8 warps combined through 8 partials and 8 flags in shared memory
    exe = kiln.compile(jax_program(lambda x, y: (x.sum(1), y.sum()), (64, 1000), (1 << 20,)),
                       target="gpu", gpu_arch=arch)
    bundle = bundle_of(exe)
    text = bundle["ptx"]
    # offsets as immediates: the constants live in the kernels, not in their parameters
    offsets = {int(m) for m in re.findall(r"shfl\.sync\.bfly\.b32\s+%r\d+, %r\d+, (\d+), 31, -1;",
                                          text)}
    assert offsets == {16, 8, 4, 2, 1}
    assert "bar.sync" in text and "st.shared" in text and "ld.shared" in text
    launches = [t.name for t in exe.thunks() if t.kind == "kernel-launch"]
    assert any("grid=(64,1,1) block=(256,1,1)" in n for n in launches)
    assert any("grid=(1024,1,1) block=(256,1,1)" in n for n in launches)
    shared = [r for r in bundle["resources"] if r["shared_bytes"]]
    assert len(shared) == 3   # the row sum and both phases of the full sum
    for r in shared:
        assert r["shared_bytes"] == 2 * 8 * 4, r
        assert 0 < r["registers"] <= 64 and r["spill_stores"] == 0 and r["stack_bytes"] == 0, r


def test_resource_report_parsing():
    report = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k0' for 'sm_90'
ptxas info    : Function properties for k0
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]
"""
    (k,) = ptx.parse_resources(report)
    assert (k.name, k.registers, k.stack_bytes, k.spill_stores, k.spill_loads,
            k.shared_bytes) == ("k0", 40, 8, 4, 12, 2048)


def test_unknown_arch_is_an_error():
    with pytest.raises(KilnError) as info:
        kiln.compile(jax_program(jnp.sin, (4,)), target="gpu", gpu_arch="sm_12")
    assert "sm_12" in str(info.value) and "sm_90" in info.value.hint


def run_cli(*args, check=True):
    done = subprocess.run([sys.executable, "-m", "kiln.cli.main", *map(str, args)],
                          capture_output=True, text=True, timeout=300)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def test_aot_gpu_executable_holds_cubin_and_plan(tmp_path):
    x = np.linspace(-2, 2, 48, dtype=np.float32).reshape(6, 8)
    (tmp_path / "prog.jax").write_bytes(jax_program(lambda x: (jnp.tanh(x), x.sum()), x.shape))
    run_cli("compile", tmp_path / "prog.jax", "--target", "gpu", "--gpu-arch", "sm_80",
            "-o", tmp_path / "prog.kx")
    with zipfile.ZipFile(tmp_path / "prog.kx") as archive:
        manifest = json.loads(archive.read("manifest.json"))
        artifact = Artifact.from_bytes(archive.read("compiled/0.kart"), "prog.kx")
        thunks = archive.read("compiled/0.thunk-sequence.txt").decode()
    assert manifest["target"] == "gpu" and manifest["options"]["gpu_arch"] == "sm_80"
    bundle = json.loads(artifact.code)
    assert bundle["arch"] == "sm_80" and bundle["cubin"] and bundle["plan"]["steps"]
    assert thunks.count("kernel-launch") == len(bundle["plan"]["steps"]) - sum(
        s["op"] != "launch" for s in bundle["plan"]["steps"])
    np.savez(tmp_path / "in.npz", x)
    done = run_cli("run", tmp_path / "prog.kx", "--inputs", tmp_path / "in.npz",
                   "--output", tmp_path / "out.npz", check=False)
    from kiln.runtime.cuda import no_device_reason
    reason = no_device_reason()
    if reason is not None:  # this machine: a one-line error saying so
        assert done.returncode == 1
        assert done.stderr.count("\n") == 1 and "no CUDA device" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
        with np.load(tmp_path / "out.npz") as out:
            np.testing.assert_allclose(out["arr_0"], np.tanh(x), rtol=1e-5, atol=1e-6)


def test_newer_llvm_float_literals_are_rewritten_for_llvmlite():
    # MLIR's LLVM prints f32 constants as raw bits (f0x...), shortest decimals and +inf;
    # llvmlite's LLVM reads only the forms below, which name the same values.
    text = ("  %1 = fcmp oge float %0, 6.168500e-01\n"
            "  %2 = call float @f(float f0x3F800000, float +inf)\n"
            "  %3 = fadd double %x, 6.168500e-01\n"
            "  %4 = fadd half %h, -inf\n")
    lines = for_older_llvm(text).splitlines()
    assert lines[0].endswith("0x3FE3BD3C40000000")    # 0.61685 rounded to f32, as a double
    assert "float 0x3FF0000000000000" in lines[1] and "float 0x7FF0000000000000" in lines[1]
    assert lines[2].endswith("6.168500e-01")          # doubles stay decimal
    assert lines[3].endswith("0xHFC00")
