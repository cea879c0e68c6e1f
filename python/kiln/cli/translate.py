"""kiln-translate: convert between HLO text and StableHLO MLIR text.

    kiln-translate --hlo-to-stablehlo FILE     (FILE '-' reads stdin)
    kiln-translate --stablehlo-to-hlo FILE

Output goes to stdout.  Any KilnError is printed as one line
`kiln-translate: error: <message>` with exit status 1 - never a traceback.
"""
from __future__ import annotations

import argparse
import sys

from kiln.errors import KilnError


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kiln-translate",
                                description="Translate between HLO text and StableHLO.")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--hlo-to-stablehlo", action="store_true",
                      help="import HLO module text, print StableHLO MLIR")
    mode.add_argument("--stablehlo-to-hlo", action="store_true",
                      help="export StableHLO MLIR, print HLO module text")
    p.add_argument("file", help="input file, or - for stdin")
    p.add_argument("-o", "--output", help="write to this file instead of stdout")
    return p


def main(argv=None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        if args.file == "-":
            text, name = sys.stdin.read(), "<stdin>"
        else:
            try:
                with open(args.file, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                raise KilnError(f"cannot read '{args.file}': {e.strerror}") from None
            name = args.file
        from kiln.frontend.hlo import hlo_to_stablehlo, stablehlo_to_hlo

        if args.hlo_to_stablehlo:
            out = hlo_to_stablehlo(text, name)
        else:
            out = stablehlo_to_hlo(text)
        if args.output:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(out)
        else:
            sys.stdout.write(out if out.endswith("\n") else out + "\n")
        return 0
    except KilnError as e:
        print(f"kiln-translate: error: {e.one_line()}", file=sys.stderr)
        return 1
    except RecursionError:
        print("kiln-translate: error: input nests too deeply", file=sys.stderr)
        return 1
    except Exception as e:  # a bug, but users still get one line, not a traceback
        print(f"kiln-translate: error: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
