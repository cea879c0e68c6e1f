"""`kiln bench`'s harness on a tiny workload: measurement, output checking, classification
of peers that are missing, decline the program, or disagree, and the table/JSON. (The real
benchmark runs on demand only; nothing here depends on timings.)"""
import json

import numpy as np
import pytest

from kiln.bench import runner
from kiln.bench.peers import KilnPeer, Peer, PjrtPeer, XlaPeer
from kiln.bench.workloads import WORKLOADS, Workload
from kiln.cli.main import main
from kiln.errors import KilnError


def tiny():
    def make():
        import jax.numpy as jnp
        rng = np.random.default_rng(0)
        a = rng.standard_normal((64, 64)).astype(np.float32)
        return (lambda a, b: jnp.tanh(a @ b).sum(0)), (a, a.T.copy())
    return Workload("tiny", make, flops=2 * 64 ** 3, tol=(1e-4, 1e-4), note="test")


class Missing(Peer):
    name = "gone"
    missing = "not installed (test)"


class Declines(Peer):
    name = "declines"

    def compile(self, workload):
        raise KilnError("cannot lower 'stablehlo.sort' here yet", hint="test")


class Wrong(Peer):
    name = "wrong"

    def compile(self, workload):
        _, args, _ = workload.build()
        return lambda: (np.zeros(64, np.float32),)


def test_measures_checks_and_tabulates(tmp_path):
    peers = [KilnPeer(), XlaPeer(), PjrtPeer(), Missing(), Declines(), Wrong()]
    row = runner.measure(tiny(), peers, budget_s=0.05, min_rounds=3)
    kiln_m, xla_m = row.results["kiln"], row.results["xla"]
    assert kiln_m.status == "ok" and xla_m.status == "ok"
    assert len(kiln_m.samples) >= 3 and kiln_m.median_s > 0 and kiln_m.compile_s > 0
    assert kiln_m.max_err is not None and kiln_m.max_err <= 1.0       # checked against XLA
    assert kiln_m.temp_mb is not None and kiln_m.temp_mb >= 0
    assert row.results["gone"].status == "missing"
    assert row.results["declines"].status == "unsupported" and "sort" in row.results["declines"].reason
    assert row.results["wrong"].status == "mismatch"
    assert row.ratio("xla") == xla_m.median_s / kiln_m.median_s
    # Kiln through JAX's PJRT plugin ran the same jax function, checked against XLA too.
    pjrt_m = row.results["pjrt"]
    assert pjrt_m.status == "ok" and pjrt_m.max_err <= 1.0 and pjrt_m.median_s > 0
    text = runner.table([row], [p.name for p in peers])
    assert "tiny" in text and "geomean" in text and "not installed (test)" in text
    assert "pjrt/xla" in text
    data = runner.to_json([row], [p.name for p in peers], {"cpu": "test"})
    json.dumps(data)
    assert data["pjrt/xla"] == pytest.approx(xla_m.median_s / pjrt_m.median_s, rel=1e-12)
    # A geometric mean of one ratio (exp of a mean of logs): equal up to rounding.
    assert data["geomean"]["xla"] == pytest.approx(row.ratio("xla"), rel=1e-12)


def test_kiln_declining_is_unsupported_not_faked():
    class KilnDeclines(Declines):
        name = "kiln"
    row = runner.measure(tiny(), [KilnDeclines(), XlaPeer()], budget_s=0.02, min_rounds=1)
    assert row.results["kiln"].status == "unsupported"
    assert row.results["kiln"].median_s is None and row.ratio("xla") is None


def test_compare_tolerance_and_nan():
    ok, worst, _ = runner.compare([np.array([1.0, np.nan])], [np.array([1.0 + 1e-6, np.nan])], (1e-5, 0))
    assert ok and worst < 1
    ok, _, why = runner.compare([np.array([1.0, 2.0])], [np.array([1.0, 2.1])], (1e-3, 1e-3))
    assert not ok and "tolerance" in why


def test_cli_lists_every_workload(capsys):
    assert main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    for w in WORKLOADS:
        assert w.name in out
    assert main(["bench", "no_such_workload"]) == 1


def test_compile_time_on_one_small_export(monkeypatch):
    from kiln.bench import compile_time
    monkeypatch.setenv("KILN_CACHE", "1")
    seen = []

    def kiln_compile(serialized, name):   # Kiln as the benchmark calls it, cache state noted
        import os
        seen.append(os.environ.get("KILN_CACHE"))
        return compile_time.kiln_compiler()(serialized, name)
    (program,) = compile_time.programs(["cos_scale"])
    assert program.name == "export/cos_scale" and program.group == compile_time.EXPORT_GROUP
    with compile_time.kiln_cache_off():
        result = compile_time.measure(program, rounds=2, kiln=kiln_compile)
    assert result.status == "ok", result.reason
    assert len(result.kiln_samples) == len(result.xla_samples) == 2
    assert result.ratio == result.kiln_s / result.xla_s and result.kiln_stages
    assert seen == ["0", "0"]                       # every Kiln compile was cold
    import os
    assert os.environ["KILN_CACHE"] == "1"          # and the caller's setting is back
    text = compile_time.table([result])
    assert "export/cos_scale" in text and "geomean kiln/xla (all, 1 programs)" in text
    data = compile_time.to_json([result], {"cpu": "test"}, 2, {})
    json.dumps(data)
    assert data["geomean"]["all"] == pytest.approx(result.ratio)


def test_compile_time_failures_are_reported_not_timed():
    from kiln.bench import compile_time

    def declines(serialized, name):
        raise KilnError("cannot lower this here yet", hint="test")
    (program,) = compile_time.programs(["cos_scale"])
    result = compile_time.measure(program, rounds=1, kiln=declines)
    assert result.status == "kiln error" and "cannot lower" in result.reason
    assert result.kiln_s is None and result.ratio is None and result.xla_s > 0
    assert compile_time.summary([result])["all"] is None


def test_compile_time_cli_lists_every_program(capsys):
    from kiln.bench.jax_programs import JAX_PROGRAMS
    assert main(["bench", "--compile-time", "--list"]) == 0
    out = capsys.readouterr().out.split()
    assert [w.name for w in WORKLOADS] == out[:len(WORKLOADS)]
    assert [f"export/{p.name}" for p in JAX_PROGRAMS] == out[len(WORKLOADS):]
    assert main(["bench", "--compile-time", "no_such_program"]) == 1


def test_bench_on_the_gpu_without_a_device_says_so_in_one_line(monkeypatch, capsys):
    from kiln.runtime import cuda
    monkeypatch.setattr(cuda, "no_device_reason",
                        lambda: "no CUDA device: the driver reports none")
    assert main(["bench", "--target", "gpu", "call_overhead"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--target gpu: no CUDA device" in err[0]
    assert main(["bench", "--target", "no_such_target", "call_overhead"]) == 1


def test_compile_time_of_another_target(capsys):
    # GPU compile times need no GPU: the emulator's target compiles the same PTX pipeline
    assert main(["bench", "--compile-time", "--target", "gpu-emulator", "--rounds", "1",
                 "cos_scale"]) == 0
    out = capsys.readouterr().out
    assert "Kiln's target: gpu-emulator" in out
    assert "geomean kiln/xla (all, 1 programs)" in out and "export/cos_scale" in out


def test_memory_counts_what_a_call_makes_resident():
    # gelu's output is 4M f32 = 16 MB: a first call in a fresh process must make at least
    # that resident, on both peers; the memory table shows the pair.
    from kiln.bench import memory
    from kiln.bench.workloads import by_name
    (gelu,) = by_name(["gelu"])
    kiln_r, xla_r = memory.measure(gelu, "kiln"), memory.measure(gelu, "xla")
    assert "error" not in kiln_r and "error" not in xla_r, (kiln_r, xla_r)
    assert kiln_r["io_mb"] == pytest.approx(16.0)
    assert kiln_r["first_call_mb"] >= 15.0 and xla_r["first_call_mb"] >= 15.0
    assert kiln_r["static_temp_mb"] >= 0 and xla_r["static_temp_mb"] >= 0
    text = memory.table([(kiln_r, xla_r)])
    assert text.splitlines()[2].startswith("gelu") and "geomean kiln/xla" in text


def test_memory_reports_a_failing_child_as_an_error():
    from kiln.bench import memory
    from kiln.bench.workloads import by_name
    (gelu,) = by_name(["gelu"])
    result = memory.measure(gelu, "numpy")   # --memory measures kiln and xla only
    assert "kiln and xla" in result["error"]
