"""Host control flow in the GPU execution plan: `while`, `case` and `if` whose predicate the
device computes run as plan steps (lowering/gpu/control_flow.py, lowering/gpu/host.py), the
predicate read back each time, as XLA's while thunk does. Results of JAX programs in the
emulator against JAX; the kernels' PTX through ptxas."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax

import kiln
from kiln.runtime.gpu_plan import describe

MAX_REGISTERS = 255


def jax_program(f, *args) -> bytes:
    specs = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in args]
    return export.export(jax.jit(f))(*specs).serialize()


def check(f, *args, rtol=1e-5, atol=1e-5):
    exe = kiln.compile(jax_program(f, *args), target="gpu-emulator")
    got = exe(*args)
    got = got if isinstance(got, tuple) else (got,)
    want = f(*args)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                   atol=atol)
    return exe


def plan_of(exe) -> dict:
    return __import__("json").loads(next(iter(exe._cache.values())).artifact.code)["plan"]


def steps_of(plan: dict, op: str) -> list[dict]:
    """Every step of kind `op`, nested ones too."""
    from kiln.runtime.gpu_plan import nested_regions
    found, pending = [], list(plan["steps"])
    while pending:
        step = pending.pop()
        if step["op"] == op:
            found.append(step)
        for region in nested_regions(step):
            pending.extend(region["steps"])
    return found


X = np.linspace(-1.5, 2.0, 40, dtype=np.float32).reshape(8, 5)


def nested(x):
    def inner(j, w):
        return w * 1.25 - jnp.float32(j)
    return lax.fori_loop(0, 3, lambda i, v: lax.fori_loop(0, 4, inner, v) + i, x)


PROGRAMS = {
    "fori_loop": lambda x: lax.fori_loop(0, 5, lambda i, v: jnp.tanh(v) * 2 + 1, x),
    # the predicate is a full reduction the device computes each iteration
    "while_on_device_sum": lambda x: lax.while_loop(lambda v: jnp.abs(v).sum() < 1e3,
                                                    lambda v: v * 1.7 + 0.5, x),
    "while_tuple_carry": lambda x: lax.while_loop(
        lambda c: (c[0] < 10) & (c[1].max() < 50.0), lambda c: (c[0] + 1, c[1] * 1.5 + 1),
        (0, x))[1],
    "nested_loops": nested,
    # softmax rows and a mean: block reductions inside the loop body
    "loop_around_reductions": lambda x: lax.fori_loop(
        0, 3, lambda i, v: jax.nn.softmax(v, axis=-1) * 4 - v.mean(), x),
    # the counter is a kernel argument the host computes
    "counter_in_kernel": lambda x: lax.fori_loop(
        0, 6, lambda i, v: v + i.astype(jnp.float32) * x, x),
    # a scalar crosses kernels in the body (loaded, then stored at a computed index)
    "dynamic_update_in_loop": lambda x: lax.fori_loop(
        0, 8, lambda i, v: v.at[i].set(v[i] * 10 + 1), x.reshape(-1)),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_loops_match_jax(name):
    exe = check(PROGRAMS[name], X, rtol=1e-4, atol=1e-4)
    assert steps_of(plan_of(exe), "while")


def test_a_device_predicate_is_downloaded_each_iteration():
    exe = check(PROGRAMS["while_on_device_sum"], X, rtol=1e-4, atol=1e-3)
    (loop,) = steps_of(plan_of(exe), "while")
    downloads = [s for s in loop["before"]["steps"] if s["op"] == "download"]
    assert len(downloads) == 1 and downloads[0]["type"] == "f32"
    # the comparison with 1e3 runs on the host, on the downloaded sum
    assert any(s["op"] == "scalar" and s["name"] == "arith.cmpf" for s in loop["before"]["steps"])
    thunks = exe.thunks()
    assert [t.kind for t in thunks][0] == "while"
    condition, body = thunks[0].nested
    assert "memcpy-d2h" in [t.kind for t in condition]
    assert all(t.kind in ("kernel-launch", "memcpy-d2d") for t in body)
    text = str(thunks)
    assert "while" in text and "region 0:" in text and "memcpy-d2h" in text


@pytest.mark.parametrize("p", [-3, 0, 1])
def test_cond_on_a_device_predicate(p):
    exe = check(lambda p, x: lax.cond(p > 0, lambda v: jnp.exp(v) + 1, lambda v: v * 3, x),
                np.int32(p), X)
    assert steps_of(plan_of(exe), "switch") or steps_of(plan_of(exe), "if")


@pytest.mark.parametrize("index", [-1, 0, 1, 2, 7])
def test_switch_clamps_like_jax(index):
    branches = [lambda v: v + 1, lambda v: jnp.sin(v) * 3, lambda v: -v.sum(0) + v]
    exe = check(lambda i, x: lax.switch(i, branches, x), np.int32(index), X)
    (switch,) = steps_of(plan_of(exe), "switch")
    assert switch["cases"] == [0, 1] and len(switch["regions"]) == 3
    assert "conditional index" in describe({"plan": plan_of(exe)})


def test_loop_carried_buffers_are_reused_across_iterations():
    # 200 iterations, a fresh result buffer each in the program: the plan's pool hands the
    # freed ones back, so the device memory stays that of a few iterations
    exe = check(lambda x: lax.fori_loop(0, 200, lambda i, v: v * 0.99 + 0.01, x), X)
    invoker = next(iter(exe._cache.values())).invoke.device(0)
    assert len(invoker._sizes) < 12   # every device buffer the calls ever allocated
    exe(X)
    assert len(invoker._sizes) < 12


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_kernels_of_control_flow_assemble(arch):
    source = jax_program(lambda p, x: lax.cond(p > 0, PROGRAMS["loop_around_reductions"],
                                               PROGRAMS["while_on_device_sum"], x),
                         np.int32(1), X)
    exe = kiln.compile(source, target="gpu", gpu_arch=arch)
    bundle = __import__("json").loads(next(iter(exe._cache.values())).artifact.code)
    assert bundle["cubin"] and f".target {arch}" in bundle["ptx"]
    assert steps_of(bundle["plan"], "while") and steps_of(bundle["plan"], "download")
    for r in bundle["resources"]:
        assert r["registers"] <= MAX_REGISTERS and r["spill_stores"] == 0, r
