"""Programs written by other producers run on Kiln and match the producer's own results.

The files are in tests/producers/files/, written by the scripts beside them (which say how to
run them): TensorFlow's HLO of Keras models, as text and as a serialized HloModuleProto, and
torch_xla's StableHLO of torchvision and torch.nn models. The weights are arguments, made
again here from each file's recipes (tests/producers/weights.py); the expected results are the
producer's, computed when the file was written.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import kiln

PRODUCERS = Path(__file__).resolve().parents[1] / "producers"
sys.path.insert(0, str(PRODUCERS))
import weights  # noqa: E402


def _models(producer: str) -> list[str]:
    return sorted(p.name for p in (PRODUCERS / "files" / producer).iterdir() if p.is_dir())


def _check(outputs, expected: np.ndarray, rtol: float, atol: float) -> None:
    got = np.asarray(outputs[0] if isinstance(outputs, (list, tuple)) else outputs)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    # Random weights can give flat results; these files were chosen so that they are not.
    assert np.ptp(expected) > 10 * atol
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("model", _models("tensorflow"))
def test_tensorflow_keras_model_from_its_hlo(model):
    """Keras (TensorFlow backend) through tf.function(jit_compile=True): the HLO text and the
    HloModuleProto give the same program, and it computes what TensorFlow computed."""
    folder = PRODUCERS / "files" / "tensorflow" / model
    manifest = json.loads((folder / "manifest.json").read_text())
    data = np.load(folder / "data.npz")
    arguments = [data["input"]] + [weights.make_checked(r) for r in manifest["weights"]]
    expected = data["expected"]
    scale = float(np.abs(expected).max())
    for form in ("model.hlo", "model.hlo.pb"):
        exe = kiln.compile((folder / form).read_bytes())
        _check(exe(*arguments), expected, rtol=1e-4, atol=1e-6 * scale)


def _torch_xla_argument(argument: dict, data) -> np.ndarray:
    if "weight" in argument:
        return weights.make_checked(argument["weight"])
    if "input" in argument:
        return data[f"input_{argument['input']}"]
    return data[argument["constant"]]


@pytest.mark.parametrize("model", _models("torch_xla"))
def test_torch_xla_model(model):
    """torchvision and torch.nn models through torch.export and torch_xla's StableHLO: NCHW
    convolutions, batch_norm_inference, mhlo.erf custom calls, weights as arguments."""
    folder = PRODUCERS / "files" / "torch_xla" / model
    manifest = json.loads((folder / "manifest.json").read_text())
    data = np.load(folder / "data.npz")
    arguments = [_torch_xla_argument(a, data) for a in manifest["arguments"]]
    expected = data["expected"]
    exe = kiln.compile((folder / "model.mlirbc").read_bytes())
    _check(exe(*arguments), expected, rtol=1e-4, atol=1e-5 * float(np.abs(expected).max()))
