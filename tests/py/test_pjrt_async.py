"""Concurrent and asynchronous calls through Kiln's PJRT plugin (JAX_PLATFORMS=kiln): 8 Python
threads compiling and calling at once, result buffers fed back as arguments, donation and
block_until_ready from every thread; runs queued on their device (Execute returns before
they end) chained, donated, dropped and failing (pjrt_async_steps.py, in a process of its
own)."""
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


def test_queued_runs_chained_from_four_threads_are_right(seen):
    assert seen["queued_hung"] == 0
    assert seen["queued_errors"] == []


def test_execute_returns_before_queued_runs_end(seen):
    # 12 runs of a 384x384 matmul: dispatching them takes a small part of running them
    assert seen["dispatch_s"] < 0.5 * seen["total_s"], (seen["dispatch_s"], seen["total_s"])


def test_a_donated_argument_still_being_written_is_consumed_after_it_is(seen):
    assert seen["donated_pending_deleted"] and seen["donated_pending_right"]


def test_a_queued_run_that_fails_reports_kilns_error_where_its_result_is_read(seen):
    failure = seen["queued_failure"]
    assert failure.startswith("JaxRuntimeError: ") and \
        "kiln_test_queued_fails was asked to fail" in failure, failure
    assert seen["after_failure_right"]
