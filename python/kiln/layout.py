"""XLA shapes, layouts and tiles as first-class objects.

The text forms follow the HLO printer: `bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)S(1)}`,
`s32[<=4,2]`, `token[]`, `(f32[2], (s32[], pred[3]))`.  `str()` of a parsed object gives the
same text back (canonical spacing), so shapes can travel through the importer and exporter
unchanged.

`Layout.linear_index` implements linear_index_with_tile from the tiled-layout document:
dimensions are put in physical (major-to-minor) order, combined dimensions (`*` in a tile)
are merged into their next-minor neighbour, then every tile splits the minor suffix of the
current shape into (tile-count, tile) pairs and moves the tile extents to the minor end.
Later tiles apply to the minor suffix of the shape produced by the earlier ones.

The same arithmetic as array operations (the document's "tiling as pad-reshape-transpose"):
`Layout.to_physical_steps(dims)` turns a logical array into its *physical* one, the buffer's
elements as a row-major array (padding included), and `to_logical_steps` turns it back. The
steps are plain data (Transpose, Reshape, Pad, Slice) that numpy runs here (`run_steps`) and
the compiler renders as StableHLO (the HLO importer's bitcasts, lowering/layouts.py's layout
normalization). Padding holds no particular value; these steps write zeros there.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

import numpy as np

from kiln.errors import KilnError

try:  # ml_dtypes supplies the narrow float / int dtypes numpy lacks.
    import ml_dtypes as _mld
except ImportError:  # pragma: no cover - ml_dtypes ships with jax
    _mld = None


@dataclass(frozen=True)
class ElementType:
    hlo: str          # name in HLO text
    mlir: str         # MLIR element type
    bits: int         # storage width in bits
    kind: str         # "pred", "int", "uint", "float", "complex", "token", "tuple", "opaque"
    numpy: str | None  # numpy / ml_dtypes dtype name

    @property
    def dtype(self) -> np.dtype | None:
        if self.numpy is None:
            return None
        if hasattr(np, self.numpy):
            return np.dtype(getattr(np, self.numpy))
        if _mld is not None and hasattr(_mld, self.numpy):
            return np.dtype(getattr(_mld, self.numpy))
        return None


def _et(hlo, mlir, bits, kind, npname):
    return ElementType(hlo, mlir, bits, kind, npname)


ELEMENT_TYPES: dict[str, ElementType] = {e.hlo: e for e in [
    _et("pred", "i1", 8, "pred", "bool_"),
    _et("s1", "i1", 1, "int", None),
    _et("s2", "i2", 2, "int", "int2"),
    _et("s4", "i4", 4, "int", "int4"),
    _et("s8", "i8", 8, "int", "int8"),
    _et("s16", "i16", 16, "int", "int16"),
    _et("s32", "i32", 32, "int", "int32"),
    _et("s64", "i64", 64, "int", "int64"),
    _et("u1", "ui1", 1, "uint", "uint1"),
    _et("u2", "ui2", 2, "uint", "uint2"),
    _et("u4", "ui4", 4, "uint", "uint4"),
    _et("u8", "ui8", 8, "uint", "uint8"),
    _et("u16", "ui16", 16, "uint", "uint16"),
    _et("u32", "ui32", 32, "uint", "uint32"),
    _et("u64", "ui64", 64, "uint", "uint64"),
    _et("f16", "f16", 16, "float", "float16"),
    _et("bf16", "bf16", 16, "float", "bfloat16"),
    _et("f32", "f32", 32, "float", "float32"),
    _et("f64", "f64", 64, "float", "float64"),
    _et("c64", "complex<f32>", 64, "complex", "complex64"),
    _et("c128", "complex<f64>", 128, "complex", "complex128"),
    _et("f8e4m3fn", "f8E4M3FN", 8, "float", "float8_e4m3fn"),
    _et("f8e5m2", "f8E5M2", 8, "float", "float8_e5m2"),
    _et("f8e4m3b11fnuz", "f8E4M3B11FNUZ", 8, "float", "float8_e4m3b11fnuz"),
    _et("f8e4m3fnuz", "f8E4M3FNUZ", 8, "float", "float8_e4m3fnuz"),
    _et("f8e5m2fnuz", "f8E5M2FNUZ", 8, "float", "float8_e5m2fnuz"),
    _et("f8e4m3", "f8E4M3", 8, "float", "float8_e4m3"),
    _et("f8e3m4", "f8E3M4", 8, "float", "float8_e3m4"),
    _et("f8e8m0fnu", "f8E8M0FNU", 8, "float", "float8_e8m0fnu"),
    _et("f4e2m1fn", "f4E2M1FN", 4, "float", "float4_e2m1fn"),
    _et("f6e2m3fn", "f6E2M3FN", 6, "float", "float6_e2m3fn"),
    _et("f6e3m2fn", "f6E3M2FN", 6, "float", "float6_e3m2fn"),
    _et("token", "!stablehlo.token", 0, "token", None),
    _et("opaque", "!kiln.opaque", 0, "opaque", None),
]}

MLIR_TO_HLO: dict[str, str] = {}
for _e in ELEMENT_TYPES.values():
    MLIR_TO_HLO.setdefault(_e.mlir, _e.hlo)
MLIR_TO_HLO["i1"] = "pred"


def element_type(name: str) -> ElementType:
    try:
        return ELEMENT_TYPES[name]
    except KeyError:
        raise KilnError(f"unknown element type '{name}'",
                        hint="expected one of " + ", ".join(sorted(ELEMENT_TYPES))) from None


# ----------------------------------------------------------------------------- tiles / layout

COMBINED = -1  # a `*` in a tile: this dimension is merged into the next-minor one


@dataclass(frozen=True)
class Tile:
    dims: tuple[int, ...]

    def __str__(self) -> str:
        return "(" + ",".join("*" if d == COMBINED else str(d) for d in self.dims) + ")"


def _linear(index, bounds) -> int:
    """Row-major (major-to-minor) linear index; the tiled-layout document's linear_index."""
    lin = 0
    for e, d in zip(index, bounds):
        lin = lin * d + e
    return lin


def _apply_tile(index, bounds, tile):
    """One tiling step: returns the index and bounds of the tiled (tile-count, tile) shape."""
    t = list(tile.dims)
    if len(t) > len(bounds):
        raise KilnError(f"tile {tile} has more dimensions than the shape it tiles ({len(bounds)})")
    k = len(bounds) - len(t)
    prefix_e, prefix_d = list(index[:k]), list(bounds[:k])
    e, d = list(index[k:]), list(bounds[k:])
    # Merge combined dimensions into their next-minor neighbour, major first so that chains
    # of `*` accumulate (e.g. (*,*,2) folds three dims into one).
    i = 0
    while i < len(t):
        if t[i] == COMBINED:
            if i + 1 >= len(t):
                raise KilnError(f"tile {tile}: the most minor dimension cannot be combined ('*')")
            e[i + 1] = e[i] * d[i + 1] + e[i + 1]
            d[i + 1] = d[i] * d[i + 1]
            del t[i], e[i], d[i]
        else:
            i += 1
    for ti in t:
        if ti <= 0:
            raise KilnError(f"tile {tile}: tile sizes must be positive or '*'")
    counts_e = [ei // ti for ei, ti in zip(e, t)]
    counts_d = [-(-di // ti) for di, ti in zip(d, t)]
    inner_e = [ei % ti for ei, ti in zip(e, t)]
    return prefix_e + counts_e + inner_e, prefix_d + counts_d + list(t)


@dataclass
class Layout:
    minor_to_major: list[int]
    tiles: list[Tile] = field(default_factory=list)
    dim_level_types: list[str] = field(default_factory=list)   # D(...) for sparse layouts
    tail_padding_alignment_in_elements: int = 1                # L(n)
    index_primitive_type: str | None = None                    # #(s32)
    pointer_primitive_type: str | None = None                  # *(s32)
    element_size_in_bits: int = 0                              # E(n); 0 = natural size
    memory_space: int = 0                                      # S(n)
    split_configs: list[str] = field(default_factory=list)     # SC(...) kept verbatim
    physical_shape: str | None = None                          # P(shape) kept verbatim
    dynamic_shape_metadata_prefix_bytes: int = 0               # M(n)
    dims: list[int] | None = field(default=None, compare=False, repr=False)  # owning shape's

    def __str__(self) -> str:
        s = ",".join(str(d) for d in self.minor_to_major)
        extra = ""
        if self.dim_level_types:
            extra += "D(" + ",".join(self.dim_level_types) + ")"
        if self.tiles:
            extra += "T" + "".join(str(t) for t in self.tiles)
        if self.tail_padding_alignment_in_elements != 1:
            extra += f"L({self.tail_padding_alignment_in_elements})"
        if self.index_primitive_type:
            extra += f"#({self.index_primitive_type})"
        if self.pointer_primitive_type:
            extra += f"*({self.pointer_primitive_type})"
        if self.element_size_in_bits:
            extra += f"E({self.element_size_in_bits})"
        if self.memory_space:
            extra += f"S({self.memory_space})"
        for sc in self.split_configs:
            extra += f"SC({sc})"
        if self.physical_shape:
            extra += f"P({self.physical_shape})"
        if self.dynamic_shape_metadata_prefix_bytes:
            extra += f"M({self.dynamic_shape_metadata_prefix_bytes})"
        return "{" + s + (":" + extra if extra else "") + "}"

    @staticmethod
    def default(rank: int) -> "Layout":
        return Layout(list(range(rank - 1, -1, -1)))

    @staticmethod
    def parse(text: str) -> "Layout":
        p = _Parser(text)
        lay = p.layout()
        p.end()
        return lay

    def is_default(self) -> bool:
        return (self.minor_to_major == list(range(len(self.minor_to_major) - 1, -1, -1))
                and not self.tiles and self.memory_space == 0 and not self.element_size_in_bits)

    @property
    def major_to_minor(self) -> list[int]:
        return list(reversed(self.minor_to_major))

    def _bounds(self, dims):
        dims = list(self.dims if dims is None else dims)
        if len(dims) != len(self.minor_to_major):
            raise KilnError(f"layout {self} has {len(self.minor_to_major)} dimensions, "
                            f"shape has {len(dims)}")
        return dims

    def _tiled(self, index, dims):
        phys = self.major_to_minor
        e = [index[k] for k in phys]
        d = [dims[k] for k in phys]
        for t in self.tiles:
            e, d = _apply_tile(e, d, t)
        return e, d

    def linear_index(self, index, dims=None) -> int:
        """Position of the element `index` (logical, dimension-numbered) in the buffer."""
        dims = self._bounds(dims)
        if len(index) != len(dims):
            raise KilnError(f"index {tuple(index)} has rank {len(index)}, shape has {len(dims)}")
        for i, (e, d) in enumerate(zip(index, dims)):
            if not 0 <= e < d:
                raise KilnError(f"index {tuple(index)} out of bounds in dimension {i} (size {d})")
        e, d = self._tiled(index, dims)
        return _linear(e, d)

    def linear_indices(self, dims=None) -> np.ndarray:
        """Vectorized linear_index: the buffer position of every element, in logical
        row-major order (the same arithmetic on index arrays instead of scalars)."""
        dims = self._bounds(dims)
        grids = [g.reshape(-1) for g in np.indices(dims, dtype=np.int64)] if dims else []
        if not dims:
            return np.zeros(1, dtype=np.int64)
        e, d = self._tiled(grids, dims)
        return np.asarray(_linear(e, d), dtype=np.int64).reshape(-1)

    def padded_size(self, dims=None) -> int:
        """Number of element slots in the buffer, including tile and tail padding."""
        dims = self._bounds(dims)
        _, d = self._tiled([0] * len(dims), dims)
        n = prod(d)
        a = self.tail_padding_alignment_in_elements
        return -(-n // a) * a if a > 1 else n


    # -- the physical array: the buffer's elements as a row-major array --------------------
    def _physical_chain(self, dims) -> list[tuple["Step", tuple, tuple]]:
        """(step, shape before, shape after) from the logical array to the physical one: the
        dimensions in major-to-minor order, then per tile: merge `*` dimensions, pad the
        tiled ones to whole tiles, split each into (tile count, tile), move the tile extents
        to the minor end; last, tail padding on the flattened buffer."""
        chain: list[tuple[Step, tuple, tuple]] = []
        shape = tuple(self._bounds(dims))

        def add(step: Step, after) -> None:
            nonlocal shape
            after = tuple(after)
            if isinstance(step, Transpose):
                moved = [p for p in step.permutation if shape[p] != 1]
                if moved == sorted(moved):  # only size-1 dimensions move: no element does
                    step = Reshape(after)
            if after != shape or (isinstance(step, Transpose)
                                  and step.permutation != tuple(range(len(shape)))):
                chain.append((step, shape, after))
            shape = after

        order = tuple(self.major_to_minor)
        add(Transpose(order), [shape[k] for k in order])
        for tile in self.tiles:
            if len(tile.dims) > len(shape):
                raise KilnError(f"tile {tile} has more dimensions than the shape it tiles "
                                f"({len(shape)})")
            k = len(shape) - len(tile.dims)
            prefix = list(shape[:k])
            merged, sizes, run = [], [], 1
            for i, (d, t) in enumerate(zip(shape[k:], tile.dims)):
                run *= d
                if t == COMBINED:
                    if i == len(tile.dims) - 1:
                        raise KilnError(f"tile {tile}: the most minor dimension cannot be "
                                        "combined ('*')")
                    continue
                if t <= 0:
                    raise KilnError(f"tile {tile}: tile sizes must be positive or '*'")
                merged.append(run)
                sizes.append(t)
                run = 1
            add(Reshape(tuple(prefix + merged)), prefix + merged)
            padded = [-(-d // t) * t for d, t in zip(merged, sizes)]
            add(Pad(tuple([0] * k + [p - d for p, d in zip(padded, merged)])), prefix + padded)
            split = prefix + [x for p, t in zip(padded, sizes) for x in (p // t, t)]
            add(Reshape(tuple(split)), split)
            m = len(sizes)
            tiles_last = tuple(list(range(k)) + [k + 2 * i for i in range(m)]
                               + [k + 2 * i + 1 for i in range(m)])
            add(Transpose(tiles_last), [split[p] for p in tiles_last])
        align, n = self.tail_padding_alignment_in_elements, prod(shape)
        if align > 1 and n % align:
            add(Reshape((n,)), [n])
            add(Pad((-(-n // align) * align - n,)), [-(-n // align) * align])
        return chain

    def physical_dims(self, dims=None) -> list[int]:
        """Shape of the physical array (row-major, padding included) of a `dims` array."""
        chain = self._physical_chain(dims)
        return list(chain[-1][2]) if chain else list(self._bounds(dims))

    def to_physical_steps(self, dims=None) -> list["Step"]:
        """Steps from the logical array of shape `dims` to its physical array."""
        return simplify_steps(self._bounds(dims), [step for step, _, _ in self._physical_chain(dims)])

    def to_logical_steps(self, dims=None) -> list["Step"]:
        """Steps from the physical array back to the logical one (`to_physical_steps` undone)."""
        steps: list[Step] = []
        for step, before, _ in reversed(self._physical_chain(dims)):
            if isinstance(step, Transpose):
                steps.append(Transpose(tuple(int(i) for i in np.argsort(step.permutation))))
            elif isinstance(step, Reshape):
                steps.append(Reshape(before))
            else:
                steps.append(Slice(before))
        return simplify_steps(self.physical_dims(dims), steps)

    def stores_row_major(self, dims=None) -> bool:
        """Whether a `dims` array's buffer holds its elements in row-major order with no
        padding, so that the logical array is its own buffer (reshapes only). Without tiles
        the answer does not depend on the sizes (a dynamic shape's are unknown): only the
        descending order stores row-major, even where size-1 dimensions make another
        order hold the same bytes."""
        if not self.tiles and self.tail_padding_alignment_in_elements <= 1:
            return self.minor_to_major == list(range(len(self.minor_to_major) - 1, -1, -1))
        return all(isinstance(step, Reshape) for step in self.to_physical_steps(dims))

    def to_physical(self, array: np.ndarray) -> np.ndarray:
        """The buffer XLA would hold for `array` in this layout, as a C-contiguous physical
        array (`physical_dims`); padding is zero."""
        array = np.asarray(array)
        return _compact(run_steps(array, self.to_physical_steps(array.shape)))

    def to_logical(self, physical: np.ndarray, dims) -> np.ndarray:
        """The logical `dims` array held by the buffer `physical` (any shape with the
        buffer's element count). Its memory follows the layout's dimension order where
        numpy strides can say so: a permutation layout gives a view of `physical`."""
        steps = self.to_logical_steps(dims)
        buffer = np.asarray(physical).reshape(self.physical_dims(dims))
        last = steps[-1] if steps and isinstance(steps[-1], Transpose) else None
        inner = _compact(run_steps(buffer, steps[:-1] if last else steps))
        return inner if last is None else inner.transpose(last.permutation)


# ----------------------------------------------------------------------------- array steps

@dataclass(frozen=True)
class Transpose:
    permutation: tuple[int, ...]   # result dimension i is operand dimension permutation[i]


@dataclass(frozen=True)
class Reshape:
    shape: tuple[int, ...]         # same elements, row-major, in this shape


@dataclass(frozen=True)
class Pad:
    high: tuple[int, ...]          # slots added at the end of each dimension (any value)


@dataclass(frozen=True)
class Slice:
    limits: tuple[int, ...]        # keep [0, limit) of each dimension


Step = Transpose | Reshape | Pad | Slice


def _compact(array: np.ndarray) -> np.ndarray:
    """`array` in C order, copied only if it is not (np.ascontiguousarray makes 0-d 1-d)."""
    return array if array.flags.c_contiguous else array.copy(order="C")


def run_steps(array: np.ndarray, steps: list[Step]) -> np.ndarray:
    """Apply `steps` to a numpy array (padding is zero)."""
    for step in steps:
        if isinstance(step, Transpose):
            array = array.transpose(step.permutation)
        elif isinstance(step, Reshape):
            array = array.reshape(step.shape)
        elif isinstance(step, Pad):
            grown = np.zeros([d + h for d, h in zip(array.shape, step.high)], array.dtype)
            grown[tuple(slice(0, d) for d in array.shape)] = array
            array = grown
        else:
            array = array[tuple(slice(0, n) for n in step.limits)]
    return array


def step_shape(shape, step: Step) -> tuple[int, ...]:
    """The shape `step` makes of an array of shape `shape`."""
    if isinstance(step, Transpose):
        return tuple(shape[p] for p in step.permutation)
    if isinstance(step, Reshape):
        return tuple(step.shape)
    if isinstance(step, Pad):
        return tuple(d + h for d, h in zip(shape, step.high))
    return tuple(step.limits)


def simplify_steps(shape, steps: list[Step]) -> list[Step]:
    """The same steps without the ones that do nothing; consecutive reshapes (and
    consecutive transposes) become one."""
    out: list[Step] = []
    shapes = [tuple(shape)]
    for step in steps:
        after = step_shape(shapes[-1], step)
        if isinstance(step, Transpose) and out and isinstance(out[-1], Transpose):
            first = out.pop()
            shapes.pop()
            step = Transpose(tuple(first.permutation[p] for p in step.permutation))
        elif isinstance(step, Reshape) and out and isinstance(out[-1], Reshape):
            out.pop()
            shapes.pop()
        identity = (step.permutation == tuple(range(len(shapes[-1])))
                    if isinstance(step, Transpose) else after == shapes[-1])
        if not identity:
            out.append(step)
            shapes.append(after)
    return out


def bitcast_steps(src: "Shape", dst: "Shape") -> list[Step]:
    """Steps that reinterpret the buffer of `src` (in its layout) as `dst` (in its own):
    `src`'s physical array, flattened, reshaped to `dst`'s physical array, read back as
    `dst`. Tile padding read by `dst` holds no particular value (zero here). A smaller `dst`
    buffer reads a prefix; a larger one may only add padding past the end of `src`'s."""
    sl, dl = src.effective_layout(), dst.effective_layout()
    n_src, n_dst = sl.padded_size(src.dims), dl.padded_size(dst.dims)
    steps = sl.to_physical_steps(src.dims) + [Reshape((n_src,))]
    if n_dst < n_src:
        steps.append(Slice((n_dst,)))
    elif n_dst > n_src:
        if prod(dst.dims) and int(dl.linear_indices(dst.dims).max()) >= n_src:
            raise KilnError(f"bitcast {src} -> {dst} reads past the end of the operand's buffer "
                            f"({n_src} -> {n_dst} elements, tile padding included)",
                            hint="a bitcast reinterprets one buffer: the result's elements "
                                 "must lie inside the operand's")
        steps.append(Pad((n_dst - n_src,)))
    steps += [Reshape(tuple(dl.physical_dims(dst.dims)))] + dl.to_logical_steps(dst.dims)
    return simplify_steps(src.dims, steps)


# ----------------------------------------------------------------------------- shapes

@dataclass
class Shape:
    element_type: str                      # HLO name: "f32", "token", "tuple"
    dims: list[int] = field(default_factory=list)       # -1 for an unbounded dynamic dim
    dynamic: list[bool] = field(default_factory=list)   # True where the dim is `<=N` or `?`
    layout: Layout | None = None
    tuple_shapes: list["Shape"] | None = None

    def __post_init__(self):
        if not self.dynamic:
            self.dynamic = [d < 0 for d in self.dims]
        if self.layout is not None:
            self.layout.dims = self.dims

    # -- constructors
    @staticmethod
    def parse(text: str) -> "Shape":
        p = _Parser(text)
        s = p.shape()
        p.end()
        return s

    @staticmethod
    def tuple(shapes) -> "Shape":
        return Shape("tuple", tuple_shapes=list(shapes))

    # -- queries
    @property
    def is_tuple(self) -> bool:
        return self.tuple_shapes is not None

    @property
    def is_token(self) -> bool:
        return self.element_type == "token"

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def etype(self) -> ElementType:
        return element_type(self.element_type)

    @property
    def is_static(self) -> bool:
        return not any(self.dynamic)

    def num_elements(self) -> int:
        return prod(self.dims)

    def leaves(self) -> list["Shape"]:
        """Array/token shapes of a (nested) tuple in depth-first order."""
        if not self.is_tuple:
            return [self]
        return [leaf for s in self.tuple_shapes for leaf in s.leaves()]

    def effective_layout(self) -> Layout:
        return self.layout if self.layout is not None else Layout.default(self.rank)

    def with_layout(self, layout: Layout | None) -> "Shape":
        return Shape(self.element_type, list(self.dims), list(self.dynamic), layout)

    def dims_str(self) -> str:
        parts = []
        for d, dyn in zip(self.dims, self.dynamic):
            parts.append("?" if d < 0 else (f"<={d}" if dyn else str(d)))
        return "[" + ",".join(parts) + "]"

    def __str__(self) -> str:
        if self.is_tuple:
            return "(" + ", ".join(str(s) for s in self.tuple_shapes) + ")"
        return self.element_type + self.dims_str() + (str(self.layout) if self.layout else "")

    def str_without_layout(self) -> str:
        if self.is_tuple:
            return "(" + ", ".join(s.str_without_layout() for s in self.tuple_shapes) + ")"
        return self.element_type + self.dims_str()

    def mlir_type(self) -> str:
        """MLIR tensor type of an array shape (tuples have no single type)."""
        if self.is_tuple:
            raise KilnError(f"tuple shape {self} has no single MLIR type")
        et = self.etype
        if et.kind == "token":
            return "!stablehlo.token"
        dims = "".join(("?" if (d < 0 or dyn) else str(d)) + "x"
                       for d, dyn in zip(self.dims, self.dynamic))
        enc = ""
        if any(dyn and d >= 0 for d, dyn in zip(self.dims, self.dynamic)):
            b = ", ".join(str(d) if (dyn and d >= 0) else "?"
                          for d, dyn in zip(self.dims, self.dynamic))
            enc = f", #stablehlo.bounds<{b}>"
        return f"tensor<{dims}{et.mlir}{enc}>"


# ----------------------------------------------------------------------------- text parser

class _Parser:
    """Character-level parser for shapes and layouts.  The HLO parser reuses it by handing
    over its text and position (`parse_shape_at`)."""

    def __init__(self, text: str, pos: int = 0, where=None):
        self.text, self.pos = text, pos
        self.where = where or (lambda pos: f"column {pos + 1}")

    def error(self, msg, hint=None):
        raise KilnError(msg, location=self.where(self.pos), hint=hint)

    def peek(self, n=1) -> str:
        return self.text[self.pos:self.pos + n]

    def skip_ws(self):
        # Long tuples carry `/*index=5*/` comments in HLO dumps.
        while self.pos < len(self.text):
            if self.text[self.pos] in " \t\r\n":
                self.pos += 1
            elif self.text.startswith("/*", self.pos):
                end = self.text.find("*/", self.pos)
                if end < 0:
                    self.error("unterminated /* comment")
                self.pos = end + 2
            else:
                break

    def accept(self, s: str) -> bool:
        if self.text.startswith(s, self.pos):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, what: str):
        if not self.accept(s):
            got = self.text[self.pos:self.pos + 12].split("\n")[0] or "end of input"
            self.error(f"expected '{s}' {what}, got '{got}'")

    def end(self):
        self.skip_ws()
        if self.pos != len(self.text):
            self.error(f"unexpected trailing text '{self.text[self.pos:self.pos + 20]}'")

    def int_(self, what: str) -> int:
        start = self.pos
        if self.peek() == "-":
            self.pos += 1
        while self.pos < len(self.text) and self.text[self.pos].isdigit():
            self.pos += 1
        if self.pos == start or self.text[start:self.pos] == "-":
            self.pos = start
            self.error(f"expected an integer ({what})")
        return int(self.text[start:self.pos])

    def word(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] == "_"):
            self.pos += 1
        return self.text[start:self.pos]

    def shape(self) -> Shape:
        self.skip_ws()
        if self.accept("("):
            elems = []
            self.skip_ws()
            if not self.accept(")"):
                while True:
                    elems.append(self.shape())
                    self.skip_ws()
                    if self.accept(")"):
                        break
                    self.expect(",", "between tuple element shapes")
            return Shape.tuple(elems)
        start = self.pos
        name = self.word()
        if name not in ELEMENT_TYPES:
            self.pos = start
            self.error(f"expected a shape (element type such as f32, s32, pred, token), got '{name or self.peek()}'")
        dims, dyn = [], []
        if self.accept("["):
            self.skip_ws()  # XLA's parser takes `f32[4, <=8]` as well as `f32[4,<=8]`
            if not self.accept("]"):
                while True:
                    self.skip_ws()
                    if self.accept("?"):
                        dims.append(-1)
                        dyn.append(True)
                    elif self.accept("<="):
                        self.skip_ws()
                        dims.append(self.int_("dimension bound"))
                        dyn.append(True)
                    else:
                        dims.append(self.int_("dimension size"))
                        dyn.append(False)
                    end = self.pos
                    self.skip_ws()
                    if self.accept("]"):
                        break
                    if not self.text.startswith(",", self.pos):
                        self.pos = end  # report where the dimension ended
                    self.expect(",", "between dimension sizes")
        elif name not in ("token", "opaque"):
            self.error(f"expected '[' after element type '{name}'")
        layout = None
        if self.peek() == "{":
            lstart = self.pos
            layout = self.layout()
            if len(layout.minor_to_major) != len(dims):
                self.pos = lstart
                self.error(f"layout {layout} has {len(layout.minor_to_major)} dimensions but shape "
                           f"{name}[...] has {len(dims)}")
        return Shape(name, dims, dyn, layout)

    def _paren_text(self) -> str:
        self.expect("(", "after layout attribute letter")
        depth, start = 1, self.pos
        while self.pos < len(self.text) and depth:
            c = self.text[self.pos]
            depth += (c == "(") - (c == ")")
            self.pos += 1
        if depth:
            self.error("unterminated '(' in layout")
        return self.text[start:self.pos - 1]

    def layout(self) -> Layout:
        self.expect("{", "to open a layout")
        m2m = []
        self.skip_ws()
        while self.peek() not in (":", "}", ""):
            m2m.append(self.int_("minor_to_major entry"))
            self.skip_ws()
            if not self.accept(","):
                break
            self.skip_ws()
        lay = Layout(m2m)
        if self.accept(":"):
            while not self.accept("}"):
                if self.pos >= len(self.text):
                    self.error("unterminated layout, expected '}'")
                if self.accept("SC"):
                    lay.split_configs.append(self._paren_text())
                elif self.accept("T"):
                    while self.peek() == "(":
                        body = self._paren_text()
                        dims = []
                        for part in body.split(","):
                            part = part.strip()
                            if part == "*":
                                dims.append(COMBINED)
                            else:
                                try:
                                    dims.append(int(part))
                                except ValueError:
                                    self.error(f"bad tile size '{part}', expected an integer or '*'")
                        lay.tiles.append(Tile(tuple(dims)))
                elif self.accept("D"):
                    lay.dim_level_types = [p.strip() for p in self._paren_text().split(",")]
                elif self.accept("L"):
                    lay.tail_padding_alignment_in_elements = int(self._paren_text())
                elif self.accept("#"):
                    lay.index_primitive_type = self._paren_text()
                elif self.accept("*"):
                    lay.pointer_primitive_type = self._paren_text()
                elif self.accept("E"):
                    lay.element_size_in_bits = int(self._paren_text())
                elif self.accept("S"):
                    lay.memory_space = int(self._paren_text())
                elif self.accept("P"):
                    lay.physical_shape = self._paren_text()
                elif self.accept("M"):
                    lay.dynamic_shape_metadata_prefix_bytes = int(self._paren_text())
                else:
                    self.error(f"unknown layout attribute '{self.peek()}'",
                               hint="expected one of T(...) S(n) E(n) L(n) D(...) M(n) P(...) SC(...)")
        else:
            self.expect("}", "to close the layout")
        return lay


def parse_shape_at(text: str, pos: int, where=None) -> tuple[Shape, int]:
    """Parse a shape starting at `pos` in `text`; returns the shape and the end position."""
    p = _Parser(text, pos, where)
    s = p.shape()
    return s, p.pos
