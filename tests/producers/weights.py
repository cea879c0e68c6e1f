"""Stand-in values for the arguments of the producer files, made again from a short recipe.

A producer's program (TensorFlow's HLO, torch_xla's StableHLO) takes its weights as arguments.
Storing them would put megabytes of random numbers in the repository; instead the script that
writes a file records, for each argument, a recipe (shape, dtype, seed, mean and spread, taken
from the framework's own initialization) and the sum of the values it made. The test makes the
same values from the recipe and checks the sum first, so a numpy that draws other numbers fails
with a message, not as a mismatch in the model's results.
"""
from __future__ import annotations

import numpy as np


def recipe(name: str, value: np.ndarray, seed: int) -> dict:
    """The recipe for an argument that looks like `value` (its initialized contents)."""
    value = np.asarray(value)
    entry = {"name": name, "shape": list(value.shape), "dtype": value.dtype.name, "seed": seed}
    if value.dtype.kind == "f":
        std = float(value.astype(np.float64).std()) if value.size else 0.0
        entry.update(mean=float(value.astype(np.float64).mean()) if value.size else 0.0, std=std)
    else:
        # Counters (BatchNorm's num_batches_tracked): keep the framework's value.
        entry.update(fill=int(value.reshape(-1)[0]) if value.size else 0)
    made = make(entry)
    entry["sum"] = float(made.astype(np.float64).sum())
    return entry


def make(entry: dict) -> np.ndarray:
    """The values an entry's recipe stands for."""
    shape, dtype = tuple(entry["shape"]), np.dtype(entry["dtype"])
    if "fill" in entry:
        return np.full(shape, entry["fill"], dtype)
    rng = np.random.default_rng(entry["seed"])
    if entry["std"] > 0:
        values = entry["mean"] + entry["std"] * rng.standard_normal(shape)
    else:
        # A constant (BatchNorm's ones and zeros): spread it a little so that scale and shift
        # matter, keeping its sign (variances stay positive).
        values = entry["mean"] + 0.1 * rng.random(shape)
    return values.astype(dtype)


def make_checked(entry: dict) -> np.ndarray:
    values = make(entry)
    total = float(values.astype(np.float64).sum())
    if not np.isclose(total, entry["sum"], rtol=1e-9, atol=1e-6):
        raise AssertionError(
            f"argument {entry['name']!r}: this numpy made other values than the script that wrote "
            f"the file (sum {total} vs {entry['sum']}); run the script again to remake the files")
    return values
