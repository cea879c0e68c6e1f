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
