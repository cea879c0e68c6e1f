"""The reference pages of the documentation site, generated from the code so they cannot drift.

`pages()` returns {path under docs/: Markdown}; the MkDocs hook docs/hooks/reference_pages.py
adds them to the site at build time (nothing generated is checked in). Sources:

- passes.md: the pass registry (kiln.lowering.registry), with the stages that run each pass
  in the built-in targets' pipelines;
- cli.md: the argparse parsers of `kiln`, `kiln-opt` and `kiln-translate`;
- api.md: mkdocstrings directives for `kiln.__all__` (rendered from the docstrings);
- ops.md: the StableHLO/CHLO ops Kiln's sources and the conformance files name, with the Kiln
  passes whose code names each, and the conformance files named for it;
- environment.md: kiln.environment.VARIABLES, the table the code reads its settings through;
- pipeline.md: a Mermaid flowchart of the targets' stages (kiln.targets), and their steps.

tests/py/test_docs_reference.py checks what the pages rely on: every pass has a summary,
every flag a help text, every public function a docstring, every KILN_* name a table entry.
"""
from __future__ import annotations

import argparse
import functools
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

TARGETS = ("cpu", "gpu", "gpu-emulator")
REFERENCE = "reference"
# Where `kiln conformance` finds the upstream suites (beside the checkout, as CI lays them).
CONFORMANCE_ROOT = Path(__file__).resolve().parents[2].parent / "shared" / "conformance"
_NAME = re.compile(r"^([A-Za-z0-9_.-]+)")


def pages(conformance_root: Path | None = None) -> dict[str, str]:
    """Every generated page: {path relative to docs/: Markdown text}."""
    root = CONFORMANCE_ROOT if conformance_root is None else conformance_root
    return {
        f"{REFERENCE}/index.md": index_page(),
        f"{REFERENCE}/passes.md": passes_page(),
        f"{REFERENCE}/pipeline.md": pipeline_page(),
        f"{REFERENCE}/cli.md": cli_page(),
        f"{REFERENCE}/api.md": python_api_page(),
        f"{REFERENCE}/ops.md": ops_page(root),
        f"{REFERENCE}/environment.md": environment_page(),
    }


_GENERATED = ("<!-- Generated at build time by kiln/docs_reference.py: edit the code it is read "
              "from, not this page. -->\n\n")


def index_page() -> str:
    return _GENERATED + """# Reference

Generated from the code at every build of this site, so they say what the code does:

- [Passes](passes.md): every registered pass, its summary, options and the stages that run it.
- [Pipeline](pipeline.md): the stages of each target, drawn from their definitions.
- [Command line](cli.md): every command and flag of `kiln`, `kiln-opt` and `kiln-translate`.
- [Python API](api.md): the `kiln` package's public names, from their docstrings.
- [Operations](ops.md): the StableHLO and CHLO operations and what handles them.
- [Environment variables](environment.md): every `KILN_*` setting, its default and meaning.
"""


# -- passes --------------------------------------------------------------------------------------
def _md(text: str) -> str:
    """Text for a Markdown table cell: no line breaks, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _anchor(name: str) -> str:
    return name.lower().replace(".", "").replace("_", "-")


@dataclass(frozen=True)
class StepUse:
    targets: tuple[str, ...]
    stage: str


def target_pipelines() -> dict[str, list]:
    """{target name: its stages (kiln.pipeline.Stage, steps as written)} for the built-ins."""
    from .targets import get_target
    return {name: get_target(name).pipeline for name in TARGETS}


def pass_stages() -> dict[str, list[StepUse]]:
    """{registered pass name: where the built-in pipelines run it}, targets with the same
    stage merged ("cpu, gpu: legalize")."""
    where: dict[str, dict[str, list[str]]] = {}
    for target, stages in target_pipelines().items():
        for stage in stages:
            for step in stage.steps:
                name = _NAME.match(str(step)).group(1)
                targets = where.setdefault(name, {}).setdefault(stage.name, [])
                if target not in targets:
                    targets.append(target)
    return {name: [StepUse(tuple(t), s) for s, t in stages.items()]
            for name, stages in where.items()}


def _uses_text(uses: list[StepUse]) -> str:
    if not uses:
        return "no built-in pipeline (run it with `kiln-opt --pass` or a `Pipeline`)"
    return "; ".join(f"{', '.join(u.targets)}: "
                     f"[`{u.stage}`](pipeline.md#{stage_anchor(u.targets[0], u.stage)})"
                     for u in uses)


def passes_page() -> str:
    from .lowering.registry import passes
    registered = passes()
    where = pass_stages()
    lines = [_GENERATED + "# Passes", "",
             f"Kiln's {len(registered)} registered passes, in the order the CPU pipeline runs "
             "them (the GPU target's last), from the pass registry "
             "(`kiln/lowering/registry.py`). Each runs alone on any valid module: "
             "`kiln-opt FILE --pass NAME`, or in a textual pipeline mixed with upstream MLIR "
             "passes (`--pass-pipeline 'builtin.module(kiln-lower-sort,canonicalize)'`). "
             "`kiln-opt --list-passes` prints the same list.", "",
             "| pass | summary | stages |", "|---|---|---|"]
    for p in registered:
        lines.append(f"| [`{p.name}`](#{_anchor(p.name)}) | {_md(p.summary)} | "
                     f"{_uses_text(where.get(p.name, []))} |")
    for p in registered:
        options = ("`{entry=NAME}`: the function to work on (default: `main`, else the only "
                   "public function)" if p.takes_entry else "none")
        lines += ["", f"## {p.name}", "", _md(p.summary) + ".", "",
                  f"- **Options:** {options}",
                  f"- **Stages:** {_uses_text(where.get(p.name, []))}"]
        if p.applies_to is not None:
            ops = ", ".join(f"`{op}`" for op in sorted(p.applies_to))
            lines.append(f"- **Skipped** when the module holds none of: {ops}")
        lines.append(f"- **Source:** `{pass_module(p)}`")
    return "\n".join(lines) + "\n"


def pass_module(registered) -> str:
    """The module a pass's code is in: a pattern pass's function is made by
    kiln.lowering.patterns, so it is found where the lowering module keeps it."""
    module = registered.function.__module__
    if module.endswith(".patterns"):
        import sys
        for name, loaded in list(sys.modules.items()):
            if name.startswith(__package__ + ".lowering") and loaded is not None and \
                    any(value is registered.function for value in vars(loaded).values()):
                return name
    return module


# -- pipeline ------------------------------------------------------------------------------------
def _stage_key(stage) -> tuple:
    return (stage.name, tuple(str(s) for s in stage.steps))


def pipeline_page() -> str:
    pipelines = target_pipelines()
    from .lowering.registry import is_registered
    # Stages with the same steps in every target are drawn once (the shared front half).
    shared = [s for s in pipelines["cpu"]
              if all(any(_stage_key(t) == _stage_key(s) for t in stages)
                     for stages in pipelines.values())]
    shared_keys = {_stage_key(s) for s in shared}
    node = lambda target, stage: f"{target.replace('-', '_')}_{stage.name.replace('-', '_')}"
    graph = ["```mermaid", "flowchart TD",
             '    source["source file: StableHLO text or bytecode, HLO text or proto, '
             'JAX export"] --> import_stage["import (front end)"]']
    previous = "import_stage"
    graph.append('    subgraph shared["every target"]')
    for stage in shared:
        graph.append(f'        {node("shared", stage)}["{stage.name}<br/>'
                     f'{_count(stage, is_registered)}"]')
    graph.append("    end")
    for stage in shared:
        graph.append(f"    {previous} --> {node('shared', stage)}")
        previous = node("shared", stage)
    # gpu-emulator has gpu's stages: drawn once, with both names.
    drawn: dict[tuple, list[str]] = {}
    for target, stages in pipelines.items():
        key = tuple(_stage_key(s) for s in stages)
        drawn.setdefault(key, []).append(target)
    outputs = {"cpu": "LLVM IR -> object code, linked into the process or saved (.kx)",
               "gpu": "execution plan + kernels: LLVM IR -> PTX -> cubin",
               "gpu-emulator": "execution plan + kernels run on the CPU"}
    for key, targets in drawn.items():
        first = targets[0]
        stages = [s for s in pipelines[first] if _stage_key(s) not in shared_keys]
        graph.append(f'    subgraph {first.replace("-", "_")}_target["target {", ".join(targets)}"]')
        for stage in stages:
            graph.append(f'        {node(first, stage)}["{stage.name}<br/>'
                         f'{_count(stage, is_registered)}"]')
        graph.append("    end")
        chain = previous
        for stage in stages:
            graph.append(f"    {chain} --> {node(first, stage)}")
            chain = node(first, stage)
        out = " / ".join(outputs.get(t, t) for t in targets)
        graph.append(f'    {chain} --> {first.replace("-", "_")}_out(["{out}"])')
    graph.append("```")
    lines = [_GENERATED + "# Pipeline", "",
             "The path of a program through Kiln, drawn from the targets' pipeline definitions "
             "(`kiln/targets/base.py`: the shared stages; `cpu.py`, `gpu.py`: each target's). "
             "Each stage runs as one MLIR pass manager; `kiln-opt --print-pipeline` prints the "
             "same, and `exe.ir(STAGE)` shows the IR after a stage.", "", *graph]
    for key, targets in drawn.items():
        first = targets[0]
        lines += ["", f"## Target {', '.join(targets)}"]
        for stage in pipelines[first]:
            if first != "cpu" and _stage_key(stage) in shared_keys:
                lines += ["", f"- `{stage.name}`: as for [cpu](#{stage_anchor('cpu', stage.name)})"]
                continue
            lines += ["", f"### {stage.name} ({first}) {{#{stage_anchor(first, stage.name)}}}", "",
                      _md(stage.doc) + ".", ""]
            for step in stage.steps:
                name = _NAME.match(str(step)).group(1)
                if is_registered(name):
                    lines.append(f"1. [`{step}`](passes.md#{_anchor(name)})")
                else:
                    lines.append(f"1. `{step}` (upstream MLIR)")
    return "\n".join(lines) + "\n"


def stage_anchor(target: str, stage: str) -> str:
    """The pipeline page's anchor of a target's stage (targets with the same pipeline share
    the first one's)."""
    return _anchor(f"{target}-{stage}")


def _count(stage, is_registered) -> str:
    kiln = sum(1 for s in stage.steps if is_registered(_NAME.match(str(s)).group(1)))
    return f"{kiln} Kiln + {len(stage.steps) - kiln} upstream passes"


# -- command line --------------------------------------------------------------------------------
def cli_parsers() -> dict[str, argparse.ArgumentParser]:
    """{program: its parser}, each built as the program builds it."""
    from .cli import main, opt, translate
    return {"kiln": main.build_parser(), "kiln-opt": opt.build_parser(),
            "kiln-translate": translate._build_parser()}


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """[(name, help, parser)] of a parser's subcommands."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            found += [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return found


def documented_arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments a reader sets: every action but -h and the subcommand dispatcher."""
    return [a for a in parser._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def _argument_row(action: argparse.Action) -> str:
    names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.dest}`"
    value = ""
    if action.choices:
        value = " ".join(str(c) for c in action.choices)
    elif action.nargs != 0:
        value = action.metavar or (action.dest.upper() if action.option_strings else "")
        if action.nargs in ("+", "*"):
            value += " ..."
    default = action.default
    shown = ("" if default in (None, False, argparse.SUPPRESS) or action.nargs == 0
             else f"`{default}`")
    if action.required and action.option_strings:
        shown = "required"
    return f"| {names} | {_md(str(value))} | {shown} | {_md(action.help or '')} |"


def _arguments_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = [_argument_row(a) for a in documented_arguments(parser)]
    if not rows:
        return []
    return ["| argument | value | default | meaning |", "|---|---|---|---|", *rows]


def cli_page() -> str:
    lines = [_GENERATED + "# Command line", "",
             "Every command and flag, read from the programs' argument parsers "
             "(`kiln/cli/`). `PROGRAM --help` prints the same. Errors are one line, "
             "`PROGRAM: error: ...`, with exit status 1."]
    for program, parser in cli_parsers().items():
        lines += ["", f"## {program}", "", _md(parser.description or "") , "",
                  "```text", parser.format_usage().strip(), "```", "",
                  *_arguments_table(parser)]
        for name, help_text, sub in subcommands(parser):
            lines += ["", f"### {program} {name}", "", _md(help_text), "",
                      "```text", sub.format_usage().strip(), "```", "", *_arguments_table(sub)]
    return "\n".join(lines) + "\n"


# -- Python API ----------------------------------------------------------------------------------
def public_names() -> list[str]:
    import kiln
    return list(kiln.__all__)


def python_api_page() -> str:
    lines = [_GENERATED + "# Python API", "",
             "The `kiln` package's public names (`kiln.__all__`), from their docstrings.", ""]
    for name in public_names():
        # Rendered from where it is defined (`kiln.jit` the function, not the module of that
        # name), headed by its public name.
        lines += [f"::: {defining_path(name)}", "    options:", f"      heading: kiln.{name}",
                  ""]
    return "\n".join(lines)


def defining_path(name: str) -> str:
    """The dotted path where public name `kiln.NAME` is defined."""
    import kiln
    value = getattr(kiln, name)
    return f"{value.__module__}.{value.__qualname__}"


# -- operations ----------------------------------------------------------------------------------
_OP = re.compile(r"""["'`]((?:stablehlo|chlo)\.[a-z_0-9]+)["'`]""")


@functools.lru_cache(maxsize=None)
def _module_source(module_name: str) -> str:
    import importlib
    try:
        return inspect.getsource(importlib.import_module(module_name))
    except (OSError, TypeError):
        return ""


def _function_source(function) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


def known_ops(conformance_root: Path) -> list[str]:
    """The StableHLO and CHLO ops the context registers that Kiln's sources name or the
    interpret suite has a file for (one per op of the spec)."""
    from .context import make_context
    names: set[str] = set()
    from . import lowering
    for folder in {Path(__file__).resolve().parent, Path(lowering.__file__).resolve().parent}:
        for path in folder.rglob("*.py"):
            names.update(_OP.findall(path.read_text(encoding="utf-8")))
    interpret = conformance_root / "stablehlo-interpret"
    if interpret.is_dir():
        names.update(f"stablehlo.{p.stem}" for p in interpret.glob("*.mlir"))
    context = make_context()
    return sorted(n for n in names if context.is_registered_operation(n))


def ops_page(conformance_root: Path) -> str:
    from .lowering.registry import passes
    ops = known_ops(conformance_root)
    handlers: dict[str, list[str]] = {op: [] for op in ops}
    registered = passes()
    per_module: dict[str, int] = {}
    for p in registered:
        per_module[pass_module(p)] = per_module.get(pass_module(p), 0) + 1
    for p in registered:
        # A module that holds one pass is that pass's code; in a module of several (or the
        # registry, whose summaries name every op), only the pass's own function and its
        # applies_to count.
        module = pass_module(p)
        if per_module[module] == 1 and not module.endswith(".registry"):
            source = _module_source(module)
        else:
            source = _function_source(p.function)
        named = set(_OP.findall(source)) | set(p.applies_to or ())
        for op in ops:
            if op in named:
                handlers[op].append(p.name)
    testdata = conformance_root / "stablehlo-testdata"
    files = sorted(p.stem for p in testdata.glob("*.mlir")) if testdata.is_dir() else []
    interpret = conformance_root / "stablehlo-interpret"
    # A testdata file is named for the longest op name it starts with (abs_float32_20_20).
    by_length = sorted(ops, key=len, reverse=True)
    counts = {op: 0 for op in ops}
    for stem in files:
        for op in by_length:
            if stem.startswith(op.split(".", 1)[1] + "_"):
                counts[op] += 1
                break
    have_suites = testdata.is_dir() and interpret.is_dir()
    report = _conformance_report(by_length)
    lines = [_GENERATED + "# Operations", "",
             f"The {len(ops)} StableHLO and CHLO operations that Kiln's sources name or the "
             "StableHLO interpret suite has a file for. *Kiln passes* are the registered passes "
             "whose code names the op: they rewrite it, check it or build it (a lowering that "
             "emits additions names `stablehlo.add`). An op no Kiln pass rewrites is "
             "lowered by upstream `stablehlo-legalize-to-linalg` or `chlo-legalize-to-stablehlo` "
             "in the `legalize` stage, and `kiln-check-legalized` names any op left over.",
             ""]
    if have_suites:
        lines += ["*Conformance* counts the files of the StableHLO testdata named for the op, "
                  "and whether the interpret suite has a file for it; `kiln conformance PATH` "
                  "runs them (the [status table](../index.md#status) has the latest results).", "",
                  "| operation | Kiln passes | testdata files | interpret file |",
                  "|---|---|---|---|"]
    else:
        lines += ["(The conformance suites were not found beside this checkout, "
                  f"`{conformance_root}`, so their columns are left out.)", "",
                  "| operation | Kiln passes |", "|---|---|"]
    if report is not None:
        results, summary = report
        lines[-2] += " results of this build |"
        lines[-1] += "---|"
        lines[-2:-2] = [f"*Results of this build* are those of the `kiln conformance` report the "
                        f"site was built with (`KILN_CONFORMANCE_REPORT`; {summary}): files "
                        "passed of the files run, by the op each file is named for.", ""]
    for op in ops:
        kiln = ", ".join(f"[`{n}`](passes.md#{_anchor(n)})" for n in handlers[op]) or "upstream"
        row = f"| `{op}` | {kiln} |"
        if have_suites:
            has_file = (interpret / f"{op.split('.', 1)[1]}.mlir").is_file()
            row += f" {counts[op] or ''} | {'yes' if has_file else ''} |"
        if report is not None:
            passed, run = report[0].get(op, (0, 0))
            row += f" {f'{passed} / {run}' if run else ''} |"
        lines.append(row)
    return "\n".join(lines) + "\n"


def _conformance_report(ops_longest_first: list[str]):
    """({op: (files passed, files run)}, the report's summary) from the `kiln conformance
    --json` report KILN_CONFORMANCE_REPORT names, or None when none is named. A file counts
    for the longest op name its name starts with (abs_float32_20_20, and the interpret suite's
    all_reduce.mlir)."""
    import json
    from . import environment
    path = environment.raw("KILN_CONFORMANCE_REPORT")
    if not path:
        return None
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    results: dict[str, tuple[int, int]] = {}
    for entry in data["files"]:
        stem = Path(entry["path"]).stem
        for op in ops_longest_first:
            short = op.split(".", 1)[1]
            if stem == short or stem.startswith(short + "_"):
                passed, run = results.get(op, (0, 0))
                results[op] = (passed + bool(entry["passed"]), run + 1)
                break
    return results, data["summary"]


# -- environment ---------------------------------------------------------------------------------
def environment_page() -> str:
    from .environment import PYTHON, VARIABLES
    lines = [_GENERATED + "# Environment variables", "",
             "Every `KILN_*` setting, from the one table the code reads them through "
             "(`kiln/environment.py`). Python settings are read when they are used, so a "
             "change takes effect at the next compile or call; the runtime's (C) when the "
             "runtime first needs them.", "",
             "| variable | default | meaning | read by |", "|---|---|---|---|"]
    for v in VARIABLES:
        reader = "Kiln (Python)" if v.read_by == PYTHON else "the runtime (C)"
        lines.append(f"| `{v.name}` | {_md(v.described_default())} | {_md(v.meaning)} | "
                     f"{reader} |")
    return "\n".join(lines) + "\n"
