#!/usr/bin/env python
"""Real JAX models through Kiln's PJRT plugin against JAX's CPU backend (issue 26): a keras
(JAX backend) ResNet50 forward pass and a flax.nnx training loop of a small transformer, each
run in a process of its own under JAX_PLATFORMS=cpu and under JAX_PLATFORMS=kiln, with the same
random weights and data. Prints, per model, whether the results match, the first call (trace
and compile) and the median steady call on each platform.

    python tests/jax_suite/run_models.py [--models resnet50,nnx_transformer] [--json out.json]

Needs keras and flax (the `models` extra). Random weights only; nothing is downloaded.
Timings are the machine's at the time: run on a quiet machine, and say so when it was not.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

# Each model: a program run in a fresh process; it saves its outputs to argv[1] (.npy) and
# prints one JSON line {"first_s": ..., "steady_ms": ...}.
RESNET50 = r'''
import json, os, sys, time
os.environ["KERAS_BACKEND"] = "jax"
import numpy as np, keras
keras.utils.set_random_seed(0)
model = keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3))
x = np.random.default_rng(0).standard_normal((2, 224, 224, 3)).astype(np.float32)
start = time.perf_counter()
y = model.predict(x, verbose=0)
first = time.perf_counter() - start
times = []
for _ in range(5):
    start = time.perf_counter()
    model.predict(x, verbose=0)
    times.append(time.perf_counter() - start)
np.save(sys.argv[1], y)
print(json.dumps({"first_s": first, "steady_ms": sorted(times)[2] * 1e3}))
'''

NNX_TRANSFORMER = r'''
import json, sys, time
import numpy as np, jax, optax
from flax import nnx

class Block(nnx.Module):
    def __init__(self, d, heads, rngs):
        self.ln1, self.ln2 = nnx.LayerNorm(d, rngs=rngs), nnx.LayerNorm(d, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=heads, in_features=d, decode=False,
                                           rngs=rngs)
        self.fc1, self.fc2 = nnx.Linear(d, 4 * d, rngs=rngs), nnx.Linear(4 * d, d, rngs=rngs)
    def __call__(self, x, mask):
        x = x + self.attn(self.ln1(x), mask=mask)
        return x + self.fc2(jax.nn.gelu(self.fc1(self.ln2(x))))

class LM(nnx.Module):
    def __init__(self, vocab=256, d=64, heads=4, layers=2, seq=32, rngs=None):
        self.embed = nnx.Embed(vocab, d, rngs=rngs)
        self.pos = nnx.Param(jax.random.normal(rngs.params(), (seq, d)) * 0.02)
        self.blocks = nnx.List([Block(d, heads, rngs) for _ in range(layers)])
        self.ln, self.head = nnx.LayerNorm(d, rngs=rngs), nnx.Linear(d, vocab, rngs=rngs)
    def __call__(self, tokens):
        x = self.embed(tokens) + self.pos[...][: tokens.shape[1]]
        mask = nnx.make_causal_mask(tokens)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln(x))

model = LM(rngs=nnx.Rngs(0))
optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)

@nnx.jit
def step(model, optimizer, tokens):
    def loss_fn(model):
        logits = model(tokens[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()
    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss

data = np.random.default_rng(0).integers(0, 256, (20, 8, 33)).astype(np.int32)
start = time.perf_counter()
losses = [float(step(model, optimizer, data[0]))]
first = time.perf_counter() - start
times = []
for batch in data[1:]:
    start = time.perf_counter()
    losses.append(float(step(model, optimizer, batch)))
    times.append(time.perf_counter() - start)
np.save(sys.argv[1], np.array(losses))
print(json.dumps({"first_s": first, "steady_ms": sorted(times)[len(times) // 2] * 1e3}))
'''

# name: (program, what it computes, rtol, atol)
MODELS = {
    "resnet50": (RESNET50, "keras.applications ResNet50 forward, batch 2, 224x224", 1e-4, 1e-6),
    "nnx_transformer": (NNX_TRANSFORMER, "flax.nnx 2-layer transformer, adamw, 20 training "
                        "steps (the losses)", 1e-4, 1e-5),
}


def run(program: str, platform: str, out: Path, timeout: int) -> dict:
    env = dict(os.environ, JAX_PLATFORMS=platform)
    proc = subprocess.run([sys.executable, "-c", program, str(out)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["(no output)"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated, of: " + ", ".join(MODELS))
    parser.add_argument("--timeout", type=int, default=1200, help="seconds per model and platform")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            program, what, rtol, atol = MODELS[name]
            row = {"model": name, "what": what}
            for platform in ("cpu", "kiln"):
                row[platform] = run(program, platform, Path(tmp) / f"{name}_{platform}.npy",
                                    args.timeout)
            if "error" in row["cpu"] or "error" in row["kiln"]:
                row["match"] = False
            else:
                want = np.load(Path(tmp) / f"{name}_cpu.npy")
                got = np.load(Path(tmp) / f"{name}_kiln.npy")
                row["max_abs_diff"] = float(np.max(np.abs(got - want)))
                row["match"] = bool(np.allclose(got, want, rtol=rtol, atol=atol))
            rows.append(row)
            cpu, kiln = row["cpu"], row["kiln"]
            if row["match"]:
                print(f"{name}: matches CPU (max |diff| {row['max_abs_diff']:.2g}); first call "
                      f"CPU {cpu['first_s']:.1f} s, Kiln {kiln['first_s']:.1f} s; steady CPU "
                      f"{cpu['steady_ms']:.1f} ms, Kiln {kiln['steady_ms']:.1f} ms "
                      f"(CPU/Kiln {cpu['steady_ms'] / kiln['steady_ms']:.2f}x)", flush=True)
            else:
                print(f"{name}: DOES NOT MATCH: cpu {cpu} kiln {kiln}"
                      + (f" max |diff| {row['max_abs_diff']:.3g}" if "max_abs_diff" in row
                         else ""), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(r["match"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
