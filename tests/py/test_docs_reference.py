"""The generated reference pages (kiln/docs_reference.py) and what they rely on: a pass without
a summary, a flag without help, a public function without a docstring or a KILN_* variable
missing from kiln/environment.py's table fails here, not in a reader's afternoon. No site
is built (CI's `mkdocs build --strict` does that)."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import kiln
from kiln import docs_reference, environment
from kiln.lowering.registry import passes

ROOT = Path(__file__).resolve().parents[2]
PYTHON_SOURCES = [ROOT / "python" / "kiln", ROOT / "lowering", ROOT / "dialects"]
KILN_NAME = re.compile(r"\bKILN_[A-Z][A-Z0-9_]*\b")


@pytest.fixture(scope="module")
def pages():
    return docs_reference.pages()


def _python_files(folders=PYTHON_SOURCES):
    for folder in folders:
        yield from sorted(folder.rglob("*.py"))


# -- passes --------------------------------------------------------------------------------------
def test_every_registered_pass_has_a_summary_and_a_section(pages):
    page = pages["reference/passes.md"]
    registered = passes()
    assert len(registered) > 50
    for p in registered:
        assert len(p.summary.split()) >= 3, f"pass {p.name} needs a one-line summary"
        assert f"\n## {p.name}\n" in page
    # Every pass a built-in pipeline runs is shown with its stage.
    where = docs_reference.pass_stages()
    assert [u.stage for u in where["kiln-lower-sort"]] == ["legalize"]
    assert "cpu" in where["kiln-validate"][0].targets and "gpu" in where["kiln-validate"][0].targets
    assert "](pipeline.md#cpu-legalize)" in page
    # Options: the entry option only where the pass takes it.
    section = page.split("\n## kiln-outline-checks\n", 1)[1].split("\n## ", 1)[0]
    assert "`{entry=NAME}`" in section
    section = page.split("\n## kiln-lower-sort\n", 1)[1].split("\n## ", 1)[0]
    assert "**Options:** none" in section


def test_pipeline_page_draws_every_stage_of_every_target(pages):
    page = pages["reference/pipeline.md"]
    assert "```mermaid\nflowchart TD\n" in page
    for target, stages in docs_reference.target_pipelines().items():
        for stage in stages:
            assert f'["{stage.name}<br/>' in page, (target, stage.name)
    # The drawn stages follow the pipeline's order.
    cpu = [s.name for s in docs_reference.target_pipelines()["cpu"]]
    chain = re.findall(r"--> (?:shared|cpu)_(\w+)\n", page)
    assert [c.replace("_", "-") for c in chain] == cpu
    # gpu-emulator runs gpu's stages: drawn once, under both names.
    assert 'subgraph gpu_target["target gpu, gpu-emulator"]' in page
    assert "{#gpu-gpu-map}" in page and "{#cpu-codegen}" in page


# -- command line --------------------------------------------------------------------------------
def _all_parsers():
    for program, parser in docs_reference.cli_parsers().items():
        yield program, parser
        for name, help_text, sub in docs_reference.subcommands(parser):
            assert help_text.strip(), f"`{program} {name}` needs a help text"
            yield f"{program} {name}", sub


def test_every_cli_flag_has_help_and_appears(pages):
    page = pages["reference/cli.md"]
    seen = 0
    for program, parser in _all_parsers():
        assert f"## {program}\n" in page
        for action in docs_reference.documented_arguments(parser):
            names = action.option_strings or [action.dest]
            assert (action.help or "").strip(), f"{program} {names[0]} needs help="
            for name in names:
                assert f"`{name}`" in page
            seen += 1
    assert seen > 40


def test_a_flag_without_help_is_caught():
    import argparse
    parser = argparse.ArgumentParser(prog="tool")
    parser.add_argument("--quiet", action="store_true")
    assert [a.dest for a in docs_reference.documented_arguments(parser)
            if not (a.help or "").strip()] == ["quiet"]


def test_cli_rows_show_defaults_and_choices():
    parser = docs_reference.cli_parsers()["kiln"]
    bench = dict((n, s) for n, _, s in docs_reference.subcommands(parser))["bench"]
    rows = {a.dest: docs_reference._argument_row(a)
            for a in docs_reference.documented_arguments(bench)}
    assert "| `--opt-level` | 0 1 2 3 |" in rows["opt_level"]
    assert "| `3.0` |" in rows["budget"]
    compile_rows = [docs_reference._argument_row(a) for a in docs_reference.documented_arguments(
        dict((n, s) for n, _, s in docs_reference.subcommands(parser))["compile"])]
    assert any(r.startswith("| `-o`, `--output` |") and "| required |" in r for r in compile_rows)


# -- Python API ----------------------------------------------------------------------------------
def _undocumented_members(cls) -> list[str]:
    missing = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        function = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        if (inspect.isfunction(function) or isinstance(value, property)) and \
                not (inspect.getdoc(function) or "").strip():
            missing.append(f"{cls.__name__}.{name}")
    return missing


def test_every_public_name_has_a_docstring(pages):
    page = pages["reference/api.md"]
    assert kiln.__all__
    for name in kiln.__all__:
        value = getattr(kiln, name)
        assert (inspect.getdoc(value) or "").strip(), f"kiln.{name} needs a docstring"
        if inspect.isclass(value):
            assert not _undocumented_members(value)
        assert f"::: {docs_reference.defining_path(name)}\n" in page
        assert f"heading: kiln.{name}\n" in page
    # `kiln.jit` is the function, not the module of that name.
    assert docs_reference.defining_path("jit") == "kiln.jit.jit"


def test_an_undocumented_method_is_found():
    class Sample:
        def documented(self):
            """Does something."""

        def bare(self):
            pass

        @property
        def bare_property(self):
            return 1
    assert _undocumented_members(Sample) == ["Sample.bare", "Sample.bare_property"]


# -- environment ---------------------------------------------------------------------------------
# A Python assignment (`KILN_DEFAULTS: tuple[str, ...] = ()`), not `KILN_X=1` in prose.
ASSIGNED = re.compile(r"^[ \t]*(KILN_[A-Z0-9_]+)(?:: [^=\n]*)? = ", re.M)


def kiln_names_in_sources(folders=PYTHON_SOURCES, runtime=ROOT / "runtime") -> dict[str, str]:
    """{KILN_* name: a file naming it} over the Python sources (code, docstrings, messages,
    comments) and the C runtime's getenv calls. Python constants named KILN_* (llvm_options'
    KILN_DEFAULTS) are names, not variables."""
    texts = {path: path.read_text(encoding="utf-8") for path in _python_files(folders)
             if path.name != "environment.py"}
    constants = {name for text in texts.values() for name in ASSIGNED.findall(text)}
    found: dict[str, str] = {}
    for path, text in texts.items():
        for name in KILN_NAME.findall(text):
            if name not in constants:
                found.setdefault(name, str(path))
    for path in sorted(runtime.rglob("*.c")):
        for name in re.findall(r'getenv\("(KILN_[A-Z0-9_]+)"\)', path.read_text(encoding="utf-8")):
            found.setdefault(name, str(path))
    return found


def test_every_kiln_variable_in_the_sources_is_in_the_table(pages):
    table = {v.name for v in environment.VARIABLES}
    named = kiln_names_in_sources()
    missing = {name: where for name, where in named.items() if name not in table}
    assert not missing, f"add these to kiln/environment.py's VARIABLES: {missing}"
    # ... and the table holds nothing the code no longer names.
    assert not table - set(named), f"stale entries: {sorted(table - set(named))}"
    page = pages["reference/environment.md"]
    for v in environment.VARIABLES:
        assert f"| `{v.name}` |" in page
        assert v.meaning.split()[0] in page


DIRECT_READ = re.compile(r"""(?:environ\.get|getenv)\(\s*["']KILN_|(?<!del )os\.environ\[["']KILN_"""
                         r"""[A-Z0-9_]+["']\](?!\s*=[^=])""")


def direct_reads(folders=PYTHON_SOURCES) -> list[str]:
    """Lines that read a KILN_* variable from os.environ instead of through the table."""
    return [f"{path}:{number}"
            for path in _python_files(folders) if path.name != "environment.py"
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if DIRECT_READ.search(line)]


def test_python_reads_kiln_variables_through_the_table():
    offenders = direct_reads()
    assert not offenders, f"read KILN_* settings with kiln.environment.get: {offenders}"


def test_the_scans_catch_a_new_variable(tmp_path):
    (tmp_path / "py").mkdir()
    (tmp_path / "c").mkdir()
    (tmp_path / "py" / "new.py").write_text(
        'import os\nKILN_LIMITS: tuple = ()\nx = os.environ.get("KILN_NEW_SETTING", "1")\n'
        'os.environ["KILN_CACHE"] = "0"\ny = os.environ["KILN_OTHER"]\n'
        '"""KILN_CACHE=0 turns it off"""\n')
    (tmp_path / "c" / "new.c").write_text('const char* e = getenv("KILN_C_SETTING");\n')
    named = kiln_names_in_sources([tmp_path / "py"], tmp_path / "c")
    assert set(named) == {"KILN_NEW_SETTING", "KILN_CACHE", "KILN_OTHER", "KILN_C_SETTING"}
    assert [r.rsplit(":", 1)[1] for r in direct_reads([tmp_path / "py"])] == ["3", "5"]


def test_environment_accessor(monkeypatch):
    monkeypatch.delenv("KILN_READ_TIMEOUT", raising=False)
    assert environment.get("KILN_READ_TIMEOUT") == "60"
    assert environment.raw("KILN_READ_TIMEOUT") is None
    monkeypatch.setenv("KILN_READ_TIMEOUT", "5")
    assert environment.get("KILN_READ_TIMEOUT") == environment.raw("KILN_READ_TIMEOUT") == "5"
    monkeypatch.delenv("KILN_COMPILE_MEMORY", raising=False)
    assert environment.get("KILN_COMPILE_MEMORY") is None  # computed by its reader
    with pytest.raises(LookupError, match="KILN_NOT_A_SETTING is not in"):
        environment.get("KILN_NOT_A_SETTING")
    names = [v.name for v in environment.VARIABLES]
    assert len(names) == len(set(names))


def test_a_read_of_a_variable_sees_the_table_default(monkeypatch):
    from kiln.driver import cache
    monkeypatch.delenv("KILN_CACHE_MAX_MB", raising=False)
    assert cache.max_bytes() == int(environment.get("KILN_CACHE_MAX_MB")) << 20
    monkeypatch.setenv("KILN_CACHE_MAX_MB", "3")
    assert cache.max_bytes() == 3 << 20


# -- operations ----------------------------------------------------------------------------------
def test_ops_page_counts_conformance_files_by_longest_op_name(tmp_path):
    (tmp_path / "stablehlo-interpret").mkdir()
    (tmp_path / "stablehlo-testdata").mkdir()
    for name in ("add", "dynamic_slice"):
        (tmp_path / "stablehlo-interpret" / f"{name}.mlir").write_text("")
    for stem in ("add_float32_2", "add_int8_3", "dynamic_slice_float32_4", "slice_float32_4",
                 "cumprod_float32_4"):
        (tmp_path / "stablehlo-testdata" / f"{stem}.mlir").write_text("")
    page = docs_reference.ops_page(tmp_path)
    rows = {line.split(" | ")[0].strip("| `"): line for line in page.splitlines()
            if line.startswith("| `")}
    assert rows["stablehlo.add"].endswith("| 2 | yes |")
    assert rows["stablehlo.dynamic_slice"].endswith("| 1 | yes |")  # not also `slice`
    assert rows["stablehlo.slice"].endswith("| 1 |  |")
    assert "[`kiln-lower-sort`](passes.md#kiln-lower-sort)" in rows["stablehlo.sort"]
    assert rows["stablehlo.while"]  # Kiln's sources name it: listed without the suites too
    without = docs_reference.ops_page(tmp_path / "missing")
    assert "were not found" in without and "| `stablehlo.sort` |" in without



def test_ops_page_shows_the_results_of_a_conformance_report(tmp_path, monkeypatch):
    import json
    (tmp_path / "stablehlo-interpret").mkdir()
    (tmp_path / "stablehlo-testdata").mkdir()
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"summary": "2 passed, 1 failed", "files": [
        {"path": "x/stablehlo-testdata/add_float32_2.mlir", "passed": True},
        {"path": "x/stablehlo-testdata/add_int8_3.mlir", "passed": False},
        {"path": "x/stablehlo-interpret/dynamic_slice.mlir", "passed": True}]}))
    monkeypatch.setenv("KILN_CONFORMANCE_REPORT", str(report))
    page = docs_reference.ops_page(tmp_path)
    rows = {line.split(" | ")[0].strip("| `"): line for line in page.splitlines()
            if line.startswith("| `")}
    assert "results of this build" in page and "2 passed, 1 failed" in page
    assert rows["stablehlo.add"].endswith("| 1 / 2 |")
    assert rows["stablehlo.dynamic_slice"].endswith("| 1 / 1 |")
    assert rows["stablehlo.slice"].endswith("|  |")  # no file of the report is named for it

# -- the pages as a whole ------------------------------------------------------------------------
def test_the_generator_produces_every_page_in_the_nav(pages):
    nav = re.findall(r"(reference/[\w-]+\.md)", (ROOT / "mkdocs.yml").read_text())
    assert sorted(set(nav)) == sorted(pages)
    for path, text in pages.items():
        assert text.startswith("<!-- Generated at build time"), path
        assert re.search(r"^# \S", text, re.M), path
        assert not (ROOT / "docs" / path).exists(), f"docs/{path} would shadow the generated page"
    # Links between generated pages point at anchors that exist.
    anchors = {path: set(re.findall(r"^#+ (\S+)", text, re.M))
               | set(re.findall(r"\{#([\w-]+)\}", text)) for path, text in pages.items()}
    for path, text in pages.items():
        for target, anchor in re.findall(r"\]\(([\w-]+\.md)#([\w-]+)\)", text):
            assert anchor in anchors[f"reference/{target}"], (path, target, anchor)
