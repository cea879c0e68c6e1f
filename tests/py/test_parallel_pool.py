"""The runtime's thread pool (runtime/kiln_parallel.c): chunks are claimed, so a caller never
waits for a worker that has not woken, and workers spin briefly between jobs. These tests
drive many parallel-fors back to back (products inside a loop, large elementwise ops),
from several Python threads at once and with more workers than cores, and compare every
result with numpy."""
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np

import kiln

# A scan of products big enough to be shared over the pool (32 x 256 @ 256 x 256 per step,
# kiln_sgemm_small) followed by tanh: a hundred parallel-fors a few microseconds apart.
SCAN = """
func.func @main(%h0: tensor<32x256xf32>, %u: tensor<256x256xf32>) -> tensor<32x256xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %n = stablehlo.constant dense<100> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %h = %h0) : tensor<i32>, tensor<32x256xf32>
    cond {
      %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %d = stablehlo.dot_general %h, %u, contracting_dims = [1] x [0] : (tensor<32x256xf32>, tensor<256x256xf32>) -> tensor<32x256xf32>
      %t = stablehlo.tanh %d : tensor<32x256xf32>
      %j = stablehlo.add %i, %c1 : tensor<i32>
      stablehlo.return %j, %t : tensor<i32>, tensor<32x256xf32>
    }
  return %r#1 : tensor<32x256xf32>
}"""

# One large elementwise op (split over the pool by kiln-parallelize), called many times.
ELEMENTWISE = """
func.func @main(%x: tensor<1048576xf32>) -> tensor<1048576xf32> {
  %0 = stablehlo.multiply %x, %x : tensor<1048576xf32>
  %1 = stablehlo.add %0, %x : tensor<1048576xf32>
  return %1 : tensor<1048576xf32>
}"""


def scan_reference(h, u, steps=100):
    h = h.astype(np.float64)
    for _ in range(steps):
        h = np.tanh(h @ u.astype(np.float64))
    return h


def scan_inputs(seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((32, 256)).astype(np.float32),
            (rng.standard_normal((256, 256)) * 0.06).astype(np.float32))


def test_products_in_a_loop_match_numpy():
    exe = kiln.compile(SCAN)
    h, u = scan_inputs(0)
    (got,) = exe(h, u)
    np.testing.assert_allclose(got, scan_reference(h, u), rtol=2e-4, atol=2e-5)
    # the same answer every time, whichever thread ran which panels
    for _ in range(3):
        np.testing.assert_array_equal(exe(h, u)[0], got)


def test_elementwise_chunks_cover_every_element_back_to_back():
    exe = kiln.compile(ELEMENTWISE)
    x = np.random.default_rng(1).standard_normal(1 << 20).astype(np.float32)
    want = x * x + x
    for _ in range(100):   # calls closer together than a worker's spin window
        (got,) = exe(x)
        np.testing.assert_array_equal(got, want)


def test_callers_on_several_threads_at_once():
    """Only one parallel-for runs at a time; the others run serially on their own thread.
    Every caller still gets its own right answer."""
    scan = kiln.compile(SCAN)
    elementwise = kiln.compile(ELEMENTWISE)
    errors = []

    def work(seed):
        try:
            h, u = scan_inputs(seed)
            x = np.random.default_rng(seed).standard_normal(1 << 20).astype(np.float32)
            want_scan = scan_reference(h, u)
            for _ in range(3):
                np.testing.assert_allclose(scan(h, u)[0], want_scan, rtol=2e-4, atol=2e-5)
                np.testing.assert_array_equal(elementwise(x)[0], x * x + x)
        except Exception as exc:  # noqa: BLE001 - reported below, with the thread's seed
            errors.append((seed, exc))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def _run_with(env: dict) -> None:
    """This file's checks in a fresh process (the pool reads its settings once)."""
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import test_parallel_pool as t
        t.test_products_in_a_loop_match_numpy()
        t.test_elementwise_chunks_cover_every_element_back_to_back()
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_more_workers_than_cores_and_no_spinning():
    """Eight threads on this machine's cores (workers race for chunks and often wake late)
    with a pool that sleeps at once (KILN_SPIN_US=0: every hand-off through the condition
    variables), and three threads that spin."""
    _run_with({"KILN_NUM_THREADS": "8", "KILN_SPIN_US": "0"})
    _run_with({"KILN_NUM_THREADS": "3"})
