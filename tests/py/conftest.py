"""Shared helpers for Kiln's pytest suite."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

# Never the user's compile cache (tests/run.sh gives the whole run one).
os.environ.setdefault("KILN_CACHE_DIR", tempfile.mkdtemp(prefix="kiln-test-cache-"))

import kiln  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("KILN_SHARED", REPO.parent / "shared"))
TESTDATA = SHARED / "conformance" / "stablehlo-testdata"
INTERPRET = SHARED / "conformance" / "stablehlo-interpret"


def unary(op: str, type_: str) -> str:
    """A one-op StableHLO program `@main(x) -> op(x)`."""
    return (f"func.func @main(%x: {type_}) -> {type_} {{\n"
            f"  %0 = {op} %x : {type_}\n  return %0 : {type_}\n}}")


def binary(op: str, type_: str) -> str:
    return (f"func.func @main(%x: {type_}, %y: {type_}) -> {type_} {{\n"
            f"  %0 = {op} %x, %y : {type_}\n  return %0 : {type_}\n}}")


def run(source: str, *args):
    return kiln.compile(source)(*args)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def shared_file(name: str, suite: Path = TESTDATA) -> Path:
    """A conformance file; its absence is a failure (the data is part of every checkout's
    surroundings, so a skip would hide a broken setup)."""
    path = suite / name
    if not path.exists():
        pytest.fail(f"conformance data missing: {path} (tests read ../shared/ beside the checkout)")
    return path


def assert_checks_pass(name: str) -> None:
    """Compile a testdata program and require every check.* in it to hold."""
    _, outcomes = kiln.compile(shared_file(name)).run_checks()
    assert outcomes and all(o.passed for o in outcomes), [str(o) for o in outcomes]


@pytest.fixture
def jax_x64():
    """64-bit jax for one test's reference results, restored afterwards so other modules in
    the same worker keep jax's default."""
    jax = pytest.importorskip("jax", reason="jax is not installed")
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", old)
