"""kiln: compile and run programs, and run the conformance suite."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from .common import ArgumentParser, guarded


def build_parser() -> ArgumentParser:
    """The `kiln` command line (also read by the generated CLI reference, docs/)."""
    parser = ArgumentParser(prog="kiln", description=__doc__)
    parser.add_argument("--version", action="store_true", help="print Kiln's version")
    parser.add_argument("--include-dir", action="store_true",
                        help="print the directory holding kiln/custom_call.h")
    sub = parser.add_subparsers(dest="command", parser_class=ArgumentParser)

    run = sub.add_parser("run", help="compile FILE (or load an executable, .kx) and run its "
                                     "entry function")
    run.add_argument("file", help="the program (any supported format) or an executable (.kx)")
    run.add_argument("--entry", help="function to run (default: main or the only public one)")
    run.add_argument("--target", default="cpu", help="cpu, gpu or gpu-emulator")
    run.add_argument("--inputs", help=".npz with the arguments, in order (arr_0, arr_1, ...), "
                     "or .npy for one argument")
    run.add_argument("--output", help="write the results to this .npz")
    run.add_argument("--print", action="store_true", help="print the results")
    _add_compile_flags(run)
    run.add_argument("--verify", action="store_true",
                     help="also run the program in the StableHLO reference interpreter and name "
                          "the first operation whose value differs")

    comp = sub.add_parser("compile", help="compile FILE ahead of time into an executable "
                                           "(.kx) that `kiln run` and kiln.load_executable load")
    comp.add_argument("file", help="the program (any supported format)")
    comp.add_argument("-o", "--output", required=True, help="the executable to write (.kx)")
    comp.add_argument("--entry", help="function to compile (default: main or the only public one)")
    comp.add_argument("--target", default="cpu", help="cpu, gpu or gpu-emulator")
    comp.add_argument("--arg-shapes", metavar="SHAPES",
                      help="for a dynamic signature: the argument shapes to compile, e.g. "
                           "'2x3,3' (one per argument; ';' separates several sets)")
    _add_compile_flags(comp)

    conf = sub.add_parser("conformance", help="run conformance programs, each in its own process")
    conf.add_argument("paths", nargs="+", help="files or directories of .mlir programs")
    conf.add_argument("--jobs", "-j", type=int, default=1, help="files run at once")
    conf.add_argument("--timeout", type=float, default=120.0, help="seconds per file")
    conf.add_argument("--json", help="write a JSON report here")
    conf.add_argument("--target", help="compile the programs for this target (default: cpu; "
                      "gpu-emulator runs them through the whole GPU pipeline on the CPU)")

    from . import bench
    bench.add_parser(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from .. import __version__
        print(f"kiln {__version__}")
        return 0
    if args.include_dir:
        from ..native import include_dir
        print(include_dir())
        return 0
    if args.command == "run":
        return _ending_every_rank(guarded("kiln run", lambda: _run(args), args))
    if args.command == "compile":
        return guarded("kiln compile", lambda: _compile(args), args)
    if args.command == "conformance":
        return guarded("kiln conformance", lambda: _conformance(args), args)
    if args.command == "bench":
        from . import bench
        return guarded("kiln bench", lambda: bench.run(args), args)
    parser.print_help()
    return 2


def _add_compile_flags(command) -> None:
    command.add_argument("--dump-dir", help="write the IR before and after optimizations, after "
                         "every stage, and the buffer assignment and thunk sequence here "
                         "(XLA: --xla_dump_to)")
    command.add_argument("--dump-pass-regex", metavar="REGEX",
                         help="also dump the IR after every pass whose name matches "
                              "(with --dump-dir)")
    command.add_argument("--timing", action="store_true",
                         help="print the time of each stage and pass on stderr (like -mlir-timing)")
    command.add_argument("--gpu-arch", help="with --target gpu/gpu-emulator: the NVIDIA "
                         "architecture (sm_80, sm_90; default sm_90)")


def _compile_options(args) -> dict:
    return {name: value for name, value in (("dump_dir", args.dump_dir),
                                            ("dump_pass_regex", args.dump_pass_regex),
                                            ("timing", args.timing),
                                            ("gpu_arch", args.gpu_arch)) if value}


def _parse_arg_shapes(text: str) -> list[tuple[tuple[int, ...], ...]]:
    from ..errors import KilnError
    sets = []
    for group in text.split(";"):
        try:
            sets.append(tuple(tuple(int(d) for d in shape.split("x") if d.strip())
                              if shape.strip() else () for shape in group.split(",")))
        except ValueError:
            raise KilnError(f"--arg-shapes: cannot read {group!r}",
                            hint="shapes like '2x3,3' (one per argument; '' for a scalar)") from None
    return sets


def _compile(args) -> int:
    import kiln
    shape_sets = _parse_arg_shapes(args.arg_shapes) if args.arg_shapes else []  # before compiling
    exe = kiln.compile(Path(args.file), target=args.target, entry=args.entry,
                       **_compile_options(args))
    for shapes in shape_sets:
        exe._compiled_for(tuple(shapes))
    if args.timing:
        from ..pipeline import format_timings
        print(format_timings(exe.timings), file=sys.stderr)
    exe.save(args.output)
    print(f"wrote {args.output}: @{exe.entry}(" + ", ".join(map(str, exe.arg_specs)) + ") -> ("
          + ", ".join(map(str, exe.result_specs)) + ")")
    return 0


def _snapshot_inputs(path: str) -> list[np.ndarray]:
    """An XLA HloSnapshot's recorded arguments (the run it describes), else none."""
    from ..frontend.hlo_proto import looks_like_hlo_proto, read_hlo_proto, snapshot_arguments
    try:
        data = Path(path).read_bytes()
    except OSError:
        return []
    if looks_like_hlo_proto(data) and read_hlo_proto(data, path).kind == "HloSnapshot":
        return snapshot_arguments(data, path)
    return []


def _load_inputs(path: str) -> list[np.ndarray]:
    """The arguments from an .npz (arr_0, arr_1, ... or any names, in file order) or, for a
    one-argument program, an .npy."""
    from ..errors import KilnError
    try:
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.ndarray):
            return [loaded]
        with loaded as data:
            names = list(data.files)
            # np.savez(*arrays) names them arr_0, arr_1, ...: order numerically, not lexically.
            if all(n.startswith("arr_") and n[4:].isdigit() for n in names):
                names.sort(key=lambda n: int(n[4:]))
            return [data[n] for n in names]
    except (OSError, ValueError, EOFError) as exc:
        raise KilnError(f"cannot read inputs: {exc}", location=path,
                        hint="write them with numpy.savez(path, *arrays), or numpy.save for one "
                             "array") from None


def _ending_every_rank(status: int) -> int:
    """Under mpiexec, a rank that failed (its error already printed) ends the whole job, so
    that no other rank waits for it forever in a collective."""
    from ..distributed import mpi
    if status and mpi.launched_size() > 1:
        try:
            from mpi4py import MPI
        except ImportError:
            return status
        if MPI.Is_initialized() and not MPI.Is_finalized():
            MPI.COMM_WORLD.Abort(status)
    return status


def _rank() -> int:
    """This process's MPI rank under mpiexec (0 otherwise): only rank 0 prints and writes."""
    from ..distributed import mpi
    return mpi.world().COMM_WORLD.rank if mpi.launched_size() > 1 else 0


def _run(args) -> int:
    import kiln
    from ..errors import KilnError
    from .. import parallel_programs
    parallel = None
    if not _is_executable(args.file) and args.file.endswith(".mlir"):
        parallel = parallel_programs.parse_if_run_parallel(Path(args.file), args.file)
    if parallel is not None:
        # The reference interpreter's multi-program form: its devices run in this process.
        _, outcomes = parallel_programs.run_parallel_module(parallel, args.file)
        failed = [o for o in outcomes if not o.passed]
        for o in failed:
            print(f"kiln run: {o}", file=sys.stderr)
        print(f"{len(outcomes) - len(failed)} of {len(outcomes)} checks passed")
        return 1 if failed else 0
    if _is_executable(args.file):
        exe = kiln.load_executable(args.file)
    else:
        exe = kiln.compile(Path(args.file), target=args.target, entry=args.entry,
                           **_compile_options(args))
    if args.timing:
        from ..pipeline import format_timings
        print(format_timings(exe.timings), file=sys.stderr)
    inputs = _load_inputs(args.inputs) if args.inputs else _snapshot_inputs(args.file)
    # .npz keeps ml_dtypes arrays (bf16, f8, int4...) as raw bytes ('V2', 'V1'): give them the
    # parameter's dtype back.
    inputs = [a.view(spec.dtype) if a.dtype.kind == "V" and a.dtype.itemsize == spec.dtype.itemsize
              else a for a, spec in zip(inputs, exe.arg_specs)] + inputs[len(exe.arg_specs):]
    if not args.inputs and exe.arg_specs and not inputs:
        raise KilnError(f"@{exe.entry} takes {len(exe.arg_specs)} argument(s): "
                        + ", ".join(map(str, exe.arg_specs)), location=args.file,
                        hint="pass them with --inputs FILE.npz")
    results, outcomes = exe.run_checks(*inputs)
    if _rank() != 0:
        return 0  # every rank has the global results; rank 0 reports them
    if args.print:
        for i, r in enumerate(results):
            print(f"result {i}: {r.dtype}{list(r.shape)}")
            print(np.array2string(np.asarray(r), threshold=200))
    if args.output:
        np.savez(args.output, *results)
    failed = [o for o in outcomes if not o.passed]
    for o in failed:
        print(f"kiln run: {o}", file=sys.stderr)
    if outcomes:
        print(f"{len(outcomes) - len(failed)} of {len(outcomes)} checks passed")
    verified = True
    if args.verify:
        report = exe.verify(*inputs)
        print(report, file=sys.stdout if report.ok else sys.stderr)
        verified = report.ok
    return 1 if failed or not verified else 0


def _is_executable(path: str) -> bool:
    """Whether `path` names a Kiln executable: by its `.kx` suffix only. Executables hold
    machine code, so content never makes a file one; a zip archive under any other name is
    refused here, with the way to load it (frontend/detect.py)."""
    if path.endswith(".kx"):
        return True
    from ..frontend.detect import refuse_archive
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return False  # compiling it reports why it cannot be read
    refuse_archive(head, path)
    return False


def _conformance(args) -> int:
    from .. import conformance
    results = conformance.run(args.paths, jobs=args.jobs, timeout=args.timeout,
                              report=lambda line: print(line, flush=True), target=args.target)
    if args.json:
        conformance.write_json(results, args.json)
    print(conformance.summary(results))
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
