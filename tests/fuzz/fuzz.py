"""A seeded mutation fuzzer for Kiln's front ends, compiler and runtime.

Each mutant of a seed program (conformance data, HLO dumps, JAX exports, portable artifacts)
is compiled and, when its arguments are small, run on zeros, in a forked child with a memory
cap and a time limit. Outcomes:

    ok         compiled (and ran)
    error      a KilnError (or CheckFailure): the located, user-facing failure Kiln promises
    stray      any other exception, or Kiln's InternalError: a bug
    signal     the child died (SIGSEGV, SIGABRT...): a bug, and a dead user process
    hang       the child ran past the time limit: a bug

Only `ok` and `error` are acceptable. CI runs a small sample (tests/py/test_fuzz.py); a large
campaign runs on demand:

    python tests/fuzz/fuzz.py --count 5000 --jobs 2 --seed 1 [--json out.json] [--save DIR]
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("KILN_SHARED", REPO.parent / "shared"))
BAD = ("stray", "signal", "hang")


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
def _child(data: bytes, send) -> None:
    os.environ["KILN_READ_TIMEOUT"] = "20"  # Kiln's reader process gives up before we do
    # This child is the isolation: compile in it, so a compiler crash shows as its signal
    # (in a compile worker it would be a KilnError naming the signal, counted the same below).
    os.environ["KILN_COMPILE_IN_PROCESS"] = "1"
    os.environ["KILN_CACHE"] = "0"
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))  # a runaway allocation fails
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # MLIR prints diagnostics as it fails
    import faulthandler
    faulthandler.disable()
    try:
        import numpy as np
        import kiln
        exe = kiln.compile(data, filename="mutant")
        specs = exe.arg_specs
        shapes = [tuple(2 if d is None else d for d in s.shape) for s in specs]
        size = sum(int(np.prod(s, dtype=np.int64)) * s_.dtype.itemsize
                   for s, s_ in zip(shapes, specs))
        if size <= 64 << 20:
            exe.run_checks(*[np.zeros(s, spec.dtype) for s, spec in zip(shapes, specs)])
        send.send(("ok", ""))
    except kiln.errors.InternalError as exc:  # Kiln's own bug, caught at its API boundary
        send.send(("stray", exc.one_line()[:300]))
    except kiln.KilnError as exc:
        crashed = "crashed (SIG" in exc.message and "compiling" in exc.message
        send.send(("signal" if crashed else "error", exc.one_line()[:300]))
    except BaseException as exc:  # noqa: BLE001 - what the fuzzer is looking for
        send.send(("stray", f"{type(exc).__name__}: {str(exc)[:300]}"))


def run_one(data: bytes, timeout: float) -> tuple[str, str]:
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(data, send))
    child.start()
    send.close()
    try:
        reply = receive.recv() if receive.poll(timeout) else None
    except EOFError:  # the child died before answering
        reply = None
    if reply is None and child.is_alive():
        child.kill()
        child.join()
        return "hang", f"no answer in {timeout:.0f} s"
    child.join()
    if reply is None:
        return "signal", f"exit code {child.exitcode}"
    return reply


SAVE_DIR: Path | None = None  # where bad mutants are written (--save)


def _job(args) -> Outcome:
    seed, mutation, data, timeout = args
    kind, detail = run_one(data, timeout)
    if SAVE_DIR is not None and kind in BAD:
        SAVE_DIR.mkdir(parents=True, exist_ok=True)
        (SAVE_DIR / f"{kind}-{abs(hash(data)) % 10**8:08d}-{seed}").write_bytes(data)
    return Outcome(seed, mutation, kind, detail)


def campaign(count: int, seed: int = 0, jobs: int = 1, timeout: float = 60.0,
             report=None) -> list[Outcome]:
    rng = random.Random(seed)
    corpus = seeds(rng)
    work = []
    for _ in range(count):
        s = rng.choice(corpus)
        mutate = rng.choice(MUTATIONS)
        work.append((s.name, mutate.__name__, mutate(s.data, rng), timeout))
    outcomes = []
    if jobs <= 1:
        results = map(_job, work)
    else:
        # Threads only wait on forked children, so a thread pool is enough (and keeps the
        # children forked from this process, which never runs compiled code itself).
        from concurrent.futures import ThreadPoolExecutor
        results = ThreadPoolExecutor(jobs).map(_job, work)
    for outcome in results:
        outcomes.append(outcome)
        if report:
            report(outcome)
    return outcomes


def summary(outcomes: list[Outcome]) -> dict[str, int]:
    counts = collections.Counter(o.kind for o in outcomes)
    return {k: counts.get(k, 0) for k in ("ok", "error", "stray", "signal", "hang")}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per mutant")
    parser.add_argument("--json", help="write every outcome here")
    parser.add_argument("--show", default="stray,signal,hang", help="outcome kinds to print")
    parser.add_argument("--save", help="write every bad mutant into this directory")
    parser.add_argument("--make-binary-seeds", nargs=2, metavar=("TEXTS", "OUT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
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
    outcomes = campaign(args.count, args.seed, args.jobs, args.timeout,
                        report=lambda o: o.kind in show and print(
                            f"{o.kind}: {o.seed} ({o.mutation}): {o.detail}", flush=True))
    counts = summary(outcomes)
    print(f"{len(outcomes)} mutants in {time.monotonic() - start:.0f} s: "
          + ", ".join(f"{v} {k}" for k, v in counts.items()))
    if args.json:
        Path(args.json).write_text(json.dumps([o.__dict__ for o in outcomes], indent=1))
    return 1 if any(counts[k] for k in BAD) else 0


if __name__ == "__main__":
    sys.exit(main())
