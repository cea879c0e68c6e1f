"""The loop lowerings' op builders (lowering/legalize/loops.py): what they build in place of
sort, scatter and select_and_scatter, before upstream legalization runs."""
import pytest
from torch_mlir import ir

from kiln.context import make_context
from kiln.lowering.ir_util import walk
from kiln.lowering.legalize import scatter, sort, windows
from kiln.lowering.legalize.loops import SCALARIZE_ATTR

SORT = """
func.func @main(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  %0 = "stablehlo.sort"(%x) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %lt = stablehlo.compare LT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1> loc("cmp.py":9:9)
    stablehlo.return %lt : tensor<i1> loc("cmp.py":9:9)
  }) {dimension = 1 : i64} : (tensor<2x5xf32>) -> tensor<2x5xf32> loc("prog.py":4:2)
  return %0 : tensor<2x5xf32>
}
"""

SCATTER = """
func.func @main(%x: tensor<5x3xf32>, %i: tensor<4x1xi32>, %u: tensor<4x3xf32>) -> tensor<5x3xf32> {
  %0 = "stablehlo.scatter"(%x, %i, %u) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32> loc("add.py":2:2)
    stablehlo.return %s : tensor<f32> loc("add.py":2:2)
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1],
      inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}
     : (tensor<5x3xf32>, tensor<4x1xi32>, tensor<4x3xf32>) -> tensor<5x3xf32> loc("prog.py":7:3)
  return %0 : tensor<5x3xf32>
}
"""

SELECT_AND_SCATTER = """
func.func @main(%x: tensor<4x2xi64>, %s: tensor<2x2xi64>, %init: tensor<i64>) -> tensor<4x2xi64> {
  %0 = "stablehlo.select_and_scatter"(%x, %s, %init) ({
  ^bb0(%a: tensor<i64>, %b: tensor<i64>):
    %ge = stablehlo.compare GE, %a, %b : (tensor<i64>, tensor<i64>) -> tensor<i1> loc("sel.py":1:1)
    stablehlo.return %ge : tensor<i1> loc("sel.py":1:1)
  }, {
  ^bb0(%a: tensor<i64>, %b: tensor<i64>):
    %sum = stablehlo.add %a, %b : tensor<i64> loc("sel.py":1:1)
    stablehlo.return %sum : tensor<i64> loc("sel.py":1:1)
  }) {window_dimensions = array<i64: 3, 1>, window_strides = array<i64: 2, 1>,
      padding = dense<[[0, 1], [0, 0]]> : tensor<2x2xi64>}
     : (tensor<4x2xi64>, tensor<2x2xi64>, tensor<i64>) -> tensor<4x2xi64> loc("prog.py":5:1)
  return %0 : tensor<4x2xi64>
}
"""

CASES = [
    (SORT, sort.lower_sorts, '"prog.py":4:2', '"cmp.py"'),
    (SCATTER, scatter.lower_scatters, '"prog.py":7:3', '"add.py"'),
    (SELECT_AND_SCATTER, windows.lower_select_and_scatters, '"prog.py":5:1', '"sel.py"'),
]


def lowered(text, lower):
    ctx = make_context()
    module = ir.Module.parse(text, ctx)
    lower(module)
    assert module.operation.verify()
    func = module.body.operations[0].operation
    return module, [o for o in walk(func) if o.name != "func.return"]


@pytest.mark.parametrize("text, lower, op_loc, region_loc", CASES)
def test_built_ops_carry_the_lowered_ops_location(text, lower, op_loc, region_loc):
    module, ops = lowered(text, lower)
    assert ops and not any(o.name in ("stablehlo.sort", "stablehlo.scatter",
                                      "stablehlo.select_and_scatter") for o in ops)
    for o in ops:
        if o.name == "linalg.yield":  # linalg.fill's implicit body, built by the bindings
            continue
        # Built ops carry the op's location; the cloned region bodies keep their own.
        where = region_loc if o.name in ("stablehlo.compare", "stablehlo.add") else op_loc
        assert where in str(o.location), (o.name, str(o.location))


@pytest.mark.parametrize("text, lower, op_loc, region_loc", CASES)
def test_index_constants_are_built_once_ahead_of_the_loops(text, lower, op_loc, region_loc):
    module, ops = lowered(text, lower)
    constants = [o for o in ops if o.name == "arith.constant" and str(o.results[0].type) == "index"]
    values = [ir.IntegerAttr(o.attributes["value"]).value for o in constants]
    assert 0 in values and len(values) == len(set(values))
    top = [o.operation for o in module.body.operations[0].operation.regions[0].blocks[0].operations]
    first_loop = next(k for k, o in enumerate(top) if o.name == "scf.for")
    assert all(top.index(c) < first_loop for c in constants)


@pytest.mark.parametrize("text, lower, count", [(SORT, sort.lower_sorts, 3),
                                                 (SCATTER, scatter.lower_scatters, 1),
                                                 (SELECT_AND_SCATTER,
                                                  windows.lower_select_and_scatters, 2)])
def test_scalarized_loops_are_marked(text, lower, count):
    # sort: one merge loop per pass (widths 1, 2, 4 for 5 elements); scatter: the window
    # loop; select_and_scatter: the window walk and the loop over the source.
    _, ops = lowered(text, lower)
    marked = [o for o in ops if SCALARIZE_ATTR in o.attributes]
    assert len(marked) == count and all(o.name == "scf.for" for o in marked)

