#!/usr/bin/env python
"""JAX's own test suite as the yardstick of Kiln's PJRT plugin (issue 26).

Runs test files of a jax checkout at the tag of the installed jax (nothing is copied into
Kiln) twice in the same environment, under JAX_PLATFORMS=cpu and under JAX_PLATFORMS=kiln,
and prints per file: the tests that pass on JAX's CPU backend, how many of those pass on Kiln,
the rate, and why the others fail on Kiln, grouped by error message with an example test.

    python tests/jax_suite/run_jax_tests.py JAX/tests                    # the whole yardstick
    python tests/jax_suite/run_jax_tests.py JAX/tests --files fft_test,nn_test --jobs 2 \\
        --timeout 1800 --json results.json
    python tests/jax_suite/run_jax_tests.py JAX/tests lax_test.py -k "testAdd or testDot"

JAX/tests is the tests/ directory of a jax checkout at the installed jax's tag; from a clone
or mirror of github.com/jax-ml/jax, without network access:
    git --git-dir=<clone>/.git archive jax-v0.10.2 tests | tar -x -C /tmp/jaxsrc

JAX_NUM_GENERATED_CASES (how many cases each parameterized JAX test draws) is 1 unless set
(--cases). shard_map_test runs with KILN_DEVICES=8 on Kiln and 8 XLA:CPU devices on the CPU
side (FILE_DEVICES). With pytest-timeout installed, a test running over --test-timeout
seconds fails as "timed out"; either way a file stops at --timeout seconds per platform.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import datetime
import importlib.util
import json
import os
import platform as host_platform
import re
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

PLATFORMS = ("cpu", "kiln")

# The files issue 26 names, smallest first (results come early on a busy machine).
DEFAULT_FILES = (
    "fft_test", "lax_scipy_test", "lax_numpy_operators_test", "lax_vmap_test", "nn_test",
    "lax_numpy_reducers_test", "lax_autodiff_test", "random_test", "lax_numpy_indexing_test",
    "linalg_test", "lax_control_flow_test", "lax_test", "shard_map_test", "lax_numpy_test",
    "api_test",
)
FILE_DEVICES = {"shard_map_test.py": 8}  # devices a file is run with (default: 1)

MAX_RESTARTS = 50  # test processes that died (a crash, a per-test timeout) resumed per file

_OUTCOME = re.compile(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
_OP_NAME = re.compile(r"[a-z_]+\.[a-z_.]+")  # 'stablehlo.reduce': kept in failure reasons
_TIMEOUT_BANNER = "+ Timeout +"  # what pytest-timeout prints before ending a process


@dataclass
class Outcomes:
    """One file's results on one platform."""
    passed: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)  # test -> its failure's reason
    skipped: set[str] = field(default_factory=set)
    seconds: float = 0.0
    crashed: str = ""  # why the run did not finish (file timeout, death outside a test)
    restarts: int = 0


def pytest_command(tests_dir: Path, name: str, report: Path, deselect: Path,
                   select: str | None, test_timeout: int) -> list[str]:
    command = [sys.executable, "-m", "pytest", str(tests_dir / name), "-v",
               "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", str(tests_dir),
               f"--junitxml={report}", "-W", "ignore", "-p", "jax_test_dut", f"@{deselect}"]
    if test_timeout and importlib.util.find_spec("pytest_timeout"):
        # thread method: a test stuck in native code is stopped too (the process ends and is
        # resumed after that test, which fails as timed out)
        command += [f"--timeout={test_timeout}", "--timeout-method=thread"]
    if select:
        command += ["-k", select]
    return command


def run_file(tests_dir: Path, name: str, platform: str, select: str | None, timeout: int,
             test_timeout: int, env: dict[str, str]) -> Outcomes:
    """Runs one test file on one platform. A test process that dies (a crash in native code,
    a per-test timeout) is resumed after the test it died in, which fails with that reason."""
    outcomes = Outcomes()
    started = time.monotonic()
    done: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        # jax_test_dut.py (next to this file) is the plugin that passes JAX_TEST_DUT on
        env = dict(env, JAX_PLATFORMS=platform, PYTHONPATH=os.pathsep.join(
            filter(None, [str(Path(__file__).parent), env.get("PYTHONPATH")])))
        env.setdefault("KILN_CACHE_DIR", tmp)  # a fresh compile cache unless one is chosen
        for attempt in range(MAX_RESTARTS + 1):
            left = timeout - (time.monotonic() - started)
            if left <= 0:
                outcomes.crashed = f"timed out after {timeout} s"
                break
            report = Path(tmp) / f"report{attempt}.xml"
            deselect = Path(tmp) / "deselect.txt"
            deselect.write_text("".join(f"--deselect={t}\n" for t in done))
            command = pytest_command(tests_dir, name, report, deselect, select, test_timeout)
            try:
                proc = subprocess.run(command, env=env, cwd=tests_dir, capture_output=True,
                                      text=True, timeout=left)
            except subprocess.TimeoutExpired as exc:
                stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout
                read_lines(stdout or "", outcomes, done, None)
                outcomes.crashed = f"timed out after {timeout} s"
                break
            # 0: all passed, 1: some failed, 5: none collected; with its report, it finished
            if proc.returncode in (0, 1, 5) and report.exists():
                read_lines(proc.stdout, outcomes, done, None)
                read_report(report, outcomes)
                break
            output = proc.stdout + proc.stderr
            why = (f"timed out after {test_timeout} s (one test)" if _TIMEOUT_BANNER in output
                   else f"the test process died (exit {proc.returncode})")
            if read_lines(proc.stdout, outcomes, done, why) is None:
                tail = output.strip().splitlines()[-3:]  # died outside a test: nothing to skip
                outcomes.crashed = f"exit {proc.returncode}: " + " | ".join(tail)
                break
            outcomes.restarts += 1
        else:
            outcomes.crashed = f"gave up after {MAX_RESTARTS} restarts"
    outcomes.seconds = time.monotonic() - started
    return outcomes


def read_lines(stdout: str, outcomes: Outcomes, done: list[str], crash: str | None):
    """Outcomes from pytest -v's lines (written unbuffered, so a process that died has written
    every finished test's). With `crash`, the test that was running when the process died (a
    node id with no outcome after it) fails with that reason; it is returned."""
    running = None
    for line in stdout.splitlines():
        match = _OUTCOME.match(line)
        if match:
            test, result = match.groups()
            done.append(test)
            if result in ("PASSED", "XFAIL"):
                outcomes.passed.add(test)
            elif result == "SKIPPED":
                outcomes.skipped.add(test)
            else:
                outcomes.failed.setdefault(test, "failed (no message in the report)")
            running = None
        elif crash and line.split(" ")[0].count("::") >= 1:
            running = line.split(" ")[0]
    if crash and running:
        done.append(running)
        outcomes.failed[running] = crash
    return running


def read_report(path: Path, outcomes: Outcomes) -> None:
    """Failure messages from the junit report, keyed like pytest's node ids."""
    for case in ET.parse(path).getroot().iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is None:
            continue
        # classname is the module's dotted path, then the class if any
        parts = (case.get("classname") or "").split(".")
        for split in range(len(parts), 0, -1):
            test = "::".join(["/".join(parts[:split]) + ".py", *parts[split:], case.get("name")])
            if test in outcomes.failed:
                outcomes.failed[test] = reason(problem.get("message") or problem.text or "")
                break


def reason(message: str) -> str:
    """A failure's message reduced to what groups alike failures: the error line (not a
    traceback's context), with numbers, addresses, quoted names and shapes replaced."""
    lines = [l.strip() for l in message.strip().splitlines() if l.strip()]
    line = lines[0] if lines else "(no message)"
    for candidate in lines:
        if re.match(r"^[\w.]+(Error|Exception|Failed)\b", candidate):
            line = candidate
            break
    line = re.sub(r"^(\w+\.)+(?=\w+(Error|Exception)\b)", "", line)  # jax.errors.X -> X
    line = re.sub(r"0x[0-9a-fA-F]+", "<address>", line)
    line = re.sub(r"\S+\.py:\d+:\d+: ", "", line)  # a program location: the test's own line
    line = re.sub(r"'([^']*)'", lambda m: m[0] if _OP_NAME.fullmatch(m[1]) else "'…'", line)
    line = re.sub(r"\b\w+\[[\d,\s]*\]", "T[…]", line)  # f32[3,4] and alike
    line = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", line)
    return line[:160]


def compare(name: str, results: dict[str, Outcomes], top: int) -> dict:
    """One table row: the CPU passes, those that pass on Kiln too, and why the others
    fail on Kiln (reason, count, an example test), most common first."""
    cpu, kiln = results["cpu"], results["kiln"]
    baseline = cpu.passed
    passing = baseline & kiln.passed
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for test in sorted(baseline - kiln.passed):
        if test in kiln.failed:
            groups[kiln.failed[test]].append(test)
        elif test in kiln.skipped:
            groups["skipped on kiln (the JAX test decides by platform)"].append(test)
        else:
            why = f" ({kiln.crashed})" if kiln.crashed else ""
            groups["did not run on kiln" + why].append(test)
    ranked = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    return {"file": name, "cpu": len(baseline), "kiln": len(passing),
            "rate": len(passing) / len(baseline) if baseline else None,
            "groups": [{"reason": r, "count": len(t), "example": t[0]} for r, t in ranked][:top],
            "cpu_passed": sorted(baseline),
            "kiln_failures": {t: kiln.failed.get(t, "skipped" if t in kiln.skipped
                                                  else "did not run")
                              for t in sorted(baseline - kiln.passed)},
            "seconds": {p: round(o.seconds) for p, o in results.items()},
            "restarts": {p: o.restarts for p, o in results.items()},
            "crashed": {p: o.crashed for p, o in results.items() if o.crashed}}


def format_table(rows: list[dict]) -> str:
    out = [f"{'file':28} {'CPU passes':>10} {'Kiln passes':>11} {'rate':>7} "
           f"{'CPU s':>6} {'Kiln s':>6}"]
    for row in rows:
        rate = f"{row['rate']:.1%}" if row["rate"] is not None else "-"
        out.append(f"{row['file']:28} {row['cpu']:>10} {row['kiln']:>11} {rate:>7} "
                   f"{row['seconds']['cpu']:>6} {row['seconds']['kiln']:>6}")
    total_cpu = sum(r["cpu"] for r in rows)
    total_kiln = sum(r["kiln"] for r in rows)
    if len(rows) > 1 and total_cpu:
        out.append(f"{'total':28} {total_cpu:>10} {total_kiln:>11} "
                   f"{total_kiln / total_cpu:>7.1%}")
    for row in rows:
        for platform, why in row["crashed"].items():
            out.append(f"\n{row['file']} on {platform} did not finish: {why}")
        if row["groups"]:
            out.append(f"\n{row['file']}: why tests that pass on CPU fail on Kiln "
                       "(count, reason, example)")
            for group in row["groups"]:
                out.append(f"  {group['count']:5}  {group['reason']}\n"
                           f"         e.g. {group['example']}")
    return "\n".join(out)


def environment_summary(cases: str) -> dict:
    import importlib.metadata as md

    def version(package):
        try:
            return md.version(package)
        except md.PackageNotFoundError:
            return None
    return {"date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
            "jax": version("jax"), "jaxlib": version("jaxlib"), "kiln": version("kiln"),
            "python": host_platform.python_version(), "host": host_platform.node(),
            "cpus": os.cpu_count(), "JAX_NUM_GENERATED_CASES": cases}


def reused_cpu_results(path: Path, summary: dict) -> dict[str, Outcomes]:
    """The CPU side of an earlier run, per file, where it was run alike (same jax, cases)."""
    earlier = json.loads(path.read_text())
    before = earlier["environment"]
    for key in ("jax", "jaxlib", "JAX_NUM_GENERATED_CASES"):
        if before.get(key) != summary[key]:
            sys.exit(f"--reuse-cpu: {path} was run with {key}={before.get(key)}, "
                     f"this run has {summary[key]}")
    return {row["file"]: Outcomes(passed=set(row["cpu_passed"]), seconds=row["seconds"]["cpu"])
            for row in earlier["files"] if "cpu_passed" in row}


def file_names(positional: list[str], option: str | None) -> list[str]:
    names = list(positional) + [n for n in (option or "").split(",") if n.strip()]
    names = [n.strip() for n in names] or list(DEFAULT_FILES)
    return [n if n.endswith(".py") else n + ".py" for n in names]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("tests_dir", type=Path, help="the tests/ directory of a jax checkout")
    parser.add_argument("files", nargs="*", help="test files (default: the issue's 15)")
    parser.add_argument("--files", dest="file_list", metavar="A,B",
                        help="test files, comma-separated (.py may be left out)")
    parser.add_argument("-k", dest="select", help="pytest -k expression for every file")
    parser.add_argument("--jobs", type=int, default=1,
                        help="test processes at once (each file runs once per platform)")
    parser.add_argument("--timeout", type=int, default=3600,
                        help="seconds per file and platform (default 3600)")
    parser.add_argument("--test-timeout", type=int, default=300,
                        help="seconds per test, with pytest-timeout (0: none; default 300)")
    parser.add_argument("--cases", default=os.environ.get("JAX_NUM_GENERATED_CASES", "1"),
                        help="JAX_NUM_GENERATED_CASES (default: the environment's, else 1)")
    parser.add_argument("--devices", type=int,
                        help="devices for every file (default: 8 for shard_map_test, else 1)")
    parser.add_argument("--kiln-dut", default="cpu",
                        help="JAX_TEST_DUT on Kiln: the device JAX's tests take Kiln for "
                             "(default cpu; '' for Kiln's platform name)")
    parser.add_argument("--kiln-platforms", default="kiln",
                        help="JAX_PLATFORMS on Kiln's side (default kiln; 'kiln,cpu' also gives "
                             "JAX the CPU backend some of its internals place host values on, "
                             "with Kiln still the default device)")
    parser.add_argument("--reuse-cpu", type=Path, metavar="JSON",
                        help="the CPU side's passes from an earlier --json (same jax, same "
                             "--cases) instead of running JAX's CPU backend again")
    parser.add_argument("--top", type=int, default=15, help="failure groups shown per file")
    parser.add_argument("--json", type=Path, help="also write the results here (rewritten "
                        "as each file finishes)")
    args = parser.parse_args(argv)
    if not (args.tests_dir / "lax_test.py").is_file():
        parser.error(f"{args.tests_dir} is not the tests/ directory of a jax checkout")
    names = file_names(args.files, args.file_list)
    for name in names:
        if not (args.tests_dir / name).is_file():
            parser.error(f"no test file {name} in {args.tests_dir}")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")

    # Both platforms see the same environment but for the platform and its device count.
    base_env = dict(os.environ, JAX_NUM_GENERATED_CASES=str(args.cases), PYTHONUNBUFFERED="1")
    summary = environment_summary(str(args.cases))
    summary["kiln_JAX_TEST_DUT"] = args.kiln_dut
    summary["kiln_JAX_PLATFORMS"] = args.kiln_platforms
    reused = reused_cpu_results(args.reuse_cpu, summary) if args.reuse_cpu else {}
    results: dict[str, dict[str, Outcomes]] = collections.defaultdict(dict)
    rows: dict[str, dict] = {}
    lock = threading.Lock()

    def run(name: str, platform: str) -> None:
        devices = args.devices or FILE_DEVICES.get(name, 1)
        env = dict(base_env)
        if platform == "kiln":
            env["KILN_DEVICES"] = str(devices)
            if args.kiln_dut:
                env["JAX_TEST_DUT"] = args.kiln_dut
        elif devices > 1:
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                                f" --xla_force_host_platform_device_count={devices}").strip()
        if platform == "cpu" and name in reused:
            outcome = reused[name]
        else:
            outcome = run_file(args.tests_dir, name,
                               args.kiln_platforms if platform == "kiln" else platform,
                               args.select, args.timeout, args.test_timeout, env)
        with lock:
            results[name][platform] = outcome
            print(f"{name} [{platform}]: {len(outcome.passed)} passed, {len(outcome.failed)} "
                  f"failed, {len(outcome.skipped)} skipped, {outcome.seconds:.0f} s"
                  + (f" ({outcome.crashed})" if outcome.crashed else ""), flush=True)
            if len(results[name]) == len(PLATFORMS):
                rows[name] = compare(name, results[name], args.top)
                if args.json:
                    ordered = [rows[n] for n in names if n in rows]
                    args.json.write_text(json.dumps({"environment": summary, "files": ordered},
                                                    indent=1))

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run, name, p) for name in names for p in PLATFORMS]
        for future in futures:
            future.result()
    print(f"\nJAX's test suite on Kiln, {summary['date_utc']} UTC: jax {summary['jax']}, "
          f"JAX_NUM_GENERATED_CASES={args.cases}")
    print(format_table([rows[n] for n in names]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
