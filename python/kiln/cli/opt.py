"""kiln-opt: print the IR after a stage, a pass or a pass pipeline, like mlir-opt, for FileCheck.

Passes are Kiln's registered passes (`--list-passes`) and upstream MLIR passes, mixed freely:
`--pass kiln-lower-sort,canonicalize` or
`--pass-pipeline 'builtin.module(kiln-lower-sort,func.func(cse))'`."""
from __future__ import annotations

import re
import sys

from .common import ArgumentParser, guarded

SPLIT = re.compile(r"^// -----\s*$", re.M)


def build_parser() -> ArgumentParser:
    """The `kiln-opt` command line (also read by the generated CLI reference, docs/)."""
    parser = ArgumentParser(prog="kiln-opt", description=__doc__)
    parser.add_argument("file", nargs="?", help="input file ('-' or none: stdin)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--stage", help="print the IR after this stage (default: import)")
    group.add_argument("--pass-pipeline", help="run this textual pass pipeline instead "
                       "(Kiln's pass names and upstream ones)")
    group.add_argument("--pass", dest="passes", metavar="NAME[,NAME...]",
                       help="run these passes alone, in order (Kiln's or upstream)")
    group.add_argument("--print-pipeline", action="store_true", help="print the target's stages")
    group.add_argument("--list-passes", action="store_true",
                       help="print every registered Kiln pass with its summary")
    parser.add_argument("--target", default="cpu", help="cpu, gpu or gpu-emulator")
    parser.add_argument("--gpu-arch", help="with --target gpu: sm_80, sm_90 (default sm_90)")
    parser.add_argument("--entry", help="entry function (default: main or the only public one)")
    parser.add_argument("--dump-dir", help="write the input and the IR after every stage (with "
                        "--stage) or after the passes (with --pass/--pass-pipeline) here "
                        "(XLA: --xla_dump_to)")
    parser.add_argument("--dump-pass-regex", metavar="REGEX", help="with --dump-dir: "
                        "also dump the IR after every pass whose name matches")
    parser.add_argument("--timing", action="store_true", help="print the time of each stage "
                        "(with --stage) or pass on stderr, like -mlir-timing")
    parser.add_argument("--split-input-file", action="store_true",
                        help="treat '// -----' as separating independent inputs")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return guarded("kiln-opt", lambda: _run(args), args)


def _run(args) -> int:
    from ..errors import KilnError
    from ..targets import get_target
    if args.print_pipeline:
        from ..pipeline import format_pipeline
        print(format_pipeline(get_target(args.target).stages(args.entry)))
        return 0
    if args.list_passes:
        from ..lowering.registry import passes
        registered = passes()
        width = max(len(p.name) for p in registered)
        for registered_pass in registered:  # in the order the CPU pipeline runs them
            print(f"{registered_pass.name:<{width}}  {registered_pass.summary}")
        return 0
    if args.pass_pipeline or args.passes:
        # Names are checked once, before any input: a misspelt one is one error naming the
        # close ones, not one per split chunk.
        from ..context import make_context
        from ..lowering.registry import parse_pipeline
        parse_pipeline(args.pass_pipeline or args.passes, make_context(), args.entry,
                       where=_pipeline_option(args))
    if args.file in (None, "-"):
        text, filename = sys.stdin.read(), "<stdin>"
    else:
        from ..frontend import read_source
        data, filename = read_source(__import__("pathlib").Path(args.file))
        text = data
    chunks = _split(text if isinstance(text, str) else text.decode()) \
        if args.split_input_file else [text]
    status = 0
    for i, chunk in enumerate(chunks):
        if i:
            print("// -----")
        try:
            print(_one(chunk, filename, args))
        except KilnError as exc:
            if not args.split_input_file:
                raise
            print(f"kiln-opt: error: {exc.one_line()}", file=sys.stderr)
            status = 1
    return status


def _pipeline_option(args) -> str:
    return "--pass-pipeline" if args.pass_pipeline else "--pass"


def _split(text: str) -> list[str]:
    """The chunks between `// -----` lines, each preceded by as many empty lines as came
    before it, so that errors give the line in the whole file (as mlir-opt does)."""
    chunks, start = [], 0
    for separator in [*SPLIT.finditer(text), None]:
        end = separator.start() if separator else len(text)
        chunks.append("\n" * text.count("\n", 0, start) + text[start:end])
        start = separator.end() if separator else end
    return chunks


def _one(source, filename: str, args) -> str:
    from ..context import make_context
    from ..frontend import import_module
    from ..lowering.registry import parse_pipeline
    from ..pipeline import run_steps
    ctx = make_context()
    module, _ = import_module(source, ctx, filename)
    pipeline = args.pass_pipeline or args.passes
    if pipeline:
        option = _pipeline_option(args)
        steps = parse_pipeline(pipeline, ctx, args.entry, where=option)
        if not (args.timing or args.dump_dir or args.dump_pass_regex):
            run_steps(module, steps, filename, option)
            return str(module)
        from ..pipeline import Stage
        _run_instrumented(module, [Stage("passes", f"the {option} given", steps)], None,
                          filename, args)
        return str(module)
    if not args.stage or args.stage == "import":
        return str(module)
    from ..driver import Executable
    from ..targets import get_target
    target = get_target(args.target, **({"gpu_arch": args.gpu_arch} if args.gpu_arch else {}))
    exe = Executable(module, target, args.entry, filename, compile_now=False)
    if args.stage in getattr(target, "artifact_stages", ()):  # e.g. the GPU target's ptx
        return target.artifact_text(exe, args.stage)
    if not (args.timing or args.dump_dir or args.dump_pass_regex):
        return exe.ir(args.stage)
    if args.stage not in exe.stage_names():
        return exe.ir(args.stage)  # raises the KilnError that names the stages
    # Executable flattened the entry's tuples in `module`: it is what exe.ir would compile.
    _run_instrumented(module, exe.stages, args.stage, filename, args)
    return str(module)


def _run_instrumented(module, stages, until, filename: str, args) -> None:
    """Run `stages` (up to `until`) with the dumps and timing report the flags ask for."""
    from ..driver.compiler import dump_writer
    from ..pipeline import format_timings, run_stages
    options = {"dump_dir": args.dump_dir, "dump_pass_regex": args.dump_pass_regex}
    dumper = dump_writer(options, module, filename)
    if dumper:
        dumper.before_optimizations(module)
    timings = []

    def dump(stage, module):
        dumper.stage(stage, module)
        if stage == "optimize":
            dumper.after_optimizations(module)

    run_stages(module, stages, filename, until=until, timings=timings, pass_timing=args.timing,
               dump=dump if dumper else None,
               after_pass=dumper.after_pass if dumper and dumper.pass_pattern else None)
    if args.timing:
        print(format_timings(timings), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
