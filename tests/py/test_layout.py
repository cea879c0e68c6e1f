"""Shapes, layouts and tiling (kiln.layout) against the worked examples of the shape/layout
and tiled-layout documents, plus a randomized bijection check."""
from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from kiln.errors import KilnError
from kiln.layout import ELEMENT_TYPES, COMBINED, Layout, Shape, Tile


def all_indices(dims):
    return itertools.product(*[range(d) for d in dims])


# ----------------------------------------------------------------------------- text round trips

@pytest.mark.parametrize("text", [
    "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}",
    "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)S(1)}",
    "bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}",
    "f32[3,5]{1,0:T(2,2)}",
    "f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}",
    "s32[<=4,2]", "f32[?,3]", "token[]", "pred[]", "f32[0]", "u8[2,3]{0,1}",
    "(f32[2], (s32[], pred[3]))", "()", "(f32[2]{0}, token[])",
    "pred[1024]{0:T(32,128)(32,1)E(1)}", "f32[16]{0:T(8)L(128)S(5)}",
    "s4[8]{0:E(4)}", "f32[4,4]{1,0:T(2,2)#(s32)*(s32)M(8)}",
])
def test_shape_text_round_trips(text):
    assert str(Shape.parse(text)) == text


def test_shape_fields():
    s = Shape.parse("bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)S(1)}")
    assert s.element_type == "bf16" and s.dims == [8, 1, 1280, 16384]
    assert s.layout.minor_to_major == [3, 2, 0, 1]
    assert s.layout.tiles == [Tile((8, 128)), Tile((2, 1))]
    assert s.layout.memory_space == 1
    assert s.mlir_type() == "tensor<8x1x1280x16384xbf16>"
    t = Shape.parse("(f32[2], (s32[], pred[3]))")
    assert t.is_tuple and [str(x) for x in t.leaves()] == ["f32[2]", "s32[]", "pred[3]"]
    d = Shape.parse("s32[<=4,2]")
    assert d.dynamic == [True, False] and not d.is_static
    assert d.mlir_type() == "tensor<?x2xi32, #stablehlo.bounds<4, ?>>"
    assert Shape.parse("token[]").mlir_type() == "!stablehlo.token"
    assert Shape.parse("f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}").layout.tiles[0].dims == \
        (COMBINED, COMBINED, 2, COMBINED, 3)


@pytest.mark.parametrize("bad,col", [("f33[2]", 1), ("f32[2,x]", 7), ("f32[2]{0,1}", 7),
                                     ("f32[2]{0:Q(1)}", 10), ("(f32[2] s32[])", 9)])
def test_shape_errors_have_columns(bad, col):
    with pytest.raises(KilnError) as e:
        Shape.parse(bad)
    assert e.value.location == f"column {col}", e.value.one_line()


def test_element_type_table():
    import ml_dtypes

    assert ELEMENT_TYPES["pred"].mlir == "i1" and ELEMENT_TYPES["pred"].dtype == np.bool_
    assert ELEMENT_TYPES["u32"].mlir == "ui32" and ELEMENT_TYPES["s64"].mlir == "i64"
    assert ELEMENT_TYPES["c64"].mlir == "complex<f32>" and ELEMENT_TYPES["c128"].dtype == np.complex128
    assert ELEMENT_TYPES["bf16"].dtype == ml_dtypes.bfloat16
    for name, mlir, dt in [("f8e4m3fn", "f8E4M3FN", ml_dtypes.float8_e4m3fn),
                           ("f8e5m2", "f8E5M2", ml_dtypes.float8_e5m2),
                           ("f8e4m3b11fnuz", "f8E4M3B11FNUZ", ml_dtypes.float8_e4m3b11fnuz),
                           ("f8e4m3fnuz", "f8E4M3FNUZ", ml_dtypes.float8_e4m3fnuz),
                           ("f8e5m2fnuz", "f8E5M2FNUZ", ml_dtypes.float8_e5m2fnuz),
                           ("f8e4m3", "f8E4M3", ml_dtypes.float8_e4m3),
                           ("f8e3m4", "f8E3M4", ml_dtypes.float8_e3m4),
                           ("s4", "i4", ml_dtypes.int4), ("u4", "ui4", ml_dtypes.uint4),
                           ("s2", "i2", ml_dtypes.int2), ("u2", "ui2", ml_dtypes.uint2)]:
        assert ELEMENT_TYPES[name].mlir == mlir and ELEMENT_TYPES[name].dtype == np.dtype(dt)
    for n in ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "f32", "f64"):
        assert ELEMENT_TYPES[n].dtype.itemsize * 8 == ELEMENT_TYPES[n].bits


# ----------------------------------------------------------------------------- seed 000 examples

def test_minor_to_major_examples_from_layout_doc():
    # [[a b c], [d e f]]: minor_to_major [0, 1] stores a d b e c f; [1, 0] stores a b c d e f.
    letters = np.array([["a", "b", "c"], ["d", "e", "f"]])
    for m2m, expected in (("{0,1}", "adbecf"), ("{1,0}", "abcdef")):
        lay = Shape.parse(f"f32[2,3]{m2m}").layout
        mem = [""] * 6
        for idx in all_indices((2, 3)):
            mem[lay.linear_index(idx)] = letters[idx]
        assert "".join(mem) == expected


def test_default_layout_is_major_to_minor():
    assert Layout.default(4).minor_to_major == [3, 2, 1, 0]
    s = Shape.parse("f32[2,3,4]")
    lay = s.effective_layout()
    assert lay.linear_index((1, 2, 3), s.dims) == 1 * 12 + 2 * 4 + 3


def test_memory_space_examples():
    assert Shape.parse("bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}").layout.memory_space == 1
    assert Shape.parse("f32[4]{0:S(5)}").layout.memory_space == 5
    assert Shape.parse("f32[4]{0}").layout.memory_space == 0


# ----------------------------------------------------------------------------- seed 003 examples

def test_figure1_element_2_3_is_at_17():
    s = Shape.parse("f32[3,5]{1,0:T(2,2)}")
    assert s.layout.linear_index((2, 3)) == 17
    # tiles cover a 4x6 padded array: (2 x 3 tiles) * (2 x 2 elements)
    assert s.layout.padded_size() == 24


def test_tiling_is_pad_reshape_transpose():
    # The document's equivalent definition, computed with numpy for f32[3,5] T(2,2).
    d, t = (3, 5), (2, 2)
    ids = np.arange(15).reshape(d)
    padded = np.full((4, 6), -1)
    padded[:3, :5] = ids
    phys = padded.reshape(2, 2, 3, 2).transpose(0, 2, 1, 3).reshape(-1)
    lay = Shape.parse("f32[3,5]{1,0:T(2,2)}").layout
    for idx in all_indices(d):
        assert phys[lay.linear_index(idx)] == ids[idx]
    assert t == lay.tiles[0].dims


def test_repeated_tiling_4x8_bf16_packing():
    lay = Shape.parse("bf16[4,8]{1,0:T(2,4)(2,1)}").layout
    got = np.array([[lay.linear_index((r, c)) for c in range(8)] for r in range(4)])
    # Each 2x4 tile holds 8 consecutive slots; inside it, the 2x1 tiles pair an even-row
    # element with the odd-row element below it (the 16-bit packing of the document).
    expected = np.array([[0, 2, 4, 6, 8, 10, 12, 14],
                         [1, 3, 5, 7, 9, 11, 13, 15],
                         [16, 18, 20, 22, 24, 26, 28, 30],
                         [17, 19, 21, 23, 25, 27, 29, 31]])
    np.testing.assert_array_equal(got, expected)


def test_tpu_bf16_tiling_8_128_2_1():
    s = Shape.parse("bf16[16,256]{1,0:T(8,128)(2,1)}")
    lay = s.layout
    assert lay.linear_index((0, 0)) == 0 and lay.linear_index((1, 0)) == 1
    assert lay.linear_index((0, 1)) == 2
    assert lay.linear_index((0, 128)) == 8 * 128           # second tile along the row
    assert lay.linear_index((8, 0)) == 2 * 8 * 128          # first tile of the next tile row
    assert lay.padded_size() == 16 * 256


def test_small_tiles_pad():
    # TPU small-tile format: second-minor of size 2 with T(2,128) pads only the minor dim.
    assert Shape.parse("f32[2,100]{1,0:T(2,128)}").layout.padded_size() == 256
    assert Shape.parse("f32[2,100]{1,0:T(8,128)}").layout.padded_size() == 1024
    assert Shape.parse("pred[5,40]{1,0:T(32,128)(32,1)}").layout.padded_size() == 32 * 128


def test_combined_dimensions_example():
    # F32[2,7,8,11,10] with T(*,*,2,*,3) is laid out like F32[112,110] with T(2,3).
    big = Shape.parse("f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}")
    flat = Shape.parse("f32[112,110]{1,0:T(2,3)}")
    assert big.layout.padded_size() == flat.layout.padded_size() == 112 * 111
    r = random.Random(3)
    for _ in range(300):
        e = [r.randrange(d) for d in big.dims]
        row = (e[0] * 7 + e[1]) * 8 + e[2]
        col = e[3] * 10 + e[4]
        assert big.layout.linear_index(e) == flat.layout.linear_index((row, col))


def test_tiles_respect_minor_to_major():
    # Tiling applies to physical dimensions: a column-major 3x5 is a row-major 5x3.
    cm = Shape.parse("f32[3,5]{0,1:T(2,2)}").layout
    rm = Shape.parse("f32[5,3]{1,0:T(2,2)}").layout
    for i, j in all_indices((3, 5)):
        assert cm.linear_index((i, j)) == rm.linear_index((j, i))


def test_tail_padding_alignment():
    assert Shape.parse("f32[3,5]{1,0:T(2,2)L(10)}").layout.padded_size() == 30
    assert Shape.parse("f32[7]{0:L(4)}").layout.padded_size() == 8


def test_linear_index_errors():
    lay = Shape.parse("f32[3,5]{1,0:T(2,2)}").layout
    with pytest.raises(KilnError):
        lay.linear_index((3, 0))
    with pytest.raises(KilnError):
        lay.linear_index((1,))
    with pytest.raises(KilnError):
        Shape.parse("f32[4]{0:T(*)}").layout.linear_index((0,))


def test_random_tilings_are_bijections_onto_padded_buffer():
    r = random.Random(1234)
    for _ in range(150):
        rank = r.randint(1, 4)
        dims = [r.randint(1, 6) for _ in range(rank)]
        m2m = list(range(rank))
        r.shuffle(m2m)
        tiles = []
        cur_rank = rank
        for _ in range(r.randint(0, 2)):
            k = r.randint(1, cur_rank)
            t = [r.randint(1, 4) for _ in range(k)]
            if k > 1 and r.random() < 0.3:
                t[r.randrange(k - 1)] = COMBINED
            tiles.append(Tile(tuple(t)))
            # after a tile of k dims (c of them combined) the shape gains k - 2c dims
            cur_rank = cur_rank + (k - 2 * t.count(COMBINED))
        lay = Layout(m2m, tiles)
        shape = Shape("f32", dims, layout=lay)
        text = str(shape)
        assert str(Shape.parse(text)) == text
        size = lay.padded_size()
        seen = set()
        for idx in all_indices(dims):
            li = lay.linear_index(idx)
            assert 0 <= li < size, (text, idx, li, size)
            seen.add(li)
        assert len(seen) == int(np.prod(dims)), text
        assert size >= len(seen)


def test_vectorized_linear_indices_match_scalar_formula():
    for text in ("f32[3,5]{1,0:T(2,2)}", "bf16[4,8]{1,0:T(2,4)(2,1)}", "f32[2,3,4]{0,2,1}",
                 "f32[2,7,8,3,5]{4,3,2,1,0:T(*,*,2,*,3)}", "f32[]"):
        s = Shape.parse(text)
        lay = s.effective_layout()
        scalar = [lay.linear_index(i, s.dims) for i in all_indices(s.dims)] if s.dims else [0]
        np.testing.assert_array_equal(lay.linear_indices(s.dims), scalar)


# ----------------------------------------------------------------------------- physical arrays

from kiln.layout import Pad, Reshape, Slice, Transpose, bitcast_steps, run_steps  # noqa: E402


def random_layouts(seed: int, count: int):
    """(dims, layout) pairs: random shapes, dimension orders, tiles (with '*') and tail
    padding, each valid for its shape."""
    r = random.Random(seed)
    out = []
    while len(out) < count:
        rank = r.randint(1, 4)
        dims = [r.randint(1, 6) for _ in range(rank)]
        m2m = list(range(rank))
        r.shuffle(m2m)
        tiles, cur_rank = [], rank
        for _ in range(r.randint(0, 2)):
            k = r.randint(1, cur_rank)
            t = [r.randint(1, 4) for _ in range(k)]
            if k > 1 and r.random() < 0.3:
                t[r.randrange(k - 1)] = COMBINED
            tiles.append(Tile(tuple(t)))
            cur_rank = cur_rank + (k - 2 * t.count(COMBINED))
        align = r.choice([1, 1, 1, 4, 7])
        out.append((dims, Layout(m2m, tiles, tail_padding_alignment_in_elements=align)))
    return out


def test_physical_array_puts_every_element_at_its_linear_index():
    # The steps (pad/reshape/transpose per tile) against the linear-index formula: the
    # physical array, flattened, holds element e at linear_index(e), and its size is the
    # padded size; to_logical undoes to_physical.
    for dims, lay in random_layouts(7, 200):
        x = np.arange(1, int(np.prod(dims)) + 1, dtype=np.int64).reshape(dims)
        phys = lay.to_physical(x)
        assert list(phys.shape) == lay.physical_dims(dims), str(lay)
        assert phys.size == lay.padded_size(dims), str(lay)
        flat = phys.reshape(-1)
        np.testing.assert_array_equal(flat[lay.linear_indices(dims)], x.reshape(-1), str(lay))
        padding = np.ones(flat.size, bool)
        padding[lay.linear_indices(dims)] = False
        assert not flat[padding].any(), "padding is written as zeros"
        np.testing.assert_array_equal(lay.to_logical(phys, dims), x, str(lay))


def test_figure1_steps_are_pad_reshape_transpose():
    lay = Shape.parse("f32[3,5]{1,0:T(2,2)}").layout
    assert lay.to_physical_steps() == [Pad((1, 1)), Reshape((2, 2, 3, 2)), Transpose((0, 2, 1, 3))]
    assert lay.physical_dims() == [2, 3, 2, 2]
    assert lay.to_logical_steps() == [Transpose((0, 2, 1, 3)), Reshape((4, 6)), Slice((3, 5))]
    # A column-major layout is one transpose; tail padding pads the flat buffer.
    assert Shape.parse("f32[2,3]{0,1}").layout.to_physical_steps() == [Transpose((1, 0))]
    assert Shape.parse("f32[5]{0:L(8)}").layout.to_physical_steps() == [Pad((3,))]


@pytest.mark.parametrize("text,row_major", [
    ("f32[2,3]{1,0}", True), ("f32[2,3]{0,1}", False), ("f32[1,3]{0,1}", False),
    ("f32[4,8]{1,0:T(1,8)}", True), ("f32[4,8]{1,0:T(2,8)}", True), ("f32[4,8]{1,0:T(2,4)}", False),
    ("f32[3,5]{1,0:T(2,128)}", False), ("f32[8]{0:L(4)}", True), ("f32[7]{0:L(4)}", False),
])
def test_stores_row_major(text, row_major):
    s = Shape.parse(text)
    assert s.layout.stores_row_major(s.dims) == row_major


def test_to_logical_memory_follows_the_dimension_order():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    lay = Layout([0, 2, 1])                      # major to minor: 1, 2, 0
    phys = lay.to_physical(x)
    back = lay.to_logical(phys, x.shape)
    np.testing.assert_array_equal(back, x)
    assert np.shares_memory(back, phys)          # a permutation: a view of the buffer
    assert np.argsort(back.strides)[::-1].tolist() == [1, 2, 0]
    tiled = Layout([0, 1], [Tile((2, 2))])
    t = tiled.to_logical(tiled.to_physical(x[0]), (3, 4))
    assert t.strides == (4, 12)                  # untiled, then dimension 0 minor


def test_bitcast_steps_reinterpret_the_padded_buffer():
    # Every pair of random layouts with the same padded size: dst element e is the src
    # element stored at dst's linear_index(e), or padding.
    pairs = 0
    layouts = random_layouts(11, 120)
    for (sd, sl), (dd, dl) in itertools.product(layouts[:60], layouts[60:]):
        if sl.padded_size(sd) != dl.padded_size(dd):
            continue
        pairs += 1
        src, dst = Shape("s64", sd, layout=sl), Shape("s64", dd, layout=dl)
        x = np.arange(1, int(np.prod(sd)) + 1, dtype=np.int64).reshape(sd)
        got = run_steps(x, bitcast_steps(src, dst))
        assert list(got.shape) == dd
        buffer = np.zeros(sl.padded_size(sd), np.int64)
        buffer[sl.linear_indices(sd)] = x.reshape(-1)
        expected = buffer[dl.linear_indices(dd)].reshape(dd)
        real = expected != 0                     # values read from padding may be anything
        np.testing.assert_array_equal(got[real], expected[real], f"{src} -> {dst}")
    assert pairs > 20


def test_bitcast_steps_of_the_issue_example():
    # f32[3,5] in (2,128) tiles spans 512 slots: to f32[512] and back.
    tiled = Shape.parse("f32[3,5]{1,0:T(2,128)}")
    flat = Shape.parse("f32[512]{0}")
    x = np.arange(15, dtype=np.float32).reshape(3, 5) + 1
    buffer = run_steps(x, bitcast_steps(tiled, flat))
    assert buffer.shape == (512,) and np.count_nonzero(buffer) == 15
    np.testing.assert_array_equal(buffer[tiled.layout.linear_indices()], x.reshape(-1))
    np.testing.assert_array_equal(run_steps(buffer, bitcast_steps(flat, tiled)), x)
    with pytest.raises(KilnError, match="reads past the end"):
        bitcast_steps(Shape.parse("f32[15]{0}"), tiled)


# ----------------------------------------------------------------------------- entry layouts

import kiln  # noqa: E402

ENTRY_LAYOUTS_HLO = """HloModule entry_layouts, entry_computation_layout={(f32[2,3]{0,1}, f32[3,5]{1,0:T(2,2)}, f32[2,3,4]{0,2,1})->(f32[2,3]{0,1}, f32[3,5]{0,1:T(2,2)}, f32[3,5]{1,0}, f32[2,3,4]{1,0,2}, f32[24]{0})}

ENTRY main {
  p = f32[2,3]{0,1} parameter(0)
  q = f32[3,5]{1,0:T(2,2)} parameter(1)
  r = f32[2,3,4]{0,2,1} parameter(2)
  n = f32[2,3]{0,1} negate(p)
  m = f32[3,5]{0,1:T(2,2)} multiply(q, q)
  s = f32[2,3,4]{1,0,2} add(r, r)
  b = f32[24]{0} bitcast(q)
  ROOT t = (f32[2,3]{0,1}, f32[3,5]{0,1:T(2,2)}, f32[3,5]{1,0}, f32[2,3,4]{1,0,2}, f32[24]{0}) tuple(n, m, q, s, b)
}
"""


def entry_inputs():
    return (np.arange(6, dtype=np.float32).reshape(2, 3) + 1,
            np.arange(15, dtype=np.float32).reshape(3, 5) + 1,
            np.arange(24, dtype=np.float32).reshape(2, 3, 4) + 1)


def test_entry_layouts_take_and_give_logical_arrays():
    exe = kiln.compile(ENTRY_LAYOUTS_HLO)
    x, y, z = entry_inputs()
    n, m, q, s, b = exe(x, y, z)
    np.testing.assert_array_equal(n, -x)
    np.testing.assert_array_equal(m, y * y)
    np.testing.assert_array_equal(q, y)
    np.testing.assert_array_equal(s, z + z)
    # Results' memory follows their layouts' dimension order: {0,1} column-major; {1,0,2}
    # dimension 2 major, then 0, then 1; the tiled {0,1:T(2,2)} untiled in {0,1} order.
    assert n.flags.f_contiguous and not n.flags.c_contiguous
    assert np.argsort(s.strides)[::-1].tolist() == [2, 0, 1]
    assert m.flags.f_contiguous and q.flags.c_contiguous
    # The bitcast reads the parameter's tiled buffer: elements at their tiled linear index,
    # the tile padding (2x3 tiles of 2x2 hold 24 slots for 15 elements) anything.
    positions = Shape.parse("f32[3,5]{1,0:T(2,2)}").layout.linear_indices()
    np.testing.assert_array_equal(b[positions], y.reshape(-1))


def test_layout_stage_makes_entry_layouts_physical():
    exe = kiln.compile(ENTRY_LAYOUTS_HLO)
    assert exe.stage_names()[:5] == ["import", "verify", "partition", "layout", "optimize"]
    text = exe.ir("layout")
    signature = text[text.index("func.func @main"):text.index("{\n", text.index("func.func @main"))]
    # Physical arrays, all in the descending layout: 3x2 for {0,1}, tiles for T(2,2).
    assert 'tensor<3x2xf32> {kiln.layout = "{1,0}"}' in signature
    assert 'tensor<2x3x2x2xf32> {kiln.layout = "{3,2,1,0}"}' in signature
    assert 'tensor<4x2x3xf32> {kiln.layout = "{2,1,0}"}' in signature
    assert 'tensor<3x2x2x2xf32> {kiln.layout = "{3,2,1,0}"}' in signature
    assert "stablehlo.pad" in text and "stablehlo.slice" in text
    # The imported program keeps logical types with the layouts it asked for.
    assert 'tensor<3x5xf32> {kiln.layout = "{1,0:T(2,2)}"}' in exe.ir("import")


def test_entry_layouts_verify_against_the_reference_interpreter():
    exe = kiln.compile(ENTRY_LAYOUTS_HLO)
    report = exe.verify(*entry_inputs())
    assert report.ok, str(report)
    assert report.compared > 5


def test_tiled_bitcast_round_trip_through_padding():
    # The issue's example: f32[3,5]{1,0:T(2,128)} to the 512 slots of its padded buffer, a
    # computation there, and back.
    hlo = """HloModule tiled_round_trip
ENTRY main {
  x = f32[3,5]{1,0} parameter(0)
  t = f32[3,5]{1,0:T(2,128)} copy(x)
  flat = f32[512]{0} bitcast(t)
  two = f32[] constant(2)
  twos = f32[512]{0} broadcast(two), dimensions={}
  doubled = f32[512]{0} multiply(flat, twos)
  back = f32[3,5]{1,0:T(2,128)} bitcast(doubled)
  ROOT out = (f32[512]{0}, f32[3,5]{1,0}) tuple(flat, back)
}
"""
    x = np.arange(15, dtype=np.float32).reshape(3, 5) - 7
    flat, back = kiln.compile(hlo)(x)
    positions = Shape.parse("f32[3,5]{1,0:T(2,128)}").layout.linear_indices()
    np.testing.assert_array_equal(flat[positions], x.reshape(-1))
    np.testing.assert_array_equal(back, 2 * x)


def test_jax_layout_mode_is_honoured():
    source = """
func.func @main(%a: tensor<2x3xf32> {mhlo.layout_mode = "{0,1}"}, %b: tensor<3xf32> {mhlo.layout_mode = "default"})
    -> (tensor<3x2xf32> {mhlo.layout_mode = "{0,1}"}) {
  %0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = stablehlo.broadcast_in_dim %b, dims = [0] : (tensor<3xf32>) -> tensor<3x2xf32>
  %2 = stablehlo.add %0, %1 : tensor<3x2xf32>
  return %2 : tensor<3x2xf32>
}"""
    exe = kiln.compile(source)
    x, v = np.arange(6, dtype=np.float32).reshape(2, 3), np.array([10, 20, 30], np.float32)
    (y,) = exe(x, v)
    np.testing.assert_array_equal(y, x.T + v[:, None])
    assert y.flags.f_contiguous and not y.flags.c_contiguous
    assert "mhlo.layout_mode = \"{0,1}\"" not in exe.ir("layout")


def test_permutation_layouts_with_dynamic_shapes():
    source = """
func.func @main(%a: tensor<?x3xf32> {kiln.layout = "{0,1}"}) -> (tensor<?x3xf32> {kiln.layout = "{0,1}"}) {
  %0 = stablehlo.exponential %a : tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}"""
    exe = kiln.compile(source)
    for rows in (1, 4):
        x = np.linspace(-1, 1, rows * 3, dtype=np.float32).reshape(rows, 3)
        (y,) = exe(x)
        np.testing.assert_allclose(y, np.exp(x), rtol=1e-6)
        assert y.shape == (rows, 3) and (rows == 1 or not y.flags.c_contiguous)


def test_bad_entry_layouts_are_located_errors():
    source = """func.func @main(%a: tensor<2x3xf32> {kiln.layout = "{0,0}"}) -> tensor<2x3xf32> {
  return %a : tensor<2x3xf32>
}"""
    with pytest.raises(KilnError, match=r"argument 0 of @main: layout \{0,0\} does not order") as e:
        kiln.compile(source, filename="bad.mlir")
    assert e.value.location.startswith("bad.mlir:1:") and e.value.hint


def test_saved_executables_keep_entry_layouts(tmp_path):
    exe = kiln.compile(ENTRY_LAYOUTS_HLO)
    exe.save(tmp_path / "layouts.kx")
    loaded = kiln.load_executable(tmp_path / "layouts.kx")
    for got, want in zip(loaded(*entry_inputs()), exe(*entry_inputs())):
        np.testing.assert_array_equal(got, want)
        assert got.strides == want.strides
