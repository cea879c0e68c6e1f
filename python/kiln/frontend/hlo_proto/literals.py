"""XLA's LiteralProto (constants, HloSnapshot arguments) as numpy arrays.

Values sit in one field per element type: repeated scalars for the 32/64-bit types and pred,
little-endian bytes for the others (one element per byte for 4-bit types). They are stored
in the literal shape's layout order, so a non-default layout is undone here.
"""
from __future__ import annotations

import numpy as np

from kiln.errors import KilnError
from kiln.layout import Layout, Shape, Tile

from . import hlo_subset_pb2 as pb

# element type -> (LiteralProto field, how it is stored)
_REPEATED = {"pred": "preds", "s32": "s32s", "s64": "s64s", "u32": "u32s", "u64": "u64s",
             "f32": "f32s", "f64": "f64s", "c64": "c64s", "c128": "c128s"}
_BYTES = {"s8": "s8s", "u8": "u8s", "s16": "s16s", "u16": "u16s", "f16": "f16s",
          "bf16": "bf16s", "s4": "s4s", "u4": "u4s", "f8e5m2": "f8e5m2s",
          "f8e4m3": "f8e4m3s", "f8e4m3fn": "f8e4m3fns", "f8e4m3b11fnuz": "f8e4m3b11fnuzs",
          "f8e3m4": "f8e3m4s", "f8e5m2fnuz": "f8e5m2fnuzs", "f8e4m3fnuz": "f8e4m3fnuzs",
          "f8e8m0fnu": "f8e8m0fnus", "f4e2m1fn": "f4e2m1fns"}


# XLA's PrimitiveType numbers -> HLO's type names ("f32", "pred", ...).
_TYPE_NAMES = {v: k.lower() for k, v in pb.PrimitiveType.items()}
_TYPE_NAMES[pb.OPAQUE_TYPE] = "opaque"


def shape_of(proto, where: str) -> Shape:
    """A ShapeProto as Kiln's Shape (layout included when the proto has one)."""
    name = _TYPE_NAMES.get(proto.element_type)
    if name is None or name in ("primitive_type_invalid", "buffer"):
        raise KilnError(f"unsupported element type {proto.element_type} in a shape",
                        location=where, hint="Kiln reads XLA's array, tuple and token shapes")
    if name == "tuple":
        return Shape.tuple([shape_of(t, where) for t in proto.tuple_shapes])
    dims = list(proto.dimensions)
    dynamic = list(proto.is_dynamic_dimension) or [False] * len(dims)
    if len(dynamic) != len(dims):
        raise KilnError("a shape's is_dynamic_dimension does not match its dimensions",
                        location=where)
    layout = None
    if proto.HasField("layout") and len(proto.layout.minor_to_major) == len(dims):
        lay = proto.layout
        layout = Layout(list(lay.minor_to_major),
                        tiles=[Tile(tuple(t.dimensions)) for t in lay.tiles],
                        element_size_in_bits=lay.element_size_in_bits,
                        memory_space=lay.memory_space,
                        tail_padding_alignment_in_elements=lay.tail_padding_alignment_in_elements or 1)
    if name in ("token", "opaque"):
        return Shape(name, [])
    return Shape(name, dims, dynamic, layout)


def literal_leaves(literal, shape: Shape, where: str) -> list[np.ndarray] | np.ndarray:
    """The literal of an instruction of `shape`: one array, or a tuple's leaves depth first."""
    if shape.is_tuple:
        elements = list(literal.tuple_literals)
        if len(elements) != len(shape.tuple_shapes):
            raise KilnError(f"tuple constant has {len(elements)} elements, its shape {shape} "
                            f"has {len(shape.tuple_shapes)}", location=where)
        leaves: list[np.ndarray] = []
        for element, element_shape in zip(elements, shape.tuple_shapes):
            got = literal_leaves(element, element_shape, where)
            leaves.extend(got if element_shape.is_tuple else [got])
        return leaves
    stored = shape_of(literal.shape, where) if literal.HasField("shape") else shape
    return array_of(literal, stored, where).reshape(shape.dims) \
        if stored.dims == shape.dims else _mismatch(stored, shape, where)


def _mismatch(stored: Shape, shape: Shape, where: str):
    raise KilnError(f"constant literal of shape {stored} in an instruction of shape {shape}",
                    location=where)


def array_of(literal, shape: Shape, where: str) -> np.ndarray:
    """An array literal's values, in the logical (row-major) order of `shape`."""
    et = shape.etype
    dtype = et.dtype
    if dtype is None:
        raise KilnError(f"constants of type {shape.element_type} are not supported",
                        location=where)
    count = shape.num_elements()
    name = shape.element_type
    if name in _REPEATED:
        values = getattr(literal, _REPEATED[name])
        if et.kind == "complex":
            flat = np.asarray(values, dtype=np.float32 if name == "c64" else np.float64)
            flat = flat[0::2] + 1j * flat[1::2] if flat.size else flat
        else:
            flat = np.asarray(values)
        flat = flat.astype(dtype)
    elif name in _BYTES:
        raw = getattr(literal, _BYTES[name])
        if et.bits == 4:  # one element per byte
            flat = np.frombuffer(raw, np.uint8 if et.kind != "int" else np.int8).astype(dtype)
        else:
            flat = np.frombuffer(raw, np.dtype(dtype).newbyteorder("<")).astype(dtype)
    else:
        raise KilnError(f"constants of type {name} are not supported in HLO protos",
                        location=where)
    if flat.size != count:
        raise KilnError(f"literal of shape {shape} holds {flat.size} values, needs {count}",
                        location=where)
    layout = shape.layout
    if layout is not None and shape.rank > 1 and not layout.is_default():
        if layout.tiles:
            raise KilnError(f"literal with a tiled layout {layout}", location=where,
                            hint="Kiln reads literals stored in plain (untiled) layouts")
        major_to_minor = layout.minor_to_major[::-1]
        physical = flat.reshape([shape.dims[d] for d in major_to_minor])
        return physical.transpose(np.argsort(major_to_minor))
    return flat.reshape(shape.dims)
