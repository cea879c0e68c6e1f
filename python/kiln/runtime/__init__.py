"""Kiln's runtime ABI: how compiled code and numpy meet. Memref descriptors (memref.py), the
MLIR <-> numpy element types (dtypes.py), custom-call targets and call sites (custom_call.py,
lapack.py) and the semantics of `check.*` outcomes over numpy results (checks.py).

It sits below everything that compiles: it imports nothing from lowering, pipeline, targets,
front ends or the driver (tests/py/test_layering.py holds it to that)."""
