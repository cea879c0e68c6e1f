"""`kiln bench models` (python/kiln/bench/models.py): the harness on one tiny keras model (its
export run on Kiln and on XLA:CPU, each in a fresh process), the correctness check, the table
and JSON it reports, the busy-loop competitor and the machine-load line. Not speed."""
import json
import os

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "jax")   # before keras's first import: it reads it once
pytest.importorskip("jax")
keras = pytest.importorskip("keras")

from kiln.bench import model_zoo, models  # noqa: E402
from kiln.errors import KilnError  # noqa: E402


@pytest.fixture(scope="module")
def tiny_row():
    if keras.backend.backend() != "jax":
        pytest.skip("keras was imported with another backend before this module")
    (tiny,) = model_zoo.by_name(["tiny_mlp"], include_test=True)
    return models.measure(tiny, budget_s=0.05)


def test_tiny_model_runs_on_both_and_agrees(tiny_row):
    kiln, xla = tiny_row.results["kiln"], tiny_row.results["xla"]
    assert (kiln.status, kiln.reason) == ("ok", "")
    assert (xla.status, xla.reason) == ("ok", "")
    assert tiny_row.correct is True
    assert 0 <= kiln.max_err <= 1
    for m in (kiln, xla):
        assert m.compile_s > 0 and m.median_s > 0
        assert m.peak_mb is None or m.peak_mb >= 0
        assert m.loaded_s is None   # no --load
    assert tiny_row.speed == pytest.approx(xla.median_s / kiln.median_s)
    assert tiny_row.compile_ratio == pytest.approx(kiln.compile_s / xla.compile_s)


def test_table_and_json_report_the_row(tiny_row):
    text = models.table([tiny_row])
    head, rule, line = text.splitlines()[:3]
    for column in ("model", "kiln ms", "xla ms", "speed xla/kiln", "kiln compile s",
                   "xla compile s", "compile kiln/xla", "memory kiln/xla", "correct"):
        assert column in head
    assert set(rule) <= {"-", " "}
    assert line.startswith("tiny_mlp") and "yes (" in line
    assert text.splitlines()[-1].startswith("geomean") and "1/1" in text.splitlines()[-1]
    assert "slowdown" not in head
    assert "kiln slowdown" in models.table([tiny_row], load=True).splitlines()[0]
    data = json.loads(json.dumps(models.to_json([tiny_row], {"cpu": "test"})))
    (entry,) = data["models"]
    assert entry["model"] == "tiny_mlp" and entry["correct"] is True
    assert entry["results"]["kiln"]["compile_s"] == tiny_row.results["kiln"].compile_s
    assert data["geomean"]["speed"] == pytest.approx(tiny_row.speed)
    assert data["geomean"]["correct"] == 1


def _row_with_outputs(tmp_path, kiln_out, xla_out, tol):
    np.savez(tmp_path / "outputs-kiln.npz", *kiln_out)
    np.savez(tmp_path / "outputs-xla.npz", *xla_out)
    row = models.ModelRow("m", "", False, tol,
                          {"kiln": models.PeerResult(), "xla": models.PeerResult()})
    models.check_outputs(row, str(tmp_path))
    return row


def test_outputs_beyond_tolerance_are_a_mismatch(tmp_path):
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    wrong = x.copy()
    wrong[1, 2] += 0.1
    row = _row_with_outputs(tmp_path, [x, wrong], [x, x], (1e-3, 1e-3))
    assert row.correct is False
    assert row.results["kiln"].status == "mismatch"
    assert "vs xla" in row.results["kiln"].reason and row.results["kiln"].max_err > 1
    assert row.speed is None   # a wrong answer's speed does not count
    assert "NO" in models.table([row]).splitlines()[2]


def test_outputs_within_tolerance_and_shape_changes(tmp_path):
    x = np.ones((2, 2), np.float32)
    assert _row_with_outputs(tmp_path, [x + 5e-4], [x], (0, 1e-3)).correct is True
    shape = _row_with_outputs(tmp_path, [x.reshape(4)], [x], (0, 1e-3))
    assert shape.correct is False and "shape" in shape.results["kiln"].reason


def test_failed_child_reports_its_error(tmp_path):
    result = models.run_child("kiln", str(tmp_path), str(tmp_path / "cache"), timeout_s=120)
    assert "export.bin" in result["error"] or "inputs.npz" in result["error"]


def test_busy_loop_competes_then_stops():
    with models.BusyLoop() as busy:
        assert busy.proc.poll() is None
    assert busy.proc.poll() is not None


def test_load_line_says_when_the_machine_is_busy(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (3.0, 2.0, 1.0))
    text, busy = models.load_line()
    assert busy and "load average 3.00 2.00 1.00 on 2 cores" in text and "machine busy" in text
    monkeypatch.setattr(os, "getloadavg", lambda: (0.2, 0.1, 0.1))
    text, busy = models.load_line()
    assert not busy and "machine busy" not in text


def test_unknown_model_is_a_clear_error():
    with pytest.raises(KilnError, match="unknown model.*nope") as info:
        model_zoo.by_name(["resnet50", "nope"])
    assert "resnet50" in str(info.value.hint)
    assert [m.name for m in model_zoo.by_name(["lstm_gru", "resnet50"])] == ["lstm_gru", "resnet50"]
    assert "tiny_mlp" not in [m.name for m in model_zoo.by_name(None)]


def test_cli_lists_models_and_rejects_unknown_ones(capsys):
    from kiln.cli.main import main
    assert main(["bench", "models", "--list"]) == 0
    listed = capsys.readouterr().out.split()
    assert "resnet50" in listed and "gpt2_train" in listed and "nnx_cnn_train" in listed
    assert main(["bench", "models", "--only", "nope"]) == 1
    assert "unknown model(s): nope" in capsys.readouterr().err
    assert main(["bench", "models", "resnet50"]) == 1
    assert "--only resnet50" in capsys.readouterr().err


def test_memory_ratio_floors_tiny_peaks_at_one_mb():
    def row(kiln_mb, xla_mb):
        return models.ModelRow("m", "", False, (0, 0),
                               {"kiln": models.PeerResult(peak_mb=kiln_mb),
                                "xla": models.PeerResult(peak_mb=xla_mb)})
    assert row(0.2, 0.5).memory_ratio is None
    assert row(0.0, 5.0).memory_ratio == pytest.approx(0.2)
    assert row(300.0, 200.0).memory_ratio == pytest.approx(1.5)
