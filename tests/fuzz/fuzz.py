"""A seeded mutation fuzzer for Kiln's front ends, compiler and runtime.

Each mutant of a seed program (conformance data, HLO dumps, JAX exports, portable artifacts)
is compiled and, when its arguments are small, run on zeros, in a long-lived worker process
with a memory cap and a time limit per mutant (tests/fuzz/workers.py: a worker that dies or
hangs is replaced, and its mutant rerun alone). Outcomes:

    ok         compiled (and ran)
    error      a KilnError (or CheckFailure): the located, user-facing failure Kiln promises
    internal   Kiln's InternalError: a bug
    stray      any other exception: a bug
    signal     the worker died (SIGSEGV, SIGABRT...): a bug, and a dead user process
    hang       the worker ran past the time limit: a bug

Only `ok` and `error` are acceptable. CI runs a small sample (tests/py/test_fuzz.py); a large
campaign runs on demand:

    python tests/fuzz/fuzz.py --count 5000 --jobs 2 --seed 1 [--json out.json] [--save DIR]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("KILN_SHARED", REPO.parent / "shared"))
BAD = ("stray", "internal", "signal", "hang")


@dataclass
class Seed:
    name: str
    data: bytes


@dataclass
class Outcome:
    seed: str
    mutation: str
    kind: str
    detail: str = ""


# -- seeds ------------------------------------------------------------------------------------
def seeds(rng: random.Random, per_kind: int = 40) -> list[Seed]:
    """A mix of every input form: MLIR text (testdata and interpret suite), HLO text, portable
    artifacts and MLIR bytecode, and serialized JAX exports when jax is installed."""
    out: list[Seed] = []
    testdata = sorted((SHARED / "conformance" / "stablehlo-testdata").glob("*.mlir"))
    interpret = sorted((SHARED / "conformance" / "stablehlo-interpret").glob("*.mlir"))
    small = [p for p in testdata if p.stat().st_size < 40_000]
    for path in rng.sample(small, min(per_kind, len(small))) + \
            rng.sample(interpret, min(per_kind // 2, len(interpret))):
        out.append(Seed(path.name, path.read_bytes()))
    for path in sorted((REPO / "tests" / "lit" / "hlo").glob("*.hlo")):
        out.append(Seed(path.name, path.read_bytes()))
    return out + _binary_seeds_in_subprocess([s for s in out if s.name.endswith(".mlir")]
                                             [:per_kind // 2])


def _binary_seeds_in_subprocess(texts: list[Seed]) -> list[Seed]:
    """Portable artifacts and JAX exports, made in a separate process: this one forks a child
    per mutant, which must not inherit jax's or MLIR's threads."""
    import pickle
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "texts.pickle", Path(tmp) / "seeds.pickle"
        src.write_bytes(pickle.dumps([(t.name, t.data) for t in texts]))
        subprocess.run([sys.executable, __file__, "--make-binary-seeds", str(src), str(dst)],
                       check=True)
        return [Seed(name, data) for name, data in pickle.loads(dst.read_bytes())]


def _binary_seeds(texts: list[Seed]) -> list[Seed]:
    from torch_mlir._mlir_libs import _stablehlo
    out = []
    for seed in texts:
        try:
            artifact = _stablehlo.serialize_portable_artifact_str(
                seed.data.decode(), _stablehlo.get_current_version())
        except Exception:  # noqa: BLE001 - a seed the serializer cannot take is skipped
            continue
        out.append(Seed(seed.name + ".artifact", bytes(artifact)))
    return out


def _jax_seeds() -> list[Seed]:
    try:
        import jax
        import jax.numpy as jnp
        import numpy as np
    except ImportError:
        return []
    x = np.ones((4, 8), np.float32)
    programs = {
        "mlp": lambda x: jnp.tanh(x @ x.T).sum(axis=0),
        "cumsum": lambda x: jnp.cumsum(x, axis=1),
        "sort": lambda x: jnp.sort(x, axis=0),
        "softmax": lambda x: jax.nn.softmax(x),
        "scan": lambda x: jax.lax.scan(lambda c, r: (c + r, c * r), x[0], x)[1],
    }
    return [Seed(f"jax_{name}.jax", bytes(jax.export.export(jax.jit(f))(x).serialize()))
            for name, f in programs.items()]


# -- mutations --------------------------------------------------------------------------------
_NUMBER = re.compile(rb"-?\b\d+\b")
_DIMS = re.compile(rb"(tensor<|\[)(\d+(?:[x,]\d+)*)")
_TOKEN = re.compile(rb"[A-Za-z_][\w.$]*|%[\w#]+|[{}()\[\]<>,:=]")
_INTERESTING = [b"0", b"1", b"-1", b"2", b"-2", b"64", b"65", b"255", b"2147483647",
                b"-2147483648", b"4294967296", b"9223372036854775807", b"99999999999999999999"]


def byte_flip(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 4])):
        if out:
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def token_edit(data: bytes, rng: random.Random) -> bytes:
    tokens = list(_TOKEN.finditer(data))
    if len(tokens) < 2:
        return byte_flip(data, rng)
    target, donor = rng.choice(tokens), rng.choice(tokens)
    how = rng.randrange(3)
    replacement = donor.group() if how == 0 else b"" if how == 1 else \
        target.group() + b" " + donor.group()
    return data[:target.start()] + replacement + data[target.end():]


def number_swap(data: bytes, rng: random.Random) -> bytes:
    numbers = list(_NUMBER.finditer(data))
    if not numbers:
        return byte_flip(data, rng)
    target = rng.choice(numbers)
    value = rng.choice(_INTERESTING + [rng.choice(numbers).group()])
    return data[:target.start()] + value + data[target.end():]


def dimension_swap(data: bytes, rng: random.Random) -> bytes:
    shapes = list(_DIMS.finditer(data))
    if not shapes:
        return number_swap(data, rng)
    target = rng.choice(shapes)
    dims = re.split(rb"([x,])", target.group(2))
    positions = list(range(0, len(dims), 2))
    how = rng.randrange(3)
    if how == 0 and len(positions) > 1:
        i, j = rng.sample(positions, 2)
        dims[i], dims[j] = dims[j], dims[i]
    elif how == 1:
        dims[rng.choice(positions)] = rng.choice([b"0", b"1", b"3", b"100000", b"4294967296"])
    else:
        sep = b"x" if b"x" in target.group(2) or target.group(1) == b"tensor<" else b","
        dims += [sep, b"2"]
    return data[:target.start(2)] + b"".join(dims) + data[target.end(2):]


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[:rng.randrange(len(data) + 1)]


MUTATIONS = [byte_flip, token_edit, number_swap, dimension_swap, truncate]


# -- running ----------------------------------------------------------------------------------
def run_mutant(data: bytes) -> tuple[str, str]:
    """Compile `data` and, when its arguments are small, run it on zeros: in a fuzz worker
    (tests/fuzz/workers.py), which compiles in its own process, so a compiler crash shows as
    the worker's signal."""
    import numpy as np
    import kiln
    try:
        exe = kiln.compile(data, filename="mutant")
        specs = exe.arg_specs
        shapes = [tuple(2 if d is None else d for d in s.shape) for s in specs]
        size = sum(int(np.prod(s, dtype=np.int64)) * s_.dtype.itemsize
                   for s, s_ in zip(shapes, specs))
        if size <= 64 << 20:
            exe.run_checks(*[np.zeros(s, spec.dtype) for s, spec in zip(shapes, specs)])
        return "ok", ""
    except kiln.errors.InternalError as exc:  # Kiln's own bug, caught at its API boundary
        import workers
        return "internal", workers.internal_error_detail(exc)[:500]
    except kiln.KilnError as exc:
        crashed = "crashed (SIG" in exc.message and "compiling" in exc.message
        return ("signal" if crashed else "error"), exc.one_line()[:300]
    except BaseException as exc:  # noqa: BLE001 - what the fuzzer is looking for
        return "stray", f"{type(exc).__name__}: {str(exc)[:300]}"


def _warm_up() -> None:
    run_mutant(b"func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
               b"  %y = stablehlo.add %x, %x : tensor<2xf32>\n  return %y : tensor<2xf32>\n}")


def run_one(data: bytes, timeout: float) -> tuple[str, str]:
    """One mutant in a fresh worker (slow: for a single case; campaigns reuse workers)."""
    (outcome,) = _run([("one", "", data)], jobs=1, timeout=timeout)
    return outcome.kind, outcome.detail


SAVE_DIR: Path | None = None  # where bad mutants are written (--save)


def _run(work, jobs: int, timeout: float, report=None, deadline=None) -> list[Outcome]:
    """work: an iterable of (seed name, mutation name, data), consumed lazily (a campaign's
    mutants are made as workers ask for them, so 20,000 are never all in memory)."""
    import workers
    pool = workers.Pool(workers.script_argv(__file__, "--worker", "--timeout", str(timeout)),
                        jobs=jobs, timeout=timeout,
                        memory=6 << 30, deadline=deadline)
    in_flight: dict[int, tuple] = {}
    by_key: dict[int, Outcome] = {}

    def cases():
        for i, item in enumerate(work):
            in_flight[i] = item
            yield i, item[2]

    try:
        for result in workers.until_interrupted(pool.run(cases()), "mutants"):
            seed, mutation, data = in_flight.pop(result.key)
            if result.kind == "reply":
                kind, detail = result.reply
            else:
                kind = result.kind
                detail = result.detail + ("" if result.reproduced is None else
                                          " (reproduced alone)" if result.reproduced else
                                          " (NOT reproduced alone)")
            if SAVE_DIR is not None and kind in BAD:
                SAVE_DIR.mkdir(parents=True, exist_ok=True)
                (SAVE_DIR / f"{kind}-{result.key:06d}-{seed}").write_bytes(data)
            outcome = Outcome(seed, mutation, kind, detail)
            by_key[result.key] = outcome
            if report:
                report(outcome)
    finally:
        pool.cleanup()
    return [by_key[i] for i in sorted(by_key)]


def campaign(count: int, seed: int = 0, jobs: int = 1, timeout: float = 60.0,
             report=None, deadline: float | None = None) -> list[Outcome]:
    """`count` mutants of seed programs, run on `jobs` long-lived workers (restarted after a
    crash; every signal and hang is rerun alone to see whether it reproduces)."""
    rng = random.Random(seed)
    corpus = seeds(rng)

    def mutants():
        for _ in range(count):
            s = rng.choice(corpus)
            mutate = rng.choice(MUTATIONS)
            yield s.name, mutate.__name__, mutate(s.data, rng)

    return _run(mutants(), jobs, timeout, report, deadline)


def summary(outcomes: list[Outcome]) -> dict[str, int]:
    counts = collections.Counter(o.kind for o in outcomes)
    return {k: counts.get(k, 0) for k in ("ok", "error", "stray", "internal", "signal", "hang")}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per mutant")
    parser.add_argument("--json", help="write every outcome here")
    parser.add_argument("--show", default="stray,internal,signal,hang", help="outcome kinds to print")
    parser.add_argument("--save", help="write every bad mutant into this directory")
    parser.add_argument("--until", metavar="HH:MM", help="start no mutant after this UTC time")
    parser.add_argument("--make-binary-seeds", nargs=2, metavar=("TEXTS", "OUT"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        import workers
        workers.serve(run_mutant, _warm_up, run_time_limit=args.timeout / 3)
        return 0
    if args.make_binary_seeds:
        import pickle
        texts = [Seed(*t) for t in pickle.loads(Path(args.make_binary_seeds[0]).read_bytes())]
        made = _binary_seeds(texts) + _jax_seeds()
        Path(args.make_binary_seeds[1]).write_bytes(pickle.dumps([(m.name, m.data) for m in made]))
        return 0
    show = set(args.show.split(","))
    global SAVE_DIR
    SAVE_DIR = Path(args.save) if args.save else None
    start = time.monotonic()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    import workers
    workers.stop_on_terminate()
    outcomes = campaign(args.count, args.seed, args.jobs, args.timeout,
                        report=lambda o: o.kind in show and print(
                            f"{o.kind}: {o.seed} ({o.mutation}): {o.detail}", flush=True),
                        deadline=workers.deadline(args.until))
    counts = summary(outcomes)
    seconds = time.monotonic() - start
    print(f"mutation campaign, seed {args.seed}, {len(outcomes)} of {args.count} mutants asked, "
          f"started {started}, ended {time.strftime('%H:%M:%S UTC', time.gmtime())}")
    print(f"{len(outcomes)} mutants in {seconds:.0f} s with {args.jobs} jobs "
          f"({len(outcomes) / max(seconds, 1e-9):.1f} mutants/s): "
          + ", ".join(f"{v} {k}" for k, v in counts.items()))
    if args.json:
        Path(args.json).write_text(json.dumps([o.__dict__ for o in outcomes], indent=1))
    return 1 if any(counts[k] for k in BAD) else 0


if __name__ == "__main__":
    sys.exit(main())
