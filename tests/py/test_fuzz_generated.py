"""CI's sample of the structure-aware fuzzer (tests/fuzz/generate.py): random valid StableHLO
programs with adversarial run-time values (indices, sizes and strides from arguments: INT_MIN,
INT_MAX, past the end, stride 0; NaN, ±inf, denormals, -0) end in a result or a located
KilnError, never a signal, a hang, a stray exception or an InternalError; where a result comes
back it agrees with the StableHLO reference interpreter. The large campaign runs on demand:
`python tests/fuzz/generate.py --count 20000 --jobs 2 --seed S --out DIR`."""
from __future__ import annotations

import signal
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import generate  # noqa: E402
import programs  # noqa: E402
import workers  # noqa: E402

SAMPLE = 120


def test_generated_programs_end_in_a_result_or_a_kiln_error(tmp_path):
    counts, notable = generate.campaign(SAMPLE, seed=20261127, jobs=2, timeout=60.0, out=tmp_path)
    failures = [f"{kind}: program {index}: {detail}" for kind, index, detail in notable
                if kind in generate.FAILURES]
    assert not failures, "\n".join(failures) + f"\n(saved under {tmp_path})"
    assert counts["programs"] == SAMPLE
    # The generator makes valid programs: most of them run (the rest are located errors about
    # the adversarial values, or a stage Kiln cannot lower yet).
    assert counts["result"] >= SAMPLE // 2, dict(counts)
    # Where the interpreter can judge, Kiln agrees with it.
    wrong = [f"{kind}: program {index}: {detail}" for kind, index, detail in notable
             if kind in ("mismatch", "refused")]
    assert not wrong, "\n".join(wrong)
    assert counts["match"] >= SAMPLE // 4, dict(counts)


def test_programs_are_reproducible_from_seed_and_index():
    a, b = programs.make_program(7, 3), programs.make_program(7, 3)
    assert a.text == b.text
    inputs_a = programs.make_inputs(a, 7, 3)
    inputs_b = programs.make_inputs(b, 7, 3)
    assert all(np.array_equal(x, y, equal_nan=True) for x, y in zip(inputs_a, inputs_b))
    assert programs.make_program(7, 4).text != a.text


def test_run_time_values_are_adversarial():
    """Across a few programs, indices take the extremes of their type and floats the
    special values; index arguments are used by run-time-indexed ops."""
    seen_index, seen_float = set(), set()
    ops = set()
    for i in range(150):
        p = programs.make_program(1, i)
        ops.update(p.ops)
        for arg, value in zip(p.args, programs.make_inputs(p, 1, i)):
            if arg.role == "index":
                seen_index.add(int(value))
            elif value.dtype == np.float32:
                seen_float.update(repr(float(v)) for v in value.reshape(-1))
    assert {np.iinfo(np.int32).min, np.iinfo(np.int32).max, -1, 0} <= seen_index
    assert {"nan", "inf", "-inf", "-0.0"} <= seen_float
    assert {"dynamic_slice", "dynamic_update_slice", "real_dynamic_slice", "gather", "scatter",
            "sort", "while", "dot_general", "pad", "dynamic_iota"} <= ops


def test_oracle_compares_exactly_where_the_spec_is_exact():
    f = np.float32
    nan_a = np.array([np.nan], f)
    nan_b = np.array([0x7FC00001], np.uint32).view(f)  # another NaN payload: still equal
    assert generate.compare([nan_a], [nan_b], set())[0] == "match"
    assert generate.compare([np.array([0.0], f)], [np.array([-0.0], f)], set())[0] == "mismatch"
    assert generate.compare([np.array([1, 2])], [np.array([1, 3])], set())[0] == "mismatch"
    # Rounding-sensitive programs (transcendentals, float sums) compare within a tolerance.
    assert generate.compare([np.array([1.0], f)], [np.array([1.00001], f)], {"approximate"})[0] == "match"
    assert generate.compare([np.array([1.0], f)], [np.array([1.1], f)], {"approximate"})[0] == "inexact"
    assert generate.compare([np.array([1.0], f)], [np.array([1.00001], f)], set())[0] == "mismatch"
    assert generate.compare([np.array([1, 2])], [np.array([1, 3])], {"integer divide"})[0] == "unverified"
    assert generate.compare([np.zeros(2)], [np.zeros(3)], {"approximate"})[0] == "mismatch"


def test_run_time_constraints_are_checked_on_kilns_values():
    shape = (16,)
    check = [("real_dynamic_slice", [0, 1, 2], shape)]
    ok = [np.array([0]), np.array([16]), np.array([1])]
    assert programs.constraint_violations(check, ok) == []
    for start, limit, stride in [(-1, 4, 1), (0, 64, 1), (0, 4, 0), (5, 3, 1)]:
        values = [np.array([start]), np.array([limit]), np.array([stride])]
        assert programs.constraint_violations(check, values), (start, limit, stride)


@pytest.fixture
def self_test_pool():
    pool = workers.Pool(workers.script_argv(workers.__file__, "--self-test-worker"), jobs=1,
                        timeout=5.0, start_timeout=60.0)
    yield pool
    pool.cleanup()


def test_workers_survive_signals_and_hangs(self_test_pool):
    """A case that kills its worker is a `signal`, one that never answers a `hang`; both are
    rerun alone, and the cases after them still run."""
    cases = [(0, ("echo", 1)), (1, ("signal", signal.SIGSEGV)), (2, ("echo", 2)),
             (3, ("sleep", 60)), (4, ("echo", 3))]
    results = {r.key: r for r in self_test_pool.run(cases)}
    assert results[0].reply == ("echo", 1) and results[2].reply == ("echo", 2)
    assert results[4].reply == ("echo", 3)
    assert results[1].kind == "signal" and "SIGSEGV" in results[1].detail and results[1].reproduced
    assert results[3].kind == "hang" and results[3].reproduced


def test_a_campaign_stops_at_its_deadline():
    """--until: no case starts after the deadline, and the summary counts what ran."""
    import time
    pool = workers.Pool(workers.script_argv(workers.__file__, "--self-test-worker"), jobs=1,
                        timeout=5.0, start_timeout=60.0, deadline=time.time() - 1)
    try:
        assert list(pool.run((i, ("echo", i)) for i in range(3))) == []
    finally:
        pool.cleanup()
    assert workers.deadline(None) is None
    assert 0 < workers.deadline("00:00") - time.time() <= 86400
