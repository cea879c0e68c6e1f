"""Write the torch_xla producer files that tests/py/test_producers.py runs on Kiln.

Each model is a torchvision or torch.nn model in eval mode, exported with `torch.export` and
converted by torch_xla (`torch_xla.stablehlo.exported_program_to_stablehlo`), the path
torch_xla documents for StableHLO; the StableHLO bytecode is what Kiln reads. torch_xla passes
the weights and buffers as arguments, in the order its `input_locations` give; they are set
from the recipes in weights.py, and PyTorch's own eager result on those weights is stored
next to the program.

torch_xla 2.9 requires torch 2.9 exactly, which Kiln's test environment does not have (it has
a newer CPU build of torch), so this runs in an environment of its own (several GB; a CUDA
build of torch is the only 2.9 wheel for x86-64):

    python -m venv /tmp/torch-xla-env
    /tmp/torch-xla-env/bin/pip install ".[torch-xla]"
    /tmp/torch-xla-env/bin/python tests/producers/make_torch_xla_files.py [MODEL...]

The files land in tests/producers/files/torch_xla/.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("PJRT_DEVICE", "CPU")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch_xla  # noqa: E402
import torchvision  # noqa: E402
from torch.export import export  # noqa: E402
from torch_xla.stablehlo import exported_program_to_stablehlo  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import weights  # noqa: E402

OUT = Path(__file__).parent / "files" / "torch_xla"


def _image(size: int) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(1).standard_normal((1, 3, size, size)).astype(np.float32))


def resnet18():
    return torchvision.models.resnet18(), (_image(224),)


def mobilenet_v3_small():
    return torchvision.models.mobilenet_v3_small(), (_image(224),)


def vit():
    """torchvision's VisionTransformer, smaller than vit_b_16 (86M weights) but the same code."""
    model = torchvision.models.VisionTransformer(
        image_size=64, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128,
        num_classes=10)
    return model, (_image(64),)


def transformer_encoder():
    layer = torch.nn.TransformerEncoderLayer(
        d_model=64, nhead=4, dim_feedforward=128, activation="gelu", batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    tokens = np.random.default_rng(2).standard_normal((2, 16, 64)).astype(np.float32)
    return model, (torch.from_numpy(tokens),)


MODELS = {"resnet18": resnet18, "mobilenet_v3_small": mobilenet_v3_small, "vit": vit,
          "transformer_encoder": transformer_encoder}


def write(name: str, model: torch.nn.Module, inputs: tuple) -> None:
    model.eval()
    state = model.state_dict()
    recipes = {key: weights.recipe(key, value.numpy(), seed=i)
               for i, (key, value) in enumerate(state.items())}
    model.load_state_dict({key: torch.from_numpy(weights.make(recipes[key])) for key in state})
    with torch.no_grad():
        expected = model(*inputs).numpy()

    program = exported_program_to_stablehlo(export(model, inputs))
    function = program._bundle.stablehlo_funcs[0]
    constants = program._bundle.additional_constants
    arguments, saved = [], {}
    for location, signature in zip(function.meta.input_locations, function.meta.input_signature):
        kind = location.type_.value
        if kind == "parameter":
            arguments.append({"weight": recipes[location.name]})
        elif kind == "input_arg":
            arguments.append({"input": location.position})
        else:  # a constant torch_xla lifted out of the graph: small, stored as it is
            key = f"constant_{len(saved)}"
            saved[key] = np.asarray(constants[location.position])
            arguments.append({"constant": key})
        assert list(signature.shape) == list(_argument_shape(arguments[-1], inputs, saved)), name

    folder = OUT / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.mlirbc").write_bytes(program.get_stablehlo_bytecode("forward"))
    np.savez_compressed(folder / "data.npz", expected=expected,
                        **{f"input_{i}": t.numpy() for i, t in enumerate(inputs)}, **saved)
    (folder / "manifest.json").write_text(json.dumps({
        "producer": f"torch {torch.__version__}, torch_xla {torch_xla.__version__}, "
                    f"torchvision {torchvision.__version__}",
        "made_by": "tests/producers/make_torch_xla_files.py",
        "program": "torch_xla.stablehlo.exported_program_to_stablehlo(torch.export.export(model))",
        "expected": "the model's eager result in PyTorch, in eval mode, on these weights",
        "arguments": arguments,
    }, indent=1) + "\n")
    print(f"{name}: {len(arguments)} arguments, result {expected.shape}")


def _argument_shape(argument: dict, inputs: tuple, saved: dict):
    if "weight" in argument:
        return argument["weight"]["shape"]
    if "input" in argument:
        return inputs[argument["input"]].shape
    return saved[argument["constant"]].shape


if __name__ == "__main__":
    for name in sys.argv[1:] or MODELS:
        torch.manual_seed(0)   # each model's own initialization, whichever are written
        write(name, *MODELS[name]())
