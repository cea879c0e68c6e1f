"""Kiln's code generation passes for the CPU target (XLA:CPU's dot/conv emitters' role):
library calls for large matrix products, and attributes that let LLVM vectorize."""
from .parallel import parallelize
from .fastmath import approximate_math, reassociate_reductions
from .blas import blas_calls, blas_library, protect_contractions, restore_contractions

__all__ = ["parallelize", "approximate_math", "reassociate_reductions", "blas_calls", "blas_library", "protect_contractions", "restore_contractions"]
