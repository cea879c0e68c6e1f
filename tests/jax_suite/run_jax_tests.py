#!/usr/bin/env python
"""JAX's own test suite as the yardstick of Kiln's PJRT plugin.

Runs test files of a jax checkout (the tag of the installed jax; nothing is fetched or copied)
under JAX_PLATFORMS=cpu and JAX_PLATFORMS=kiln, and prints per file: the tests that pass on
JAX's CPU backend, how many of those pass on Kiln, the rate, and why the others fail, grouped.

    python tests/jax_suite/run_jax_tests.py /path/to/jax/tests lax_test.py -k "testAdd or testDot"

A checkout of the right tag, without network access on the machine running this:
    git --git-dir=<mirror> archive jax-v0.10.2 tests | tar -x -C /tmp/jaxsrc
"""
from __future__ import annotations

import argparse
import collections
import os
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


@dataclass
class Outcomes:
    passed: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)  # test -> first line of the failure
    skipped: set[str] = field(default_factory=set)
    seconds: float = 0.0
    crashed: str = ""  # the run did not finish (timeout, signal): what it said last


_LINE = re.compile(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
MAX_RESTARTS = 50


def run_file(tests_dir: Path, name: str, platform: str, select: str | None, timeout: int,
             extra_env: dict[str, str]) -> Outcomes:
    """Runs one test file on one platform. A run that dies (a crash in native code) is
    resumed after the test it died in, which counts as failed with the signal as its reason."""
    outcomes = Outcomes()
    started = time.monotonic()
    done: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        # unbuffered: a process that dies has written every finished test's line
        env = dict(os.environ, JAX_PLATFORMS=platform, PYTHONUNBUFFERED="1", **extra_env)
        env.setdefault("KILN_CACHE_DIR", tmp)
        for attempt in range(MAX_RESTARTS):
            left = timeout - (time.monotonic() - started)
            if left <= 0:
                outcomes.crashed = f"timed out after {timeout} s"
                break
            report = Path(tmp) / f"report{attempt}.xml"
            deselect = Path(tmp) / "deselect.txt"
            deselect.write_text("".join(f"--deselect={t}\n" for t in done))
            command = [sys.executable, "-m", "pytest", str(tests_dir / name), "-v", "-p",
                       "no:cacheprovider", "-o", "addopts=", "--rootdir", str(tests_dir),
                       f"--junitxml={report}", "-W", "ignore", f"@{deselect}"]
            if select:
                command += ["-k", select]
            try:
                proc = subprocess.run(command, env=env, cwd=tests_dir, capture_output=True,
                                      text=True, timeout=left)
            except subprocess.TimeoutExpired as exc:
                stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
                read_lines(stdout, outcomes, done, None)
                outcomes.crashed = f"timed out after {timeout} s"
                break
            if proc.returncode in (0, 1, 5):  # finished (tests failed / none collected: fine)
                read_lines(proc.stdout, outcomes, done, None)
                if report.exists():
                    read_report(report, outcomes)
                break
            why = f"the test process died (exit {proc.returncode})"
            crashed_in = read_lines(proc.stdout, outcomes, done, why)
            if crashed_in is None:  # died outside a test: nothing to skip past
                tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
                outcomes.crashed = f"exit {proc.returncode}: " + " | ".join(tail)
                break
    outcomes.seconds = time.monotonic() - started
    return outcomes


def read_lines(stdout: str, outcomes: Outcomes, done: list[str], crash: str | None):
    """Outcomes from pytest -v's lines; with `crash`, the test that was running when the
    process died (its line has no outcome) fails with that reason. Returns that test."""
    running = None
    for line in stdout.splitlines():
        match = _LINE.match(line)
        if match:
            test, result = match.groups()
            done.append(test)
            if result in ("PASSED", "XFAIL"):
                outcomes.passed.add(test)
            elif result == "SKIPPED":
                outcomes.skipped.add(test)
            else:
                outcomes.failed.setdefault(test, "failed (see the test's own report)")
            running = None
        elif "::" in line and crash and line.split(" ")[0].count("::") >= 1:
            running = line.split(" ")[0]
    if crash and running:
        done.append(running)
        outcomes.failed[running] = crash
    return running


def read_report(path: Path, outcomes: Outcomes) -> None:
    """Failure messages from the junit report, keyed like pytest's node ids."""
    for case in ET.parse(path).getroot().iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        test = f"{'/'.join(parts[:-1])}.py::{parts[-1]}::{case.get('name')}"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None and test in outcomes.failed:
            outcomes.failed[test] = reason(problem.get("message") or problem.text or "")


def reason(message: str) -> str:
    """A failure's message reduced to what groups alike failures: its first meaningful line,
    numbers and quoted names replaced."""
    lines = [l.strip() for l in message.strip().splitlines() if l.strip()]
    line = lines[0] if lines else "(no message)"
    for candidate in lines:  # prefer the error line over a traceback's context
        if re.match(r"^\w+(Error|Exception)\b", candidate):
            line = candidate
            break
    line = re.sub(r"0x[0-9a-f]+", "0x?", line)
    line = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", line)
    line = re.sub(r"'[^']*'", "'…'", line)
    return line[:140]


def report_file(name: str, results: dict[str, Outcomes], top: int) -> dict:
    cpu, kiln = results["cpu"], results["kiln"]
    baseline = cpu.passed
    passing = baseline & kiln.passed
    rate = len(passing) / len(baseline) if baseline else float("nan")
    groups = collections.Counter()
    for test in sorted(baseline - kiln.passed):
        if test in kiln.failed:
            groups[kiln.failed[test]] += 1
        elif test in kiln.skipped:
            groups["skipped on kiln (JAX's test decides by platform)"] += 1
        else:
            groups["did not run on kiln" + (f" ({kiln.crashed})" if kiln.crashed else "")] += 1
    return {"file": name, "cpu": len(baseline), "kiln": len(passing), "rate": rate,
            "groups": groups.most_common(top), "cpu_s": cpu.seconds, "kiln_s": kiln.seconds,
            "crashed": {p: r.crashed for p, r in results.items() if r.crashed}}


def print_table(rows: list[dict]) -> None:
    print(f"\n{'file':32} {'CPU passes':>10} {'Kiln passes':>11} {'rate':>7} "
          f"{'CPU s':>7} {'Kiln s':>7}")
    for row in rows:
        print(f"{row['file']:32} {row['cpu']:>10} {row['kiln']:>11} {row['rate']:>7.1%} "
              f"{row['cpu_s']:>7.0f} {row['kiln_s']:>7.0f}")
    total_cpu = sum(r["cpu"] for r in rows)
    total_kiln = sum(r["kiln"] for r in rows)
    if len(rows) > 1 and total_cpu:
        print(f"{'total':32} {total_cpu:>10} {total_kiln:>11} {total_kiln / total_cpu:>7.1%}")
    for row in rows:
        for platform, why in row["crashed"].items():
            print(f"\n{row['file']} on {platform} did not finish: {why}")
        if row["groups"]:
            print(f"\n{row['file']}: why tests that pass on CPU fail on Kiln")
            for text, count in row["groups"]:
                print(f"  {count:5}  {text}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tests_dir", type=Path, help="the tests/ directory of a jax checkout")
    parser.add_argument("files", nargs="*", default=["lax_test.py"],
                        help="test files to run (default: lax_test.py)")
    parser.add_argument("-k", dest="select", help="pytest -k expression for every file")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per file and platform")
    parser.add_argument("--devices", type=int, default=1, help="KILN_DEVICES for the Kiln run")
    parser.add_argument("--top", type=int, default=15, help="failure groups shown per file")
    parser.add_argument("--parallel", action="store_true",
                        help="run the CPU and the Kiln side of a file at the same time")
    args = parser.parse_args(argv)
    if not (args.tests_dir / "lax_test.py").is_file():
        parser.error(f"{args.tests_dir} is not the tests/ directory of a jax checkout")
    rows = []
    for name in args.files:
        if not (args.tests_dir / name).is_file():
            parser.error(f"no test file {name} in {args.tests_dir}")
        results = {}

        def run(platform):
            extra = {"KILN_DEVICES": str(args.devices)} if platform == "kiln" else {}
            if args.devices > 1 and platform == "cpu":
                extra = {"XLA_FLAGS": f"--xla_force_host_platform_device_count={args.devices}"}
            results[platform] = run_file(args.tests_dir, name, platform, args.select,
                                         args.timeout, extra)
            print(f"{name} [{platform}]: {len(results[platform].passed)} passed, "
                  f"{len(results[platform].failed)} failed, {len(results[platform].skipped)} "
                  f"skipped, {results[platform].seconds:.0f} s", flush=True)

        if args.parallel:  # both platforms at once: one process each
            threads = [threading.Thread(target=run, args=(p,)) for p in PLATFORMS]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        else:
            for platform in PLATFORMS:
                run(platform)
        rows.append(report_file(name, results, args.top))
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
