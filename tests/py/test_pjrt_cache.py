"""Compile caches through Kiln's PJRT plugin (JAX_PLATFORMS=kiln).

JAX's persistent cache (`jax_compilation_cache_dir`): a second process running the same jitted
function loads Kiln's serialized executable from it and never asks Kiln to compile. A changed
entry, or one signed with another cache directory's key, is refused before loading (JAX
reports it and compiles again). Kiln's own compile cache (KILN_CACHE_DIR) serves the plugin's
compiles. Two processes (pjrt_cache_steps.py): the first fills the caches, the second reads
them and then tries each bad case."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax")

STEPS = Path(__file__).parent / "pjrt_cache_steps.py"
X = np.arange(12, dtype=np.float32).reshape(3, 4)
Y = np.linspace(-1, 1, 8, dtype=np.float32).reshape(4, 2)


def check_results(results):
    want = [np.sin(X) @ Y + 1, X.sum()]
    assert len(results) == 2
    for got, expected in zip(results, want):
        np.testing.assert_allclose(np.asarray(got, np.float32), expected, rtol=2e-6, atol=2e-6)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pjrt_cache")
    jax_cache, kiln_cache, other = root / "jax", root / "kiln", root / "other-kiln"
    jax_cache.mkdir()
    kiln_cache.mkdir(mode=0o700)
    other.mkdir(mode=0o700)
    env = dict(os.environ, JAX_PLATFORMS="kiln", KILN_CACHE_DIR=str(kiln_cache))
    env.pop("KILN_CACHE", None)
    seen = {}
    for name in ("first", "second"):
        proc = subprocess.run([sys.executable, str(STEPS), name, str(jax_cache), str(other)],
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        seen[name] = json.loads(proc.stdout.splitlines()[-1])
    return seen


def test_first_process_compiles_with_kiln_and_fills_jax_cache(runs):
    first = runs["first"]
    assert first["platform"] == "kiln"
    check_results(first["first"])
    assert first["compiles"] == 1 and first["counts"] == {"compiled": 1}
    assert len(first["entries"]) == 1 and first["entries"][0].endswith("-cache")


def test_second_process_loads_from_jax_cache_without_compiling(runs):
    second = runs["second"]
    assert second["compiles"] == 0, f"Kiln compiled despite JAX's cache: {second['first_warnings']}"
    assert second["counts"] == {"deserialized": 1}
    assert second["first"] == runs["first"]["first"]  # the same code ran
    # JAX's cache key hashes the topology's fingerprint (the same in both processes)
    assert isinstance(second["topology"], int) and second["topology"] == runs["first"]["topology"]


def test_a_changed_entry_is_a_clean_error_before_loading(runs):
    second = runs["second"]
    assert second["magic_found"]
    strict = second["tampered_strict"]
    assert strict["compiles"] == 0 and strict["counts"] == {}  # nothing loaded, nothing compiled
    text = strict["error"]
    assert text.startswith("JaxRuntimeError: INVALID_ARGUMENT: Kiln: "), text
    assert "signature does not match this user's key" in text and "refused before loading" in text


def test_after_a_refused_entry_jax_compiles_again_and_kilns_cache_serves_it(runs):
    lenient = runs["second"]["tampered"]
    assert any("Error reading persistent compilation cache entry" in w
               and "signature does not match" in w for w in lenient["warnings"])
    # Asked Kiln to compile once, and Kiln's own cache (written by the first process) had it.
    assert lenient["compiles"] == 1 and lenient["counts"] == {"kiln_cache": 1}
    check_results(lenient["results"])


def test_an_entry_signed_under_another_cache_directory_is_refused(runs):
    other = runs["second"]["other_key"]
    assert any("signature does not match" in w for w in other["warnings"])
    assert other["compiles"] == 1 and other["counts"] == {"compiled": 1}  # fresh Kiln cache
    check_results(other["results"])


def test_without_kilns_cache_nothing_is_stored_and_jax_says_why(runs):
    second = runs["second"]
    assert second["uncached"] == [(X * 3).tolist()]
    assert second["uncached_new_entries"] == []
    assert any("Error writing persistent compilation cache entry" in w
               and "signs serialized executables with the key in its compile cache" in w
               for w in second["uncached_warnings"]), second["uncached_warnings"]
