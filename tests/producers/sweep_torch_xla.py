"""A sweep of torch.nn modules, torch functions and torchvision models through torch_xla's
StableHLO export, each run on Kiln and compared with PyTorch's eager result.

Run it in the environment of make_torch_xla_files.py (`pip install ".[torch-xla]"`, which has
Kiln too):

    /tmp/torch-xla-env/bin/python tests/producers/sweep_torch_xla.py [NAME...]

(nn.LSTM and nn.GRU are left out: torch.export refuses their flattened weights, and with
torch_xla imported their eager run goes through torch_xla's scan.)

Each line says `ok`, `MISMATCH` (Kiln's result differs from PyTorch's), `KILN ERROR` (Kiln
refused or failed), `EXPORT ERROR` (torch.export or torch_xla could not write the program) or
`EXPORT MISMATCH` (torch_xla's program computes something else than eager PyTorch, and Kiln
what the program says); the last two are not Kiln's.
"""
from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("PJRT_DEVICE", "CPU")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch_xla  # noqa: E402,F401
import torchvision  # noqa: E402
from torch.export import export  # noqa: E402
from torch_xla.stablehlo import exported_program_to_stablehlo  # noqa: E402

import kiln  # noqa: E402

nn = torch.nn
torch.manual_seed(0)


def r(*shape):
    return torch.randn(*shape)


class F(nn.Module):
    """A module calling `f`: torch functions as models."""
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, *args):
        return self.f(*args)


def vision(name, size=224):
    return getattr(torchvision.models, name)(), (r(1, 3, size, size),)


CASES = {
 "gelu_tanh": (nn.GELU("tanh"), (r(4, 8),)), "softplus": (nn.Softplus(), (r(4, 8),)),
 "mish": (nn.Mish(), (r(4, 8),)), "silu": (nn.SiLU(), (r(4, 8),)), "elu": (nn.ELU(), (r(4,8),)),
 "selu": (nn.SELU(), (r(4,8),)), "hardswish": (nn.Hardswish(), (r(4,8),)), "logsigmoid": (nn.LogSigmoid(), (r(4,8),)),
 "layernorm": (nn.LayerNorm(8), (r(4, 8),)), "groupnorm": (nn.GroupNorm(2, 4), (r(2, 4, 5, 5),)),
 "instancenorm": (nn.InstanceNorm2d(4, affine=True), (r(2, 4, 5, 5),)),
 "batchnorm_train": (nn.BatchNorm2d(4).train(), (r(2, 4, 5, 5),)),
 "embedding": (nn.Embedding(10, 4), (torch.tensor([[1, 2, 9], [0, 3, 3]]),)),
 "conv1d": (nn.Conv1d(3, 5, 3, padding=1), (r(2, 3, 9),)), "conv3d": (nn.Conv3d(2, 3, 3), (r(1, 2, 5, 5, 5),)),
 "convT2d": (nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1), (r(1, 3, 6, 6),)),
 "grouped_conv": (nn.Conv2d(4, 8, 3, groups=2, dilation=2), (r(1, 4, 9, 9),)),
 "maxpool": (nn.MaxPool2d(3, 2, 1), (r(1, 2, 9, 9),)), "avgpool": (nn.AvgPool2d(3, 2, 1), (r(1, 2, 9, 9),)),
 "adaptive_avg": (nn.AdaptiveAvgPool2d((3, 2)), (r(1, 2, 9, 7),)), "adaptive_max": (nn.AdaptiveMaxPool2d(2), (r(1, 2, 8, 8),)),
 "upsample_nearest": (nn.Upsample(scale_factor=2), (r(1, 2, 4, 4),)),
 "upsample_bilinear": (nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False), (r(1, 2, 4, 4),)),
 "pixel_shuffle": (nn.PixelShuffle(2), (r(1, 8, 3, 3),)), "mha": (nn.MultiheadAttention(8, 2, batch_first=True), (r(2, 5, 8), r(2, 5, 8), r(2, 5, 8))),
 "topk": (F(lambda x: tuple(torch.topk(x, 3, dim=-1))), (r(4, 10),)), "sort": (F(lambda x: tuple(torch.sort(x, dim=-1))), (r(4, 10),)),
 "cumsum": (F(lambda x: torch.cumsum(x, 1)), (r(4, 10),)), "argmax": (F(lambda x: torch.argmax(x, 1)), (r(4, 10),)),
 "gather": (F(lambda x, i: torch.gather(x, 1, i)), (r(4, 10), torch.randint(0, 10, (4, 3)))),
 "index_select": (F(lambda x, i: torch.index_select(x, 0, i)), (r(5, 3), torch.tensor([4, 0, 2]))),
 "scatter_add": (F(lambda x, i, v: x.scatter_add(1, i, v)), (r(4, 10), torch.randint(0, 10, (4, 3)), r(4, 3))),
 "index_put": (F(lambda x, i, v: x.index_put((i,), v, accumulate=True)), (r(6, 3), torch.tensor([1, 1, 4]), r(3, 3))),
 "special": (F(lambda x: (torch.erfinv(x.clamp(-.9, .9)), torch.lgamma(x.abs() + .5), torch.digamma(x.abs() + .5), torch.atan2(x, x + 2), torch.expm1(x), torch.log1p(x.abs()))), (r(4, 8),)),
 "trig": (F(lambda x: (torch.tan(x), torch.asin(x.clamp(-1, 1)), torch.acos(x.clamp(-1, 1)), torch.sinh(x), torch.cosh(x), torch.atanh(x.clamp(-.9, .9)), torch.asinh(x), torch.acosh(x.abs() + 1))), (r(4, 8),)),
 "where_mask": (F(lambda x: torch.where(x > 0, x, x.new_zeros(()))), (r(4, 8),)), "softmax": (nn.Softmax(-1), (r(4, 8),)),
 "logsoftmax": (nn.LogSoftmax(-1), (r(4, 8),)), "einsum": (F(lambda a, b: torch.einsum("bij,bjk->bik", a, b)), (r(2, 3, 4), r(2, 4, 5))),
 "baddbmm": (F(lambda c, a, b: torch.baddbmm(c, a, b)), (r(2, 3, 5), r(2, 3, 4), r(2, 4, 5))),
 "roll_flip": (F(lambda x: (torch.roll(x, 2, 1), torch.flip(x, [0]))), (r(4, 8),)),
 "pad_reflect": (F(lambda x: torch.nn.functional.pad(x, (1, 2, 2, 1), mode="reflect")), (r(1, 2, 5, 5),)),
 "cross_entropy": (F(lambda x, t: torch.nn.functional.cross_entropy(x, t)), (r(4, 10), torch.tensor([1, 2, 9, 0]))),
 "remainder_div": (F(lambda x: (torch.remainder(x, 0.7), torch.floor_divide(x, 0.3), torch.fmod(x, 0.7))), (r(4, 8),)),
 "int_ops": (F(lambda a, b: (a // b, a % b, a << 1, a & b, torch.bitwise_not(a))), (torch.randint(1, 50, (6,)), torch.randint(1, 7, (6,)))),
 "bf16_linear": (nn.Linear(8, 4).to(torch.bfloat16), (r(3, 8).to(torch.bfloat16),)),
 "f16_conv": (nn.Conv2d(2, 3, 3).to(torch.float16), (r(1, 2, 6, 6).to(torch.float16),)),
 "rmsnorm": (nn.RMSNorm(8), (r(4, 8),)), "tril_triu": (F(lambda x: (torch.tril(x), torch.triu(x, 1))), (r(5, 5),)),
 "var_std": (F(lambda x: (x.var(1), x.std(0), x.norm(dim=1))), (r(4, 8),)), "any_all": (F(lambda x: ((x > 1).any(1), (x > -3).all())), (r(4, 8),)),
 "linalg": (F(lambda x: (torch.linalg.inv(x @ x.T + 4 * torch.eye(4)), torch.linalg.cholesky(x @ x.T + 4 * torch.eye(4)))), (r(4, 4),)),
}
VISION = ["resnet50", "efficientnet_b0", "convnext_tiny", "densenet121", "squeezenet1_1",
          "shufflenet_v2_x1_0", "regnet_y_400mf", "mnasnet0_5", "googlenet", "swin_t"]



def flat(outputs):
    if isinstance(outputs, (tuple, list)):
        return [t for o in outputs for t in flat(o)]
    return [outputs]


def to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.float().numpy().astype(ml_dtypes.bfloat16)
    return t.numpy()


_HALVES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def comparable(outputs) -> list[np.ndarray]:
    """Each output (torch tensors or Kiln's arrays) as numpy, halves widened to f32."""
    arrays = [to_numpy(o.cpu()) if isinstance(o, torch.Tensor) else np.asarray(o)
              for o in flat(outputs)]
    return [a.astype(np.float32) if a.dtype in _HALVES else a for a in arrays]


def run(name, model, args) -> str:
    if name != "batchnorm_train":
        model.eval()
    with torch.no_grad():
        want = comparable(model(*args))
    try:
        program = exported_program_to_stablehlo(export(model, args))
    except Exception as e:  # noqa: BLE001  (any failure of the exporter is reported as such)
        return f"EXPORT ERROR {type(e).__name__}: {str(e).splitlines()[0][:160]}"
    function = program._bundle.stablehlo_funcs[0]
    state, constants = program._bundle.state_dict, program._bundle.additional_constants
    arguments = []
    for location in function.meta.input_locations:
        kind = location.type_.value
        if kind == "parameter":
            value = state[location.name]
            arguments.append(to_numpy(value) if isinstance(value, torch.Tensor) else np.asarray(value))
        elif kind == "input_arg":
            arguments.append(to_numpy(args[location.position]))
        else:
            arguments.append(np.asarray(constants[location.position]))
    try:
        start = time.perf_counter()
        exe = kiln.compile(program.get_stablehlo_bytecode("forward"))
        seconds = time.perf_counter() - start
        got = exe(*arguments)
    except Exception as e:  # noqa: BLE001
        return f"KILN ERROR {type(e).__name__}: {str(e)[:300]}"
    got = comparable(got)
    tol = 3e-2 if ("bf16" in name or "f16" in name) else 2e-4
    bad = [i for i, (g, w) in enumerate(zip(got, want))
           if g.shape != w.shape or not np.allclose(g, w, rtol=tol, atol=tol * max(1.0, float(np.abs(w).max())))]
    if bad or len(got) != len(want):
        # Kiln may still compute exactly what torch_xla's program says, where the program
        # differs from eager PyTorch: torch_xla's own run of it tells.
        with torch.no_grad():
            theirs = comparable(program(*args))
        if len(theirs) == len(got) and all(g.shape == t.shape and np.allclose(g, t, rtol=tol, atol=tol)
                                           for g, t in zip(got, theirs)):
            return ("EXPORT MISMATCH: torch_xla's program differs from eager PyTorch; Kiln "
                    "matches torch_xla's own run of it")
        return f"MISMATCH outputs {bad} of {len(want)}"
    return f"ok (compile {seconds:.1f} s)"


def main(names) -> int:
    cases = dict(CASES)
    cases.update({name: (lambda n=name: vision(n)) for name in VISION})
    failures = 0
    for name in names or cases:
        case = cases[name]
        model, args = case() if callable(case) else case
        verdict = run(name, model, args)
        failures += verdict.startswith(("MISMATCH", "KILN ERROR"))
        print(f"{name}: {verdict}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
