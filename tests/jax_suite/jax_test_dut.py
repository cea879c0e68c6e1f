"""A pytest plugin the runner loads into JAX's test processes (run_jax_tests.py): JAX reads
its `jax_test_dut` flag ("the device under test") only from absl's command line, which pytest
does not parse, so this sets it from the environment's JAX_TEST_DUT before any test runs."""
import os


def pytest_configure(config):
    dut = os.environ.get("JAX_TEST_DUT")
    if dut:
        import jax
        from jax._src import test_util  # noqa: F401 - defines the flag

        jax.config.update("jax_test_dut", dut)
