"""CI's sample of the mutation fuzzer (tests/fuzz/fuzz.py; the large campaign runs on demand):
every mutant ends in a result or a KilnError, never a signal, a hang or a stray exception."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import fuzz  # noqa: E402


def test_mutants_end_in_a_result_or_a_kiln_error():
    outcomes = fuzz.campaign(count=80, seed=20261123, jobs=1, timeout=120.0)
    counts = fuzz.summary(outcomes)
    bad = [f"{o.kind}: {o.seed} ({o.mutation}): {o.detail}" for o in outcomes if o.kind in fuzz.BAD]
    assert not bad, "\n".join(bad)
    assert counts["ok"] + counts["error"] == 80


def test_mutations_are_seeded_and_change_the_input():
    import random
    data = b"func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {\n  return %x : tensor<2x3xf32>\n}"
    for mutate in fuzz.MUTATIONS:
        a, b = mutate(data, random.Random(7)), mutate(data, random.Random(7))
        assert a == b
    assert any(m(data, random.Random(s)) != data for m in fuzz.MUTATIONS for s in range(3))
