"""`kiln-canonicalize-convolutions`: every f32/f64 `stablehlo.convolution` with one or two
spatial dimensions becomes convolutions that upstream lowers to `linalg.conv_2d_nhwc_hwcf`
(or its depthwise op), which codegen/blas.py turns into BLAS calls. XLA:CPU's layout
assignment does the same: it moves operands into the one layout its Eigen kernel takes.

The rewrite, per convolution (semantics as in the StableHLO spec):

* layout: explicit transposes into NHWC input, HWIO kernel, NHWC result (and back), so any
  dimension numbers (NCHW/OIHW, JAX's backward forms such as [f, 0, 1, b]) reach the fast op;
  a 1-D convolution gets a unit height; `window_reversal` reverses the kernel;
* groups: `feature_group_count` / `batch_group_count` > 1 split into one convolution per group,
  joined along the output features (depthwise convolutions keep their group count: upstream
  has a fast op for them). Batch groups too small to pay for a call each are left alone;
* padding and `lhs_dilation` (transposed / backward-input convolutions): no zero-interleaved
  input is built. Along a spatial dimension with input dilation s, output positions are
  split into P residue classes (P = s / gcd(s, stride)); for one class only the kernel taps
  that land on real (non-inserted) input elements contribute, and they form an arithmetic
  progression, so each class is an ordinary convolution of the original input with a strided
  slice of the kernel (a "polyphase" split: no multiply by an inserted zero). The classes'
  results are interleaved back (stack, reshape, slice). The input is padded once for all
  classes (each reads a slice: a view). Negative padding becomes a slice;
* a kernel dilated along W with few output columns (the weight gradient of a strided
  convolution) splits the output columns by residue too, each class an undilated
  convolution of every d-th input column (regrouped by one transpose), so that BLAS can
  contract a whole kernel row at once.

Anything else (other element types, dynamic shapes, 3-D windows, empty shapes) is left as it
is, for upstream and the loop lowering, as before.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

from ..patterns import pattern_pass
from .hlo_builder import HloBuilder, element, replace_op, shape

# A batch group (grad-weight of a grouped convolution) is split into its own convolution only
# when each group still has this many output features: below, the per-group calls are tiny
# and the op stays as it was.
MIN_BATCH_GROUP_FEATURES = 8
# At most this many convolutions come out of one (groups x residue classes): beyond, the IR
# (and compile time) would grow with the group count for little gain, and the op stays as
# it was. Feature groups are split only when each has this many input channels (fewer make
# gemms too small for BLAS; upstream's grouped loops do as well).
MAX_PIECES = 64
# (Groups of 8 channels split: RegNet's 55 groups ran 2.5x slower than the grouped loop nest,
# and the model's 600 loop nests took LLVM minutes to compile.)
MIN_GROUP_CHANNELS = 16


@dataclass
class _Conv:
    """One convolution's parameters, spatial lists in the operands' spatial-dimension order."""
    in_batch: int
    in_feature: int
    in_spatial: list[int]
    k_in: int
    k_out: int
    k_spatial: list[int]
    out_batch: int
    out_feature: int
    out_spatial: list[int]
    strides: list[int]
    padding: list[tuple[int, int]]
    lhs_dilation: list[int]
    rhs_dilation: list[int]
    reversal: list[bool]
    groups: int
    batch_groups: int


def _ints(op: ir.Operation, name: str, n: int, default: int = 1) -> list[int]:
    if name not in op.attributes:
        return [default] * n
    return [int(v) for v in ir.DenseI64ArrayAttr(op.attributes[name])]


def _read(op: ir.Operation) -> _Conv:
    dn = _stablehlo.ConvDimensionNumbers(op.attributes["dimension_numbers"])
    n = len(dn.input_spatial_dimensions)
    if "padding" in op.attributes:
        flat = [int(v) for v in ir.DenseIntElementsAttr(op.attributes["padding"])]
        padding = [(flat[2 * i], flat[2 * i + 1]) for i in range(n)]
    else:
        padding = [(0, 0)] * n
    reversal = [bool(v) for v in ir.DenseBoolArrayAttr(op.attributes["window_reversal"])] \
        if "window_reversal" in op.attributes else [False] * n
    count = (lambda name: ir.IntegerAttr(op.attributes[name]).value
             if name in op.attributes else 1)
    return _Conv(dn.input_batch_dimension, dn.input_feature_dimension,
                 list(dn.input_spatial_dimensions), dn.kernel_input_feature_dimension,
                 dn.kernel_output_feature_dimension, list(dn.kernel_spatial_dimensions),
                 dn.output_batch_dimension, dn.output_feature_dimension,
                 list(dn.output_spatial_dimensions), _ints(op, "window_strides", n), padding,
                 _ints(op, "lhs_dilation", n), _ints(op, "rhs_dilation", n), reversal,
                 count("feature_group_count"), count("batch_group_count"))


def _is_depthwise(op: ir.Operation, c: _Conv) -> bool:
    """One input channel per group: upstream's depthwise op (fast already) takes it."""
    channels = ir.RankedTensorType(op.operands[0].type).shape[c.in_feature]
    return c.groups > 1 and c.groups == channels \
        and ir.RankedTensorType(op.operands[1].type).shape[c.k_in] == 1


def _is_canonical(op: ir.Operation, c: _Conv) -> bool:
    """Already what upstream lowers to the fast op: NHWC/HWIO/NHWC, 2-D, nothing to split."""
    return (len(c.in_spatial) == 2 and (c.groups == 1 or _is_depthwise(op, c)) and (c.in_batch, *c.in_spatial, c.in_feature) == (0, 1, 2, 3)
            and (*c.k_spatial, c.k_in, c.k_out) == (0, 1, 2, 3)
            and (c.out_batch, *c.out_spatial, c.out_feature) == (0, 1, 2, 3)
            and c.lhs_dilation == [1, 1] and not any(c.reversal) and c.batch_groups == 1
            and all(lo >= 0 and hi >= 0 for lo, hi in c.padding))


# ---------------------------------------------------------------------------------------------
# One spatial dimension, split into residue classes of the output position.

@dataclass
class _Phase:
    """The output positions o = P*q + r (q < count) of one residue class r: they read input
    elements base + q*stride + t*dilation (outside [0, size) read zero) with kernel taps
    first + t*step, t < taps. `taps == 0`: the class is all zeros."""
    count: int
    taps: int = 0
    first: int = 0
    step: int = 1
    stride: int = 1
    dilation: int = 1
    base: int = 0


def _phases(size: int, kernel: int, lhs_dilation: int, stride: int, rhs_dilation: int,
            pad_low: int, out: int) -> list[_Phase]:
    """The residue classes of one spatial dimension. Output o reads dilated position
    o*stride + k*rhs_dilation - pad_low, a real input element j/s when it is a multiple of s."""
    s = lhs_dilation
    period = s // math.gcd(s, stride)
    phases = []
    for r in range(period):
        count = max(0, -(-(out - r) // period))
        taps = [k for k in range(kernel) if (r * stride + k * rhs_dilation - pad_low) % s == 0]
        if not count or not taps:
            phases.append(_Phase(count))
            continue
        # (consecutive taps are s / gcd(s, rhs_dilation) apart: one tap has no spacing)
        step = taps[1] - taps[0] if len(taps) > 1 else 1
        dilation = step * rhs_dilation // s if len(taps) > 1 else 1
        first = taps[0]
        phases.append(_Phase(count, len(taps), first, step, period * stride // s, dilation,
                             (r * stride + first * rhs_dilation - pad_low) // s))
    return phases


# ---------------------------------------------------------------------------------------------
# Building

def _dense_i64(values) -> ir.Attribute:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


class _Builder:
    def __init__(self, op: ir.Operation):
        self.h = HloBuilder()
        self.precision = op.attributes["precision_config"] \
            if "precision_config" in op.attributes else None
        self.etype = element(op.results[0])

    def zeros(self, dims) -> ir.Value:
        return self.h.splat(0.0, list(dims), self.etype)

    def conv2d(self, x: ir.Value, w: ir.Value, strides, dilations, groups: int,
               padding=((0, 0), (0, 0))) -> ir.Value:
        """Canonical NHWC x HWIO -> NHWC convolution; padding is (low, high) >= 0 per
        spatial dimension (upstream pads once, for both)."""
        b, ih, iw, _ = shape(x)
        iw += sum(padding[1])
        kh, kw, _, f = shape(w)
        out_w = (iw - ((kw - 1) * dilations[1] + 1)) // strides[1] + 1
        if dilations[1] > 1 and strides[1] == 1 and out_w < b and groups == 1:
            if any(padding[1]):
                x = self.h.pad(x, self.zeros([]), [0, 0, padding[1][0], 0],
                               [0, 0, padding[1][1], 0])
            # A weight gradient of a strided convolution: a few output columns, the kernel
            # dilated along W. Output column o = d*q + v reads input columns v + d*(q + t):
            # an undilated convolution of every d-th input column, so that BLAS contracts a
            # whole kernel row (kw, c) at once (codegen/blas.py).
            # The columns are regrouped by a transpose (b, h, w/d, d, c) -> (b, h, d, w/d, c),
            # a copy, so that each class's (w, c) is one contiguous run (a strided slice would
            # stay a strided view); columns past the end (w padded to a multiple of d) only
            # reach outputs past out_w, cut off by the interleave.
            d, c = dilations[1], shape(x)[3]
            wide = -(-iw // d)
            if wide * d != iw:
                x = self.h.pad(x, self.zeros([]), [0] * 4, [0, 0, wide * d - iw, 0])
            x = self.h.reshape(x, [b, ih, wide, d, c])
            x = self.h.transpose(x, [0, 1, 3, 2, 4])
            parts = []
            for v in range(min(d, out_w)):
                xv = self.h.slice(x, [0, 0, v, 0, 0], [b, ih, v + 1, wide, c])
                xv = self.h.reshape(xv, [b, ih, wide, c])
                parts.append(self.conv2d(xv, w, strides, [dilations[0], 1], groups,
                                         (padding[0], (0, 0))))
            return self.interleave(parts, 2, out_w)
        out = [b] + [(i - ((k - 1) * d + 1)) // s + 1 for i, k, s, d in
                     zip((ih + sum(padding[0]), iw), (kh, kw), strides, dilations)] + [f]
        attributes = dict(
            dimension_numbers=_stablehlo.ConvDimensionNumbers.get(0, 3, [1, 2], 2, 3, [0, 1],
                                                                  0, 3, [1, 2]),
            window_strides=_dense_i64(strides),
            padding=ir.DenseIntElementsAttr.get(np.array(padding, np.int64).reshape(2, 2)),
            lhs_dilation=_dense_i64([1, 1]), rhs_dilation=_dense_i64(dilations),
            feature_group_count=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), groups),
            batch_group_count=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1))
        if self.precision is not None:
            attributes["precision_config"] = self.precision
        return self.h.op("stablehlo.convolution", [x, w], out, self.etype, **attributes)

    def window(self, x: ir.Value, phases: list[_Phase]):
        """(x cut to the elements base .. base + span each phase reads along H and W, the
        zero padding that completes them), or None if a span misses x entirely."""
        start, limit, padding = [0] * 4, list(shape(x)), []
        for axis, phase in zip((1, 2), phases):
            size = shape(x)[axis]
            span = (phase.count - 1) * phase.stride + (phase.taps - 1) * phase.dilation + 1
            lo, hi = max(phase.base, 0), min(phase.base + span, size)
            if hi <= lo:
                return None
            start[axis], limit[axis] = lo, hi
            padding.append((lo - phase.base, phase.base + span - hi))
        if (start, limit) != ([0] * 4, list(shape(x))):
            x = self.h.slice(x, start, limit)
        return x, padding

    def pad_once(self, x: ir.Value, phases: list[list[_Phase]]):
        """x padded once by as much as any residue class reads past its edges, and the
        classes rebased onto it: each then reads a slice of it (a view, not a padded copy
        per class)."""
        low, high = [0] * 4, [0] * 4
        for axis, classes in zip((1, 2), phases):
            for phase in classes:
                if phase.taps:
                    span = (phase.count - 1) * phase.stride + (phase.taps - 1) * phase.dilation + 1
                    low[axis] = max(low[axis], -phase.base)
                    high[axis] = max(high[axis], phase.base + span - shape(x)[axis])
        if not any(low) and not any(high):
            return x, phases
        x = self.h.pad(x, self.zeros([]), low, high)
        return x, [[dataclasses.replace(p, base=p.base + low[axis]) for p in classes]
                   for axis, classes in zip((1, 2), phases)]

    def taps(self, w: ir.Value, phases: list[_Phase]) -> ir.Value:
        """The kernel taps the phases use (a strided slice)."""
        start, limit, strides = [0] * 4, list(shape(w)), [1] * 4
        for axis, phase in enumerate(phases):
            start[axis] = phase.first
            limit[axis] = phase.first + (phase.taps - 1) * phase.step + 1
            strides[axis] = phase.step
        if (start, limit, strides) == ([0] * 4, list(shape(w)), [1] * 4):
            return w
        return self.h.slice(w, start, limit, strides)

    def interleave(self, parts: list[ir.Value], axis: int, out: int) -> ir.Value:
        """result[P*q + r] = parts[r][q] along `axis`, cut to `out` (parts padded to one
        length, stacked on a new axis after `axis`, merged)."""
        if len(parts) == 1:
            return parts[0]
        longest = max(shape(p)[axis] for p in parts)
        stacked = []
        for p in parts:
            dims = list(shape(p))
            if dims[axis] < longest:
                high = [0] * len(dims)
                high[axis] = longest - dims[axis]
                p = self.h.pad(p, self.zeros([]), [0] * len(dims), high)
                dims[axis] = longest
            stacked.append(self.h.reshape(p, dims[:axis + 1] + [1] + dims[axis + 1:]))
        joined = self.h.concatenate(stacked, axis + 1)
        dims = list(shape(joined))
        merged = dims[:axis] + [dims[axis] * dims[axis + 1]] + dims[axis + 2:]
        result = self.h.reshape(joined, merged)
        if merged[axis] != out:
            limit = list(merged)
            limit[axis] = out
            result = self.h.slice(result, [0] * len(merged), limit)
        return result

    def conv(self, x: ir.Value, w: ir.Value, c: _Conv, out_hw: list[int], groups: int):
        """NHWC x HWIO -> NHWC with c's spatial parameters (lhs dilation, any padding),
        as polyphase convolutions of x with kernel slices, interleaved."""
        b, f = shape(x)[0], shape(w)[3]
        phases = [_phases(shape(x)[1 + a], shape(w)[a], c.lhs_dilation[a], c.strides[a],
                          c.rhs_dilation[a], c.padding[a][0], out_hw[a]) for a in range(2)]
        if len(phases[0]) * len(phases[1]) > 1:
            x, phases = self.pad_once(x, phases)
        rows = []
        for ph in phases[0]:
            row = []
            for pw in phases[1]:
                cut = self.window(x, [ph, pw]) if ph.taps and pw.taps else None
                if cut is None:
                    row.append(self.zeros([b, max(ph.count, 1), max(pw.count, 1), f]))
                    continue
                row.append(self.conv2d(cut[0], self.taps(w, [ph, pw]), [ph.stride, pw.stride],
                                       [ph.dilation, pw.dilation], groups, cut[1]))
                assert list(shape(row[-1])) == [b, ph.count, pw.count, f], shape(row[-1])
            rows.append(self.interleave(row, 2, out_hw[1]))
        return self.interleave(rows, 1, out_hw[0])


def _split(h: HloBuilder, x: ir.Value, axis: int, n: int) -> list[ir.Value]:
    if n == 1:
        return [x]
    dims = list(shape(x))
    size = dims[axis] // n
    parts = []
    for g in range(n):
        start, limit = [0] * len(dims), list(dims)
        start[axis], limit[axis] = g * size, (g + 1) * size
        parts.append(h.slice(x, start, limit))
    return parts


def _supported(op: ir.Operation, c: _Conv) -> bool:
    types = [op.operands[0].type, op.operands[1].type, op.results[0].type]
    if not all(isinstance(t, ir.RankedTensorType) and ir.RankedTensorType(t).has_static_shape
               for t in types):
        return False
    kinds = {str(ir.RankedTensorType(t).element_type) for t in types}
    if len(kinds) != 1 or kinds.pop() not in ("f32", "f64"):
        return False
    if len(c.in_spatial) not in (1, 2):
        return False
    if any(0 in ir.RankedTensorType(t).shape for t in types):
        return False
    if c.batch_groups > 1:
        out_features = ir.RankedTensorType(types[2]).shape[c.out_feature]
        if c.groups > 1 or out_features // c.batch_groups < MIN_BATCH_GROUP_FEATURES:
            return False
    split = c.batch_groups
    if c.groups > 1 and not _is_depthwise(op, c):
        channels = ir.RankedTensorType(types[0]).shape[c.in_feature]
        if channels // c.groups < MIN_GROUP_CHANNELS:
            return False
        split = c.groups
    classes = 1
    for s, stride in zip(c.lhs_dilation, c.strides):
        classes *= s // math.gcd(s, stride)
    return split * classes <= MAX_PIECES


def _canonicalize(op: ir.Operation):
    c = _read(op)
    if not _supported(op, c) or _is_canonical(op, c):
        return False
    x, w = op.operands[0], op.operands[1]
    spatial = len(c.in_spatial)
    out_dims = list(ir.RankedTensorType(op.results[0].type).shape)
    with ir.InsertionPoint(op), op.location:
        b = _Builder(op)
        h = b.h
        x = h.transpose(x, [c.in_batch, *c.in_spatial, c.in_feature])
        w = h.transpose(w, [*c.k_spatial, c.k_in, c.k_out])
        if any(c.reversal):
            w = h.reverse(w, [a for a in range(spatial) if c.reversal[a]])
        out_hw = [out_dims[d] for d in c.out_spatial]
        if spatial == 1:   # a unit height: (B, W, C) -> (B, 1, W, C), kernel (1, K, I, O)
            x = h.reshape(x, [shape(x)[0], 1, *shape(x)[1:]])
            w = h.reshape(w, [1, *shape(w)])
            for name in ("strides", "lhs_dilation", "rhs_dilation"):
                setattr(c, name, [1, *getattr(c, name)])
            c.padding = [(0, 0), *c.padding]
            out_hw = [1, *out_hw]
        if _is_depthwise(op, c):
            results = [b.conv(x, w, c, out_hw, c.groups)]
        elif c.batch_groups > 1:
            results = [b.conv(xg, wg, c, out_hw, 1) for xg, wg in
                       zip(_split(h, x, 0, c.batch_groups), _split(h, w, 3, c.batch_groups))]
        else:
            results = [b.conv(xg, wg, c, out_hw, 1) for xg, wg in
                       zip(_split(h, x, 3, c.groups), _split(h, w, 3, c.groups))]
        y = results[0] if len(results) == 1 else h.concatenate(results, 3)
        if spatial == 1:
            y = h.reshape(y, [shape(y)[0], shape(y)[2], shape(y)[3]])
        # canonical (B, S..., F) -> the result's own layout
        order = [0] * len(out_dims)
        order[c.out_batch] = 0
        for j, d in enumerate(c.out_spatial):
            order[d] = 1 + j
        order[c.out_feature] = spatial + 1
        y = h.transpose(y, order)
    replace_op(op, [y])


canonicalize_convolutions = pattern_pass({"stablehlo.convolution": _canonicalize})
