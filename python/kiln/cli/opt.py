"""kiln-opt: print the IR after a stage or a pass pipeline, like mlir-opt, for FileCheck."""
from __future__ import annotations

import re
import sys

from .common import ArgumentParser, guarded

SPLIT = re.compile(r"^// -----\s*$", re.M)


def main(argv=None) -> int:
    parser = ArgumentParser(prog="kiln-opt", description=__doc__)
    parser.add_argument("file", nargs="?", help="input file ('-' or none: stdin)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--stage", help="print the IR after this stage (default: import)")
    group.add_argument("--pass-pipeline", help="run this textual pass pipeline instead")
    group.add_argument("--print-pipeline", action="store_true", help="print the target's stages")
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--entry", help="entry function (default: main or the only public one)")
    parser.add_argument("--split-input-file", action="store_true",
                        help="treat '// -----' as separating independent inputs")
    args = parser.parse_args(argv)
    return guarded("kiln-opt", lambda: _run(args), args)


def _run(args) -> int:
    from ..errors import KilnError
    from ..targets import get_target
    if args.print_pipeline:
        from ..pipeline import format_pipeline
        print(format_pipeline(get_target(args.target).stages(args.entry)))
        return 0
    if args.file in (None, "-"):
        text, filename = sys.stdin.read(), "<stdin>"
    else:
        from ..frontend import read_source
        data, filename = read_source(__import__("pathlib").Path(args.file))
        text = data
    chunks = SPLIT.split(text if isinstance(text, str) else text.decode()) \
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


def _one(source, filename: str, args) -> str:
    from ..context import make_context
    from ..frontend import import_module
    from ..pipeline import run_steps
    ctx = make_context()
    module, _ = import_module(source, ctx, filename)
    if args.pass_pipeline:
        steps = [args.pass_pipeline[len("builtin.module("):-1]
                 if args.pass_pipeline.startswith("builtin.module(") else args.pass_pipeline]
        run_steps(module, steps, filename, "--pass-pipeline")
        return str(module)
    if not args.stage or args.stage == "import":
        return str(module)
    from ..runtime.executable import Executable
    from ..targets import get_target
    exe = Executable(module, get_target(args.target), args.entry, filename, compile_now=False)
    return exe.ir(args.stage)


if __name__ == "__main__":
    sys.exit(main())
