"""Large f32/f64 products through the runtime's pooled entry (runtime/kiln_gemm_pooled.c): in
pieces on Kiln's pool, and (the largest, on an idle machine) on the library's own threads, the
same results as numpy for every layout, odd sizes and batches. KILN_SHARED_CORES fixes the
idle/busy answer for a process, so each runs in a subprocess of its own (STEPS below)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kiln.lowering.codegen import blas_library

pytestmark = pytest.mark.skipif(blas_library() is None, reason="no BLAS library: products stay loops")

# (lhs, rhs, dot_general dims, numpy einsum): plain, A^T, B^T, both, wide, tall, odd sizes not
# on multiples of 16, a batch, f64
CASES = [
    ((300, 200), (200, 260), "contracting_dims = [1] x [0]", "mk,kn->mn"),
    ((200, 300), (200, 260), "contracting_dims = [0] x [0]", "km,kn->mn"),
    ((300, 200), (260, 200), "contracting_dims = [1] x [1]", "mk,nk->mn"),
    ((200, 300), (260, 200), "contracting_dims = [0] x [1]", "km,nk->mn"),
    ((70, 256), (256, 1000), "contracting_dims = [1] x [0]", "mk,kn->mn"),
    ((1000, 256), (256, 70), "contracting_dims = [1] x [0]", "mk,kn->mn"),
    ((3, 130, 97), (3, 97, 211), "batching_dims = [0] x [0], contracting_dims = [2] x [1]",
     "bmk,bkn->bmn"),
]

STEPS = r'''
import ctypes, json, sys
import numpy as np
import kiln
from kiln.runtime.custom_call import runtime

cases = json.loads(sys.argv[1])
rng = np.random.default_rng(0)
worst = 0.0
for lhs, rhs, dims, spec in cases:
    for et, dtype, rtol in (("f32", np.float32, 2e-5), ("f64", np.float64, 1e-12)):
        out = np.einsum(spec, np.zeros(lhs), np.zeros(rhs)).shape
        t = lambda s: "tensor<" + "x".join(map(str, s)) + "x" + et + ">"
        src = (f"func.func @main(%a: {t(lhs)}, %b: {t(rhs)}) -> {t(out)} {{\n"
               f"  %0 = stablehlo.dot_general %a, %b, {dims} : ({t(lhs)}, {t(rhs)}) -> {t(out)}\n"
               f"  return %0 : {t(out)}\n}}")
        exe = kiln.compile(src)
        assert ("kiln_sgemm_pooled" if et == "f32" else "kiln_dgemm_pooled") \
            in exe.ir("codegen"), (lhs, rhs, et)
        a, b = rng.standard_normal(lhs).astype(dtype), rng.standard_normal(rhs).astype(dtype)
        got = np.asarray(exe(a, b)[0])
        want = np.einsum(spec, a.astype(np.float64), b.astype(np.float64))
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 50)
stats = (ctypes.c_int64 * 2)()
runtime().KilnPooledProductStats(stats)
print(json.dumps({"library_threads": stats[0], "pieces": stats[1]}))
'''


# 2^29 multiply-adds: the size from which an idle machine's products go to the library's threads
LARGEST = [((1024, 512), (512, 1024), "contracting_dims = [1] x [0]", "mk,kn->mn")]


def calls(cases) -> int:
    """One call per product, one product per batch element, in f32 and in f64."""
    return 2 * sum(lhs[0] if len(lhs) == 3 else 1 for lhs, *_ in cases)


def run_steps(shared: str, threads: str, cases=CASES) -> dict:
    env = dict(os.environ, KILN_SHARED_CORES=shared, KILN_NUM_THREADS=threads)
    proc = subprocess.run([sys.executable, "-c", STEPS, json.dumps(cases)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize("threads", ["2", "3"])
def test_products_in_pieces_match_numpy(threads):
    # a pool of 2 or 3 threads whatever the machine's cores: every grid shape gets cut
    seen = run_steps("1", threads, CASES + LARGEST)
    assert seen == {"library_threads": 0, "pieces": calls(CASES + LARGEST)}


def test_the_largest_products_on_an_idle_machine_take_the_library_threads():
    seen = run_steps("0", "2", CASES + LARGEST)
    assert seen == {"library_threads": calls(LARGEST), "pieces": calls(CASES)}
