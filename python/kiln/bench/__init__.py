"""`kiln bench`: Kiln against XLA:CPU (jax.jit) and IREE (llvm-cpu) on the same StableHLO.

Run on demand (`kiln bench`), never part of the tests' pass/fail.
"""
from .runner import Row, Measurement, measure, run, table, to_json
from .workloads import WORKLOADS, Workload, by_name

__all__ = ["Row", "Measurement", "measure", "run", "table", "to_json", "WORKLOADS", "Workload",
           "by_name"]
