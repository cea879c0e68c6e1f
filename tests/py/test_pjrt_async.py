"""Concurrent calls through Kiln's PJRT plugin (JAX_PLATFORMS=kiln): 8 Python threads
compiling and calling at once, result buffers fed back as arguments, donation and
block_until_ready from every thread (pjrt_async_steps.py, in a process of its own).

Execute is synchronous today (it returns when the results are written, and the events it
hands JAX are complete): these tests pin down what must keep holding when it becomes
asynchronous."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax")

STEPS = Path(__file__).parent / "pjrt_async_steps.py"


@pytest.fixture(scope="module")
def seen():
    proc = subprocess.run([sys.executable, str(STEPS)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, JAX_PLATFORMS="kiln"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_eight_threads_compile_and_call_at_once_with_correct_results(seen):
    assert seen["platform"] == "kiln"
    assert seen["hung"] == 0
    assert seen["errors"] == []


def test_block_until_ready_leaves_results_ready_in_every_thread(seen):
    from pjrt_async_steps import ROUNDS, THREADS
    assert seen["ready_after_block"] == [True] * (THREADS * ROUNDS)


def test_each_threads_donated_buffer_is_consumed_and_the_other_kept(seen):
    from pjrt_async_steps import ROUNDS, THREADS
    assert seen["donated_deleted"] == [True] * (THREADS * ROUNDS)
