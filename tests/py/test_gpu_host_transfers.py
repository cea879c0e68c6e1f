"""send/recv and infeed/outfeed on the GPU plan, host-staged like the collectives: each is a
plan step that downloads its operands, runs Kiln's collective runtime on the host (the
channels of the fabric, the Executable's infeed/outfeed queues) and uploads its results;
tokens carry no data and get no buffer. The programs of test_multi_device.py's host-queue
tests, and send/recv between two devices (threads meeting on the fabric), run through
`target="gpu-emulator"` and are compared with the CPU target's results."""
from __future__ import annotations

import json

import numpy as np
import pytest

import kiln
from kiln.errors import KilnError

TARGETS = ("cpu", "gpu-emulator")


def program(body: str, replicas: int = 1, args: str = "%x: tensor<4xf32>",
            results: str = "tensor<4xf32>") -> str:
    return (f"module attributes {{mhlo.num_replicas = {replicas} : i32, mhlo.num_partitions = "
            f"1 : i32}} {{\n  func.func @main({args}) -> {results} {{\n{body}\n  }}\n}}")


FEEDS = program("""    %t = stablehlo.after_all : !stablehlo.token
    %v, %t1 = "stablehlo.infeed"(%t) : (!stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)
    %s = stablehlo.add %v, %x : tensor<4xf32>
    %t2 = "stablehlo.outfeed"(%s, %t1) : (tensor<4xf32>, !stablehlo.token) -> !stablehlo.token
    return %s : tensor<4xf32>""")


def test_infeed_and_outfeed_are_the_executables_host_queues():
    # test_multi_device.py's program, on both targets
    for target in TARGETS:
        exe = kiln.compile(FEEDS, target=target)
        exe.infeed(np.full(4, 2.0, np.float32))
        out = exe(np.ones(4, np.float32))
        np.testing.assert_array_equal(out[0], np.full(4, 3.0), err_msg=target)
        (sent,) = exe.outfeed()
        np.testing.assert_array_equal(sent, np.full(4, 3.0), err_msg=target)
        with pytest.raises(KilnError, match="no outfeed"):
            exe.outfeed()


def test_feeds_of_several_arrays_in_a_loop_match_the_cpu(rng):
    # each iteration takes two arrays (f32 and i32) from the queue and sends back their
    # combination: the host-staged steps run inside the plan's while loop, in order
    body = """    %zero = stablehlo.constant dense<0> : tensor<i32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %three = stablehlo.constant dense<3> : tensor<i32>
    %zf = stablehlo.constant dense<0.0> : tensor<f32>
    %r:2 = stablehlo.while(%i = %zero, %acc = %x) : tensor<i32>, tensor<4xf32>
    cond {
      %p = stablehlo.compare LT, %i, %three : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %tok = stablehlo.after_all : !stablehlo.token
      %a, %n, %t1 = "stablehlo.infeed"(%tok) : (!stablehlo.token) -> (tensor<4xf32>, tensor<2xi32>, !stablehlo.token)
      %nf = stablehlo.convert %n : (tensor<2xi32>) -> tensor<2xf32>
      %s = stablehlo.reduce(%nf init: %zf) applies stablehlo.add across dimensions = [0] : (tensor<2xf32>, tensor<f32>) -> tensor<f32>
      %sb = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<4xf32>
      %m = stablehlo.multiply %a, %acc : tensor<4xf32>
      %next = stablehlo.add %m, %sb : tensor<4xf32>
      %t2 = "stablehlo.outfeed"(%next, %n, %t1) : (tensor<4xf32>, tensor<2xi32>, !stablehlo.token) -> !stablehlo.token
      %j = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %j, %next : tensor<i32>, tensor<4xf32>
    }
    return %r#1 : tensor<4xf32>"""
    feeds = [(rng.standard_normal(4).astype(np.float32), np.array([k, 2 * k], np.int32))
             for k in range(1, 4)]
    x = rng.standard_normal(4).astype(np.float32)
    seen = {}
    for target in TARGETS:
        exe = kiln.compile(program(body), target=target)
        for a, n in feeds:
            exe.infeed(a, n)
        (out,) = exe(x)
        seen[target] = (out, [exe.outfeed() for _ in feeds])
    want = x
    for a, n in feeds:
        want = a * want + n.sum()
    np.testing.assert_allclose(seen["gpu-emulator"][0], want, rtol=1e-5)
    np.testing.assert_array_equal(seen["gpu-emulator"][0], seen["cpu"][0])
    for (g, gn), (c, cn) in zip(seen["gpu-emulator"][1], seen["cpu"][1]):
        np.testing.assert_array_equal(g, c)
        np.testing.assert_array_equal(gn, cn)
        assert gn.dtype == np.int32


def test_an_infeed_nothing_fills_is_an_error_after_the_timeout(monkeypatch):
    monkeypatch.setenv("KILN_COLLECTIVE_TIMEOUT", "0.2")
    body = """    %t = stablehlo.after_all : !stablehlo.token
    %v, %t1 = "stablehlo.infeed"(%t) : (!stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)
    return %v : tensor<4xf32>"""
    exe = kiln.compile(program(body, args=""), target="gpu-emulator")
    with pytest.raises(KilnError, match="host queue stayed empty"):
        exe()


def test_each_device_has_its_own_queues():
    exes = {t: kiln.compile(program(FEEDS.split("{\n", 2)[2].rsplit("\n  }", 2)[0],
                                    replicas=2), target=t) for t in TARGETS}
    results = {}
    for target, exe in exes.items():
        for device in range(2):
            exe.infeed(np.full(4, 10.0 * (device + 1), np.float32), device=device)
        out = exe.run_devices([[np.full(4, d, np.float32)] for d in range(2)])
        results[target] = (out, [exe.outfeed(device=d)[0] for d in range(2)])
    (out, fed) = results["gpu-emulator"]
    np.testing.assert_array_equal(out[0][0], np.full(4, 10.0))
    np.testing.assert_array_equal(out[1][0], np.full(4, 21.0))
    for d in range(2):
        np.testing.assert_array_equal(out[d][0], results["cpu"][0][d][0])
        np.testing.assert_array_equal(fed[d], results["cpu"][1][d])


CHANNEL = "#stablehlo.channel_handle<handle = 1, type = 1>"
SEND_RECV = program(f"""    %id = stablehlo.replica_id : tensor<ui32>
    %zero = stablehlo.constant dense<0> : tensor<ui32>
    %p = stablehlo.compare EQ, %id, %zero : (tensor<ui32>, tensor<ui32>) -> tensor<i1>
    %t = stablehlo.after_all : !stablehlo.token
    %r = "stablehlo.if"(%p) ({{
      %e = stablehlo.exponential %x : tensor<4xf32>
      %t2 = "stablehlo.send"(%e, %t) {{channel_handle = {CHANNEL}, is_host_transfer = false}} : (tensor<4xf32>, !stablehlo.token) -> !stablehlo.token
      stablehlo.return %x : tensor<4xf32>
    }}, {{
      %v, %t3 = "stablehlo.recv"(%t) {{channel_handle = {CHANNEL}, is_host_transfer = false}} : (!stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)
      %y = stablehlo.add %v, %x : tensor<4xf32>
      stablehlo.return %y : tensor<4xf32>
    }}) : (tensor<i1>) -> tensor<4xf32>
    return %r : tensor<4xf32>""", replicas=2)


def test_send_and_recv_between_two_devices_match_the_cpu():
    # device 0 sends exp(x0) on channel 1; device 1 receives it and adds its own x
    xs = [np.linspace(-1, 1, 4, dtype=np.float32), np.full(4, 10, np.float32)]
    got = {t: kiln.compile(SEND_RECV, target=t).run_devices([[x] for x in xs]) for t in TARGETS}
    emulated = got["gpu-emulator"]
    np.testing.assert_array_equal(emulated[0][0], xs[0])
    np.testing.assert_allclose(emulated[1][0], np.exp(xs[0]) + xs[1], rtol=1e-6)
    for d in range(2):
        np.testing.assert_array_equal(emulated[d][0], got["cpu"][d][0])


def test_a_stream_of_sends_through_a_loop_arrives_in_order():
    # device 0 sends x * k for k = 1, 2, 3; device 1 receives each in turn: out = sum of
    # what it received, weighted by the iteration (order matters)
    body = f"""    %id = stablehlo.replica_id : tensor<ui32>
    %uzero = stablehlo.constant dense<0> : tensor<ui32>
    %first = stablehlo.compare EQ, %id, %uzero : (tensor<ui32>, tensor<ui32>) -> tensor<i1>
    %zero = stablehlo.constant dense<0.0> : tensor<4xf32>
    %one = stablehlo.constant dense<1.0> : tensor<f32>
    %i0 = stablehlo.constant dense<1.0> : tensor<f32>
    %four = stablehlo.constant dense<4.0> : tensor<f32>
    %r:2 = stablehlo.while(%i = %i0, %acc = %zero) : tensor<f32>, tensor<4xf32>
    cond {{
      %p = stablehlo.compare LT, %i, %four : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    }} do {{
      %ib = stablehlo.broadcast_in_dim %i, dims = [] : (tensor<f32>) -> tensor<4xf32>
      %tok = stablehlo.after_all : !stablehlo.token
      %step = "stablehlo.if"(%first) ({{
        %v = stablehlo.multiply %x, %ib : tensor<4xf32>
        %t2 = "stablehlo.send"(%v, %tok) {{channel_handle = {CHANNEL}, is_host_transfer = false}} : (tensor<4xf32>, !stablehlo.token) -> !stablehlo.token
        stablehlo.return %acc : tensor<4xf32>
      }}, {{
        %v, %t3 = "stablehlo.recv"(%tok) {{channel_handle = {CHANNEL}, is_host_transfer = false}} : (!stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)
        %w = stablehlo.multiply %v, %ib : tensor<4xf32>
        %a = stablehlo.add %acc, %w : tensor<4xf32>
        stablehlo.return %a : tensor<4xf32>
      }}) : (tensor<i1>) -> tensor<4xf32>
      %j = stablehlo.add %i, %one : tensor<f32>
      stablehlo.return %j, %step : tensor<f32>, tensor<4xf32>
    }}
    return %r#1 : tensor<4xf32>"""
    xs = [np.array([1, 2, 3, 4], np.float32), np.zeros(4, np.float32)]
    got = {t: kiln.compile(program(body, replicas=2), target=t).run_devices([[x] for x in xs])
           for t in TARGETS}
    emulated = got["gpu-emulator"]
    np.testing.assert_array_equal(emulated[0][0], np.zeros(4))
    np.testing.assert_array_equal(emulated[1][0], xs[0] * (1 + 4 + 9))
    for d in range(2):
        np.testing.assert_array_equal(emulated[d][0], got["cpu"][d][0])


def test_the_gpu_target_plans_host_transfers_as_host_staged_steps():
    exe = kiln.compile(SEND_RECV, target="gpu", gpu_arch="sm_80")
    bundle = json.loads(next(iter(exe._cache.values())).artifact.code)
    (conditional,) = [s for s in bundle["plan"]["steps"] if s["op"] == "if"]
    calls = [s for region in conditional["regions"] for s in region["steps"]
             if s["op"] == "custom-call"]
    assert [(c["target"], c["host_staged"]) for c in calls] == [
        ("kiln.collective.send", True), ("kiln.collective.recv", True)]
    assert [len(c["operands"]) for c in calls] == [1, 0]   # tokens have no buffer
    assert [len(c["results"]) for c in calls] == [0, 1]
    assert bundle["cubin"]
    text = str(exe.thunks())
    assert "kiln.collective.send" in text and "kiln.collective.recv" in text
    # the plan as text shows the steps host-staged
    from kiln.runtime.gpu_plan import describe
    assert "custom-call kiln.collective.recv (host-staged)" in describe(bundle)
