"""The `kiln` dialect: Kiln's own names in the IR, declared once.

Kiln's lowerings build StableHLO, upstream and runtime-call IR only, so the dialect has one
type (`!kiln.opaque`, HLO's opaque element type) and no ops today (the `kiln.region` placeholder of the sort/scatter lowerings is gone: they build their
regions directly). It is still registered in every context so that an unknown `kiln.*` op in
an input is reported as such, and its discardable attributes below belong to a known dialect.
Use these names instead of spelling `"kiln.…"` in a pass: lowering/trust.py tells inputs'
attributes from Kiln's own by them.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import ext


class KilnDialect(ext.Dialect, name="kiln"):
    pass


class OpaqueType(KilnDialect.Type, name="opaque"):
    """`!kiln.opaque`: HLO's `opaque[]` element type (a custom call's handle), which StableHLO
    has no type for (kiln.layout's ELEMENT_TYPES)."""


PREFIX = "kiln."

# -- written by the front ends (an input program may carry them) ---------------------------
LAYOUT = "kiln.layout"                  # an HLO parameter's/result's layout, e.g. "{0,1}"
OPERAND_TREE = "kiln.operand_tree"      # a custom call's tuple operand shape (custom_calls.py)
RESULT_TREE = "kiln.result_tree"        # ... and its tuple result shape
FUSION_KIND = "kiln.fusion_kind"        # the HLO fusion an inlined op came from
HLO_MODULE = "kiln.hlo_module"          # the HLO module's name, for the HLO exporter
NUM_PARTITIONS = "kiln.num_partitions"  # HLO module config, kept for the exporter
REPLICA_COUNT = "kiln.replica_count"
HLO_CONFIG = {"num_partitions": NUM_PARTITIONS, "replica_count": REPLICA_COUNT}
SHARDING = "kiln.sharding"              # a value's split over devices (distributed/sharding.py)
JAX = "kiln.jax."                       # prefix of a JAX export's recorded details
JAX_INFO = "kiln.jax.info"              # its calling convention (frontend/jax_export.py)

# -- set by one lowering for a later one (never trusted from an input) ---------------------
CHECKS = "kiln.checks"                  # the outlined checks of an entry (lowering/checks.py)
USER_RESULTS = "kiln.user_results"      # how many entry results are the program's own
RESULT_SOURCES = "kiln.result_sources"  # entry results that alias arguments (lowering/entry.py)
SCALARIZE = "kiln.scalarize"            # a loop body to scalarize (legalize/loops.py)
OUTLINED_CONTRACTION = "kiln.outlined_contraction"  # a BLAS-bound contraction (codegen/blas.py)
CUSTOM_CALL_SITE = "kiln.custom_call_site"          # custom_calls.py's buffer bookkeeping
CUSTOM_CALL_TARGET = "kiln.custom_call_target"
CALL_SITES = "kiln.call_sites"                      # module: custom-call site specs (JSON), by index
CALL_SITE_SYMBOL = "__kiln_call_site_"              # + index: the global holding a site's address

# -- custom-call targets Kiln itself emits -----------------------------------------------------
STOCHASTIC_CONVERT = "kiln.stochastic_convert"

# What lowering/trust.py accepts from an input (its FRONTEND_ATTRIBUTES pattern says the same);
# the HLO config names are not among them there.
FRONTEND_ATTRIBUTES = frozenset({LAYOUT, OPERAND_TREE, RESULT_TREE, FUSION_KIND, HLO_MODULE,
                                 SHARDING})


def is_frontend_attribute(name: str) -> bool:
    return name in FRONTEND_ATTRIBUTES or name.startswith(JAX)


def load(ctx: ir.Context) -> None:
    with ctx, ir.Location.unknown():
        KilnDialect.load()
