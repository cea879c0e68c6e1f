"""Kiln's code generation passes for the CPU target (XLA:CPU's dot/conv emitters' role):
library calls for large products and convolutions, vectorizable math and reductions, and
large elementwise loop nests on all cores."""
from .blas import (blas_calls, blas_library, jit_symbols, protect_contractions,
                   restore_contractions)
from .fastmath import approximate_math, reassociate_reductions
from .parallel import parallelize

__all__ = ["approximate_math", "blas_calls", "blas_library", "jit_symbols", "parallelize",
           "protect_contractions", "reassociate_reductions", "restore_contractions"]
