"""The README's and the docs' examples run, and their links resolve (issue 30).

Every ```python block of README.md and docs/**/*.md (the generated docs/reference/ pages
excepted) runs, and its asserts hold; the blocks of one page run in order, in one namespace,
in one subprocess per page (a later block may use what an earlier one made). A ```sh block
whose commands are all Kiln's tools (`kiln`, `kiln-opt`, `kiln-translate`) runs in that same
subprocess, in the same scratch directory, and must exit 0.

A block that cannot run here (it needs a GPU, MPI, a library you build, minutes of time)
carries `<!-- not-run: why -->` on the line right before its fence, and is listed in
NOT_RUN below, so that skipping an example is a visible decision, never an accident. A
```sh block of other commands (pip, mpiexec...) needs the marker too.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"          # generated pages: another generator's examples

RUN_LANGUAGES = {"python", "sh"}
KILN_TOOLS = ("kiln", "kiln-opt", "kiln-translate")
NOT_RUN_MARKER = re.compile(r"^<!--\s*not-run:\s*(?P<why>.*?)\s*-->\s*$")
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")
PAGE_TIMEOUT_S = 240

# Every example that does not run, by page, with the reason its marker gives.
NOT_RUN = {
    ("README.md", "creates a virtual environment and installs Kiln (CI runs it)"),
    ("README.md", "the whole test suite (CI runs it)"),
    ("README.md", "installs the docs extra and builds the whole site (CI builds it)"),
    ("docs/getting-started.md", "creates a virtual environment and installs Kiln (CI runs it)"),
    ("docs/getting-started.md", "the whole test suite (CI runs it)"),
    ("docs/getting-started.md", "train.py stands for your own program"),
    ("docs/guides/custom-calls.md", "needs libmy_calls.so, built with gcc from the C file above"),
    ("docs/guides/custom-calls.md", "needs librms_norm.so, built with g++ from the C++ file above"),
    ("docs/guides/devices.md", "needs a multi-device JAX export (prog.jax) and MPI"),
    ("docs/guides/devices.md", "needs a multi-device JAX export (prog.jax)"),
    ("docs/guides/gpu.md", "needs the gpu extra and a program file (prog.mlir, in.npz, DIR)"),
    ("docs/guides/inputs.md", "runs every file of a conformance directory (minutes)"),
    ("docs/guides/jax.md", "train.py stands for your own program"),
    ("docs/guides/reliability.md", "fuzz campaigns take tens of minutes"),
}


@dataclasses.dataclass(frozen=True)
class Block:
    page: str           # path relative to the repository root
    line: int           # 1-based line of the block's first code line
    language: str
    code: str
    not_run: str | None  # the marker's reason, None when the block runs

    @property
    def runs(self) -> bool:
        return self.not_run is None and self.language in RUN_LANGUAGES


def pages() -> list[Path]:
    found = [ROOT / "README.md"]
    found += sorted(p for p in DOCS.rglob("*.md") if REFERENCE not in p.parents)
    return found


def blocks_of(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, with the not-run marker before each."""
    lines = page.read_text().split("\n")
    name = page.relative_to(ROOT).as_posix()
    found, i = [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```"), None)
        assert end is not None, f"{name}:{i + 1}: code block never closed"
        marker = NOT_RUN_MARKER.match(lines[i - 1]) if i > 0 else None
        found.append(Block(name, i + 2, fence["lang"], "\n".join(lines[i + 1:end]),
                           marker["why"] if marker else None))
        i = end + 1
    return found


def shell_commands(block: Block) -> list[str]:
    return [line for line in (raw.strip() for raw in block.code.split("\n"))
            if line and not line.startswith("#")]


def is_kiln_command(command: str) -> bool:
    return command.split()[0] in KILN_TOOLS


ALL_BLOCKS = [block for page in pages() for block in blocks_of(page)]
RUNNABLE_PAGES = sorted({block.page for block in ALL_BLOCKS if block.runs})

# Runs in the page's subprocess: each block in order, Python in one shared namespace (with
# the page's line numbers in tracebacks), shell blocks through bash -e.
DRIVER = textwrap.dedent("""
    import json, subprocess, sys, time
    namespace = {"__name__": "__docs_example__"}
    for block in json.load(open(sys.argv[1])):
        where = f"{block['page']}:{block['line']}"
        started = time.monotonic()
        print(f"--- {where} ({block['language']})", end="", flush=True)
        if block["language"] == "python":
            code = "\\n" * (block["line"] - 1) + block["code"]
            exec(compile(code, block["page"], "exec"), namespace)
        else:
            done = subprocess.run(["bash", "-e", "-c", block["code"]], capture_output=True,
                                  text=True)
            if done.returncode != 0:
                sys.exit(f"\\n{where}: exit {done.returncode}\\n{done.stdout[-2000:]}"
                         f"{done.stderr[-4000:]}")
        print(f" {time.monotonic() - started:.1f} s", flush=True)
""")


def run_page(page: str) -> subprocess.CompletedProcess:
    """Run one page's examples in a fresh scratch directory holding `examples/`."""
    scratch = Path(tempfile.mkdtemp(prefix="kiln-docs-"))
    (scratch / "examples").symlink_to(ROOT / "examples")
    blocks = [dataclasses.asdict(b) for b in ALL_BLOCKS if b.page == page and b.runs]
    (scratch / "blocks.json").write_text(json.dumps(blocks))
    (scratch / "driver.py").write_text(DRIVER)
    env = dict(os.environ)
    env["KILN_CACHE_DIR"] = str(scratch / "cache")
    env["JAX_PLATFORMS"] = "cpu"          # a page that wants Kiln's plugin sets it itself
    # Compile in the page's process: a compile server per page (started, then rehearsing)
    # costs more than the page's few small compiles; isolation has its own tests
    # (test_compile_isolation.py), these test what the examples show.
    env["KILN_COMPILE_IN_PROCESS"] = "1"
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    try:
        return subprocess.run([sys.executable, "driver.py", "blocks.json"], cwd=scratch,
                              env=env, capture_output=True, text=True, timeout=PAGE_TIMEOUT_S)
    except subprocess.TimeoutExpired as expired:
        return subprocess.CompletedProcess(expired.cmd, -1, str(expired.stdout),
                                           f"timed out after {PAGE_TIMEOUT_S} s")


@pytest.fixture(scope="module")
def page_runs() -> dict[str, subprocess.CompletedProcess]:
    # The pages run side by side: most of each one's time is starting Python, Kiln and JAX.
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(RUNNABLE_PAGES, pool.map(run_page, RUNNABLE_PAGES)))


@pytest.mark.parametrize("page", RUNNABLE_PAGES)
def test_page_examples_run(page, page_runs):
    done = page_runs[page]
    assert done.returncode == 0, f"{page}:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    ran = [b for b in ALL_BLOCKS if b.page == page and b.runs]
    assert done.stdout.count("--- ") >= len(ran)


def test_examples_exist_where_the_issue_asks():
    runnable = {(b.page, b.language) for b in ALL_BLOCKS if b.runs}
    for page in ("README.md", "docs/getting-started.md", "docs/guides/jax.md",
                 "docs/guides/scripting.md", "docs/guides/custom-calls.md"):
        assert (page, "python") in runnable, page


def test_every_block_not_run_is_marked_and_listed():
    marked = {(b.page, b.not_run) for b in ALL_BLOCKS if b.not_run is not None}
    assert marked == NOT_RUN, ("not-run blocks changed: update NOT_RUN\n"
                               f"new: {sorted(marked - NOT_RUN)}\ngone: {sorted(NOT_RUN - marked)}")
    for block in ALL_BLOCKS:
        if block.not_run is not None:
            assert block.not_run, f"{block.page}:{block.line}: a not-run marker needs a reason"
            assert block.language in RUN_LANGUAGES, (
                f"{block.page}:{block.line}: only python and sh blocks run; a not-run marker "
                f"on a {block.language or 'plain'} block means nothing")


def test_shell_blocks_run_only_kiln_tools():
    for block in ALL_BLOCKS:
        if block.language == "sh" and block.runs:
            commands = shell_commands(block)
            assert commands, f"{block.page}:{block.line}: empty sh block"
            others = [c for c in commands if not is_kiln_command(c)]
            assert not others, (f"{block.page}:{block.line}: {others[0]!r} is not a Kiln tool; "
                                "mark the block <!-- not-run: why --> or make it runnable")


def test_only_known_languages():
    # A typo in a fence (```pyhton) would silently exempt an example from this test.
    known = RUN_LANGUAGES | {"", "text", "c", "c++"}
    for block in ALL_BLOCKS:
        assert block.language in known, f"{block.page}:{block.line}: ```{block.language}"


# --- links ------------------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[[^\]]*\]\((?P<target>[^)\s]+)\)")


def slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors_of(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*$", text, re.M)}


def generated_reference_pages() -> set[Path]:
    """The reference pages MkDocs generates at build time (they are not files in docs/): the
    ones mkdocs.yml's nav lists."""
    nav = (ROOT / "mkdocs.yml").read_text() if (ROOT / "mkdocs.yml").exists() else ""
    return {(DOCS / name).resolve() for name in re.findall(r"\breference/[\w-]+\.md", nav)}


def test_links_resolve():
    """Relative links point at files that exist (or reference pages the site generates), and
    at headings that exist in them."""
    generated = generated_reference_pages()
    for page in pages():
        body = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
        for match in LINK.finditer(body):
            target = match["target"]
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}: link {target}"
            if resolved in generated:
                assert page != ROOT / "README.md", f"{where}: generated at build time only"
                continue            # mkdocs build --strict checks anchors into them
            assert resolved.exists(), f"{where}: no such file"
            if anchor and resolved.suffix == ".md":
                assert anchor in anchors_of(resolved), f"{where}: no heading #{anchor}"


def test_slug_matches_mkdocs_rules():
    assert slug("Collectives: kiln bench --collectives") == "collectives-kiln-bench-collectives"
    assert slug("What makes Kiln's CPU code fast") == "what-makes-kilns-cpu-code-fast"
    assert slug("Checking a result: `kiln run --verify`") == "checking-a-result-kiln-run-verify"


# --- the README as a front page -----------------------------------------------------------

README_SETUP_COMMANDS = [
    "python3 -m venv .venv && . .venv/bin/activate && pip install . && kiln run examples/mlp.mlir --print",
    'python3 -m venv .venv && . .venv/bin/activate && pip install ".[test]" && bash tests/run.sh',
]


def test_readme_is_a_front_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    for command in README_SETUP_COMMANDS:       # CI runs these; they must stay exact
        assert f"\n{command}\n" in readme
    assert 'pip install ".[docs]" && mkdocs build --strict' in readme
