"""What product routine compiled code calls, for the tests of the BLAS routing
(test_codegen_blas.py, test_products_small.py, test_amx_products.py)."""
from __future__ import annotations

import re

# The runtime's pooled entries (runtime/kiln_gemm_pooled.c) call the library's gemm: on its
# own threads on an idle machine, in pieces on Kiln's pool on a busy one. Which library
# routine a product reaches is what these tests check, so they count as that routine.
POOLED = {"kiln_sgemm_pooled": "kiln_blas_sgemm", "kiln_dgemm_pooled": "kiln_blas_dgemm"}
_POOLED_CALL = re.compile(r"call @(kiln_[sd]gemm_pooled)\(")


def product_calls(codegen: str, pattern: str) -> list[str]:
    """The callees matching `pattern` (one group) or a pooled entry, one per call site, in
    order, pooled entries named as the library routine they call; thread control aside."""
    found = re.finditer(rf"call @(?:{pattern}|(kiln_[sd]gemm_pooled))\(", codegen)
    names = [POOLED[m[2]] if m[2] else m[1] for m in found]
    return [n for n in names if n != "kiln_blas_set_threads"]


def calls_library_gemm(codegen: str, letter: str = "s") -> bool:
    """Whether the program calls the library's ?gemm, directly or through the pooled entry."""
    return f"kiln_blas_{letter}gemm" in codegen or f"kiln_{letter}gemm_pooled" in codegen
