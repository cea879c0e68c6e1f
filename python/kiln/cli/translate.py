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
    from_proto = None  # StableHLO text of an HLO proto input
    try:
        if args.file == "-":
            text, name = sys.stdin.read(), "<stdin>"
            from kiln.frontend.detect import refuse_archive
            refuse_archive(text, name)  # a .kx executable is not a program to translate
        else:
            try:
                with open(args.file, "rb") as f:
                    data = f.read()
            except OSError as e:
                raise KilnError(f"cannot read '{args.file}': {e.strerror}") from None
            from kiln.frontend.detect import refuse_archive
            refuse_archive(data, args.file)  # a .kx executable is not a program to translate
            from kiln.frontend.hlo_proto import hlo_proto_to_stablehlo, looks_like_hlo_proto
            if args.hlo_to_stablehlo and looks_like_hlo_proto(data):  # XLA's binary HLO
                from_proto = hlo_proto_to_stablehlo(data, args.file)
                data = b""
            try:
                # as text-mode reading did: universal newlines
                text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
            except UnicodeDecodeError as e:
                raise KilnError(f"is not UTF-8 text ({e.reason} at byte {e.start})",
                                location=args.file) from None
            name = args.file
        from kiln.frontend.hlo import hlo_to_stablehlo, stablehlo_to_hlo

        if from_proto is not None:
            out = from_proto
        elif args.hlo_to_stablehlo:
            out = hlo_to_stablehlo(text, name)
        else:
            out = stablehlo_to_hlo(text, name)
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
