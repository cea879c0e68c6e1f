"""A structure-aware fuzzer: random *valid* StableHLO programs (tests/fuzz/programs.py) run
on adversarial values, through kiln.compile and a call, in crash-proof workers
(tests/fuzz/workers.py). Outcomes of a program:

    result       Kiln returned values; then the oracle, the StableHLO reference interpreter on
                 the same inputs, gives one of
                   match         the same values (NaNs equal whatever their payload)
                   mismatch      different values from a program whose semantics are exact
                   inexact       different beyond a tolerance, where rounding or summation order
                                 may legitimately differ (transcendentals, float sums, f16)
                   refused       Kiln returned a result although its own values for the
                                 indices/sizes violate a run-time constraint of the spec
                                 (real_dynamic_slice bounds, negative dynamic sizes, CSR
                                 operands of the built-in sparse target)
                   unverified    implementation-defined behaviour (integer division by zero,
                                 float-to-int of NaN...), dynamic arguments, or no oracle
    kiln-error   a KilnError: acceptable (it says what is wrong, located)
    internal     Kiln's InternalError: a bug
    stray        any other exception: a bug
    signal       the worker died (SIGSEGV, SIGFPE, SIGABRT...): a bug
    hang         no answer within the time limit: a bug

    python tests/fuzz/generate.py --count 2000 --seed 1 --jobs 2 --out /tmp/fuzz-out
    python tests/fuzz/generate.py --show 1:17            # print program 17 of seed 1
    python tests/fuzz/generate.py --replay /tmp/fuzz-out/signal-1-17   # rerun a saved failure

Every failure and mismatch is saved under --out as program.mlir, inputs.npz and outcome.json.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import programs  # noqa: E402
import workers  # noqa: E402

FAILURES = ("signal", "hang", "stray", "internal")
SAVED = FAILURES + ("mismatch", "refused", "pass-failure")
ROWS = [("programs", None), ("results", "result"), ("KilnErrors", "kiln-error"),
        ("signals", "signal"), ("hangs", "hang"), ("stray exceptions", "stray"),
        ("InternalErrors", "internal"), ("mismatches", "mismatch"),
        ("pass failures (KilnError: invalid IR after a Kiln pass)", "pass-failure"),
        ("refused by the spec, ran in Kiln", "refused"), ("inexact (beyond tolerance)", "inexact"),
        ("matched the interpreter", "match"), ("unverified", "unverified")]


# -- in the worker ---------------------------------------------------------------------------
def _warm_up() -> None:
    import numpy as np
    import kiln
    exe = kiln.compile('func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n'
                       '  %y = stablehlo.add %x, %x : tensor<2xf32>\n  return %y : tensor<2xf32>\n}',
                       filename="warm-up")
    exe(np.ones(2, np.float32))


def run_case(case) -> dict:
    """Compile and call one program (a case of make_case, or a saved one), then ask the
    oracle. Every exception is classified here; a crash is the parent's to see."""
    import numpy as np
    import kiln
    from kiln.errors import InternalError, KilnError
    text, inputs, arg_types = case["text"], case["inputs"], case["arg_types"]
    flags, dynamic = set(case.get("flags", ())), case.get("dynamic", False)
    constraints = case.get("constraints", [])
    phase = "compile"
    try:
        exe = kiln.compile(text, filename="generated.mlir")
        phase = "call"
        results = exe(*inputs)
    except InternalError as exc:
        return {"kind": "internal", "phase": phase, "detail": workers.internal_error_detail(exc)[:600]}
    except KilnError as exc:
        said = exc.one_line()
        # Kiln verifies the IR after its own passes: a failure there on a valid program is a
        # compiler bug, even though it reaches the user as a located KilnError.
        kind = "pass-failure" if re.search(r"stage '[\w-]+' failed after", said) else "kiln-error"
        if "crashed (SIG" in said:  # a crash contained by one of Kiln's helper processes
            kind = "signal"
        return {"kind": kind, "phase": phase, "detail": said[:600]}
    except BaseException as exc:  # noqa: BLE001 - what the fuzzer is looking for
        return {"kind": "stray", "phase": phase, "detail": f"{type(exc).__name__}: {str(exc)[:400]}"}
    broken = programs.constraint_violations(constraints, results)
    if broken:
        return {"kind": "result", "oracle": "refused", "detail": "violates the spec, yet ran: "
                + "; ".join(broken)[:400], "got": _short(results)}
    if "custom call" in flags:
        return {"kind": "result", "oracle": "unverified", "detail": "no oracle for custom calls"}
    if not case.get("oracle", True) or dynamic or "?" in text:
        # The interpreter aborts on dynamically shaped values: those programs are checked by
        # their run-time constraints (above) and the absence of crashes only.
        return {"kind": "result", "oracle": "unverified", "detail": "oracle off" if not
                case.get("oracle", True) else "no oracle for dynamic shapes"}
    from kiln import reference
    try:
        expected = reference.evaluate(text, [np.asarray(a) for a in inputs], arg_types)
    except KilnError as exc:  # it cannot run the program (or crashed on it): no verdict
        return {"kind": "result", "oracle": "unverified", "detail": "interpreter: " + exc.one_line()[:300]}
    verdict, detail = compare(list(results), list(expected), flags)
    out = {"kind": "result", "oracle": verdict, "detail": detail}
    if verdict in ("mismatch", "inexact"):
        out["got"], out["expected"] = _short(results), _short(expected)
    return out


IMPLEMENTATION_DEFINED = {"integer divide", "integer remainder", "integer power",
                          "float to integer conversion", "NaN payload", "scatter order",
                          "sort with NaN", "sort order of equal keys", "totalorder", "unsigned index",
                          "scatter window out of bounds"}
ROUNDING = {"approximate", "float sum order"}


def compare(got: list, expected: list, flags: set) -> tuple[str, str]:
    """match / mismatch / inexact / unverified for Kiln's results against the interpreter's."""
    import numpy as np
    if len(got) != len(expected):
        return "mismatch", f"{len(got)} results, the interpreter gave {len(expected)}"
    inexact = bool(flags & ROUNDING) or any(str(np.asarray(g).dtype) in ("float16", "bfloat16")
                                            for g in got)
    differs = None
    for i, (g, e) in enumerate(zip(got, expected)):
        g, e = np.asarray(g), np.asarray(e)
        if g.shape != e.shape:
            return "mismatch", f"result {i}: shape {g.shape}, the interpreter's {e.shape}"
        if g.dtype.kind in "fV" or str(g.dtype) == "bfloat16":
            same, close = _float_equal(g, e)
            if not same and not (inexact and close):
                differs = differs or (i, close)
        elif not np.array_equal(g, e.astype(g.dtype)):
            differs = differs or (i, False)
    if differs is None:
        return "match", ""
    i, close = differs
    if flags & IMPLEMENTATION_DEFINED:
        return "unverified", f"result {i} differs, implementation-defined: {sorted(flags & IMPLEMENTATION_DEFINED)}"
    if inexact:
        return "inexact", f"result {i} differs beyond tolerance ({sorted(flags & ROUNDING) or 'f16/bf16'})"
    return "mismatch", f"result {i} differs" + (" (within tolerance, but the ops are exact)" if close else "")


def _float_equal(g, e) -> tuple[bool, bool]:
    """(bitwise-equal up to NaN payloads, equal within a tolerance)."""
    import numpy as np
    g64, e64 = g.astype(np.float64), np.asarray(e).astype(np.float64)
    nan_g, nan_e = np.isnan(g64), np.isnan(e64)
    if not np.array_equal(nan_g, nan_e):
        return False, False
    a, b = g64[~nan_g], e64[~nan_e]
    if np.array_equal(a, b) and np.array_equal(np.signbit(a), np.signbit(b)):
        return True, True
    return False, bool(np.allclose(a, b, rtol=1e-3, atol=1e-6, equal_nan=True))


def _short(values) -> str:
    import numpy as np
    return "; ".join(np.array2string(np.asarray(v), threshold=20, precision=6)[:200] for v in values)


# -- in the parent ---------------------------------------------------------------------------
def classify(result: workers.Result) -> tuple[str, str]:
    """(outcome, detail): one row of the summary."""
    if result.kind != "reply":
        again = "" if result.reproduced is None else \
            (" (reproduced alone)" if result.reproduced else " (NOT reproduced alone)")
        return result.kind, result.detail + again
    reply = result.reply
    if reply["kind"] == "result":
        return reply["oracle"], reply.get("detail", "")
    return reply["kind"], f"[{reply.get('phase')}] {reply.get('detail', '')}"


def make_case(seed: int, index: int, oracle: bool = True) -> dict:
    """Program `index` of `seed` with its inputs, as the worker runs it. It is made here, in
    the parent, so what is saved after a crash is exactly what ran."""
    program = programs.make_program(seed, index)
    return {"text": program.text, "inputs": programs.make_inputs(program, seed, index),
            "arg_types": [a.value.type for a in program.args], "flags": sorted(program.flags),
            "dynamic": program.has_dynamic_args, "constraints": program.constraints,
            "oracle": oracle, "ops": program.ops, "seed": seed, "index": index}


def save(out: Path, outcome: str, case: dict, detail: str, reply) -> Path:
    import numpy as np
    where = out / f"{outcome}-{case['seed']}-{case['index']}"
    where.mkdir(parents=True, exist_ok=True)
    (where / "program.mlir").write_text(case["text"])
    np.savez(where / "inputs.npz", **{f"arg{i}": np.asarray(a) for i, a in enumerate(case["inputs"])})
    info = {"outcome": outcome, "seed": case["seed"], "index": case["index"], "detail": detail,
            "ops": case["ops"], "flags": case["flags"], "arg_types": case["arg_types"],
            "dynamic": case["dynamic"], "constraints": case["constraints"],
            "inputs": [repr(np.asarray(a).tolist())[:200] for a in case["inputs"]],
            "reply": reply if isinstance(reply, dict) else None,
            "replay": f"python tests/fuzz/generate.py --replay {where}"}
    (where / "outcome.json").write_text(json.dumps(info, indent=1, default=str))
    return where


def campaign(count: int, seed: int = 0, jobs: int = 1, timeout: float = 30.0,
             out: Path | None = None, start: int = 0, oracle: bool = True, report=None,
             oracle_every: int = 1, deadline: float | None = None):
    """Run programs start..start+count-1 of `seed`. Returns (Counter of outcomes, list of
    (outcome, index, detail) for failures, mismatches and pass failures)."""
    pool = workers.Pool(workers.script_argv(__file__, "--worker", "--timeout", str(timeout)),
                        jobs=jobs, timeout=timeout,
                        deadline=deadline)
    counts: collections.Counter = collections.Counter()
    notable = []
    in_flight: dict[int, dict] = {}

    def cases():
        for i in range(start, start + count):
            in_flight[i] = make_case(seed, i, oracle and i % oracle_every == 0)
            yield i, in_flight[i]

    try:
        for result in workers.until_interrupted(pool.run(cases()), "programs"):
            case = in_flight.pop(result.key)
            outcome, detail = classify(result)
            counts["programs"] += 1
            if outcome in ("match", "mismatch", "inexact", "refused", "unverified"):
                counts["result"] += 1
            counts[outcome] += 1
            if outcome in SAVED:
                notable.append((outcome, result.key, detail))
                if out is not None:
                    save(out, outcome, case, detail, result.reply)
            if report:
                report(outcome, result.key, detail)
    finally:
        counts["worker starts"] = pool.restarts
        pool.cleanup()
    return counts, notable


def summary_table(counts, seconds: float, jobs: int) -> str:
    width = max(len(label) for label, _ in ROWS) + 2
    lines = [f"{'outcome':<{width}}{'count':>8}"]
    for label, key in ROWS:
        lines.append(f"{label:<{width}}{counts.get(key or 'programs', 0):>8}")
    n = counts.get("programs", 0)
    lines.append(f"{'worker starts':<{width}}{counts.get('worker starts', 0):>8}")
    lines.append(f"{n} programs in {seconds:.0f} s with {jobs} jobs: {n / max(seconds, 1e-9):.1f} programs/s")
    return "\n".join(lines)


def load_inputs(path: Path, arg_types: list[str]) -> list:
    """The saved arguments, with the dtypes npz cannot keep (bfloat16) restored from the types."""
    import numpy as np
    with np.load(path) as data:
        inputs = [data[f"arg{i}"] for i in range(len(data.files))]
    for i, t in enumerate(arg_types):
        element = t[t.rfind("x") + 1 if "x" in t else len("tensor<"):-1]
        if inputs[i].dtype.kind == "V":
            inputs[i] = inputs[i].view(programs.numpy_dtype(element))
    return inputs


def replay(directory: Path) -> int:
    """Run a saved program in this process (no isolation: a crash here is the finding)."""
    import numpy as np
    info = json.loads((directory / "outcome.json").read_text())
    inputs = load_inputs(directory / "inputs.npz", info["arg_types"])
    os.environ.setdefault("KILN_COMPILE_IN_PROCESS", "1")
    os.environ.setdefault("KILN_CACHE", "0")
    print(f"was: {info['outcome']}: {info['detail'][:300]}", flush=True)
    reply = run_case({"text": (directory / "program.mlir").read_text(), "inputs": inputs,
                      "arg_types": info["arg_types"], "flags": info["flags"],
                      "dynamic": info.get("dynamic", False),
                      "constraints": info.get("constraints", [])})
    print(f"now: {json.dumps(reply)[:1000]}")
    return 0 if reply["kind"] in ("result", "kiln-error") and reply.get("oracle") not in \
        ("mismatch", "refused") else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="first program index")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per program")
    parser.add_argument("--out", help="save every failure and mismatch here")
    parser.add_argument("--no-oracle", action="store_true", help="skip the reference interpreter")
    parser.add_argument("--oracle-every", type=int, default=1, metavar="N",
                        help="ask the reference interpreter about every Nth program only (faster)")
    parser.add_argument("--json", help="write the counts here")
    parser.add_argument("--until", metavar="HH:MM", help="start no program after this UTC time "
                        "(the summary gives the exact count that ran)")
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    parser.add_argument("--show", metavar="SEED:INDEX", help="print one program and its inputs")
    parser.add_argument("--replay", metavar="DIR", help="rerun a saved program")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        workers.serve(run_case, _warm_up, run_time_limit=args.timeout / 3)
        return 0
    if args.show:
        seed, index = map(int, args.show.split(":"))
        program = programs.make_program(seed, index)
        print(program.text)
        print("// flags:", sorted(program.flags))
        for a, v in zip(program.args, programs.make_inputs(program, seed, index)):
            print(f"// {a.value.name} ({a.role}): {v.tolist()!r}"[:300])
        return 0
    if args.replay:
        return replay(Path(args.replay))
    out = Path(args.out) if args.out else None
    started, wall = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), time.monotonic()
    show = set(SAVED)

    def report(outcome, index, detail):
        if outcome in show and not args.quiet:
            print(f"{outcome}: {args.seed}:{index}: {detail[:300]}", flush=True)

    workers.stop_on_terminate()
    counts, _ = campaign(args.count, args.seed, args.jobs, args.timeout, out, args.start,
                         not args.no_oracle, report, args.oracle_every, workers.deadline(args.until))
    seconds = time.monotonic() - wall
    print(f"generated-program campaign, seed {args.seed}, programs {args.start}.."
          f"{args.start + counts['programs'] - 1} ({counts['programs']} of {args.count} asked), "
          f"started {started}, ended {time.strftime('%H:%M:%S UTC', time.gmtime())}, oracle on every "
          f"{args.oracle_every if not args.no_oracle else 'no'} program(s)")
    print(summary_table(counts, seconds, args.jobs))
    if args.json:
        Path(args.json).write_text(json.dumps({"started": started, "seconds": seconds,
                                               "seed": args.seed, "start": args.start,
                                               "jobs": args.jobs, **counts}, indent=1))
    return 1 if any(counts.get(k) for k in FAILURES) else 0


if __name__ == "__main__":
    sys.exit(main())
