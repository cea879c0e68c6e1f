"""Every form of stablehlo.convolution (kiln-canonicalize-convolutions, then BLAS calls):
layouts, strides, asymmetric and negative padding, input (lhs) and kernel (rhs) dilation,
feature and batch groups, 1-D windows, f32 and f64, and JAX's gradients of each, against
jax.lax.conv_general_dilated run by XLA at HIGHEST precision."""
import jax
import numpy as np
import pytest

import kiln

# f64 cases need 64-bit jax; the fixture restores the default for other modules in the worker
pytestmark = pytest.mark.usefixtures("jax_x64")

HIGHEST = jax.lax.Precision.HIGHEST


def conv(x, w, strides=(1, 1), padding="SAME", dn=("NHWC", "HWIO", "NHWC"), groups=1,
         lhs_dilation=None, rhs_dilation=None, batch_groups=1):
    return jax.lax.conv_general_dilated(x, w, strides, padding, lhs_dilation=lhs_dilation,
                                        rhs_dilation=rhs_dilation, dimension_numbers=dn,
                                        feature_group_count=groups,
                                        batch_group_count=batch_groups, precision=HIGHEST)


def shapes(dn, n, c, hw, k, f, groups=1):
    """(x shape, w shape) in layout dn for batch n, c channels, spatial hw, kernel k, f outs."""
    lhs, rhs, _ = dn
    sizes_x = {"N": n, "C": c, **dict(zip("HW" if len(hw) == 2 else "W", hw))}
    sizes_w = {"O": f, "I": c // groups, **dict(zip("HW" if len(k) == 2 else "W", k))}
    return tuple(sizes_x[d] for d in lhs), tuple(sizes_w[d] for d in rhs)


def check(fn, *args, rtol=2e-4, atol=2e-4, via_blas=True):
    """Compile fn's StableHLO with Kiln, run it, compare with XLA's result."""
    lowered = jax.jit(fn).lower(*args)
    exe = kiln.compile(lowered.as_text())
    got = exe(*[np.asarray(a) for a in args])
    want = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, np.asarray(w), rtol=rtol, atol=atol)
    if via_blas:
        # every convolution (after the rewrite: canonical ones) became BLAS calls
        convs = exe.ir("bufferize").count("linalg.conv_2d_nhwc_hwcf")
        calls = exe.ir("codegen").count("call @kiln_gemm")
        assert convs and calls >= convs, (convs, calls)
    return exe


def data(rng, shape, dtype=np.float32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


# (name, layout, n, c, spatial, kernel, f, keyword arguments of conv)
FORMS = [
    ("nchw", ("NCHW", "OIHW", "NCHW"), 2, 32, (11, 9), (3, 3), 32, {}),
    ("nhwc_stride2", ("NHWC", "HWIO", "NHWC"), 2, 32, (13, 10), (3, 3), 32, dict(strides=(2, 2))),
    ("chwn", ("CHWN", "IOHW", "HWNC"), 3, 32, (9, 12), (3, 2), 16, dict(strides=(1, 2))),
    ("asym_pad", ("NHWC", "HWIO", "NHWC"), 2, 32, (10, 11), (3, 3), 32,
     dict(padding=[(0, 2), (3, 1)])),
    ("negative_pad", ("NCHW", "OIHW", "NCHW"), 2, 32, (12, 11), (3, 3), 32,
     dict(padding=[(-1, 2), (1, -2)])),
    ("lhs_dilation", ("NHWC", "HWIO", "NHWC"), 2, 32, (7, 9), (3, 3), 32,
     dict(lhs_dilation=(2, 2), padding=[(2, 1), (1, 2)])),
    ("lhs_dilation3_stride2", ("NCHW", "OIHW", "NCHW"), 2, 32, (6, 7), (4, 3), 32,
     dict(lhs_dilation=(3, 2), strides=(2, 1), padding=[(1, 3), (2, 0)])),
    ("lhs_and_rhs_dilation", ("NHWC", "HWIO", "NHWC"), 2, 32, (7, 8), (3, 3), 32,
     dict(lhs_dilation=(2, 2), rhs_dilation=(2, 3), padding=[(3, 3), (2, 4)])),
    ("rhs_dilation", ("NCHW", "OIHW", "NCHW"), 2, 32, (14, 13), (3, 3), 32,
     dict(rhs_dilation=(2, 2))),
    ("groups", ("NHWC", "HWIO", "NHWC"), 2, 128, (9, 10), (3, 3), 128, dict(groups=4)),
    ("groups_nchw", ("NCHW", "OIHW", "NCHW"), 2, 128, (9, 10), (3, 3), 64, dict(groups=2)),
    ("conv1d", ("NWC", "WIO", "NWC"), 3, 24, (31,), (5,), 32, dict(strides=(2,))),
    ("conv1d_ncw", ("NCW", "OIW", "NCW"), 3, 24, (30,), (3,), 32, dict(lhs_dilation=(2,), strides=(1,), padding=[(1, 2)])),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,dn,n,c,hw,k,f,kw", FORMS, ids=[f[0] for f in FORMS])
def test_forward(name, dn, n, c, hw, k, f, kw, dtype, rng):
    xs, ws = shapes(dn, n, c, hw, k, f, kw.get("groups", 1))
    kw = dict(kw)
    if len(hw) == 1 and "padding" not in kw:
        kw["padding"] = "SAME"
    x, w = data(rng, xs, dtype), data(rng, ws, dtype, 0.2)
    check(lambda x, w: conv(x, w, dn=dn, **kw), x, w)


GRADS = [
    ("nhwc_stride2", ("NHWC", "HWIO", "NHWC"), 2, 32, (13, 12), (3, 3), 32, dict(strides=(2, 2))),
    ("nchw_valid", ("NCHW", "OIHW", "NCHW"), 2, 32, (11, 10), (3, 3), 32, dict(padding="VALID")),
    ("stride3_odd", ("NHWC", "HWIO", "NHWC"), 2, 32, (11, 13), (4, 3), 32,
     dict(strides=(3, 2), padding=[(1, 2), (0, 1)])),
    ("rhs_dilation", ("NHWC", "HWIO", "NHWC"), 2, 32, (12, 12), (3, 3), 16,
     dict(rhs_dilation=(2, 2))),
    ("groups", ("NHWC", "HWIO", "NHWC"), 2, 128, (9, 10), (3, 3), 64, dict(groups=2)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,dn,n,c,hw,k,f,kw", GRADS, ids=[g[0] for g in GRADS])
def test_gradients(name, dn, n, c, hw, k, f, kw, dtype, rng):
    """d/dx is a convolution with lhs_dilation (and a flipped kernel), d/dw one whose window
    is the image (batch and features swapped; batch groups for grouped convolutions)."""
    xs, ws = shapes(dn, n, c, hw, k, f, kw.get("groups", 1))
    x, w = data(rng, xs, dtype), data(rng, ws, dtype, 0.2)

    def loss(x, w):
        return (conv(x, w, dn=dn, **kw) ** 2).sum()
    tol = 1e-3 if dtype == np.float32 else 1e-9
    check(jax.grad(loss, argnums=(0, 1)), x, w, rtol=tol, atol=tol)


def test_depthwise_stays_depthwise(rng):
    # upstream's depthwise op is fast already; only the layout changes
    x, w = data(rng, (2, 16, 9, 10)), data(rng, (16, 1, 3, 3))
    exe = check(lambda x, w: conv(x, w, dn=("NCHW", "OIHW", "NCHW"), groups=16), x, w,
                via_blas=False)
    assert "depthwise" in exe.ir("legalize")


def test_depthwise_input_gradient(rng):
    x, w = data(rng, (2, 11, 12, 8)), data(rng, (3, 3, 1, 8))
    check(jax.grad(lambda x: (conv(x, w, strides=(2, 2), groups=8) ** 2).sum()), x,
          via_blas=False)


def test_batch_groups(rng):
    # the weight gradient of a grouped convolution: batch_group_count = 2
    x, w = data(rng, (4, 9, 8, 32)), data(rng, (3, 3, 32, 64))
    check(lambda x, w: conv(x, w, batch_groups=2), x, w)


def test_one_by_one_kernel_with_stride2_lhs_dilation(rng):
    # some residue classes have no kernel tap at all: zeros there
    x, w = data(rng, (2, 5, 6, 32)), data(rng, (1, 1, 32, 32))
    check(lambda x, w: conv(x, w, lhs_dilation=(2, 2), padding=[(0, 1), (1, 0)]), x, w)


def test_window_larger_than_input_reads_only_padding(rng):
    # some residue classes read nothing but padding
    x, w = data(rng, (2, 3, 3, 16)), data(rng, (2, 2, 16, 16))
    check(lambda x, w: conv(x, w, lhs_dilation=(3, 3), padding=[(4, 4), (4, 4)]), x, w,
          via_blas=False)


def test_canonical_convolution_is_left_alone():
    from kiln.lowering.scripting import Pipeline  # noqa: F401 - the pass is registered
    text = jax.jit(lambda x, w: conv(x, w)).lower(
        np.zeros((2, 8, 8, 16), np.float32), np.zeros((3, 3, 16, 16), np.float32)).as_text()
    exe = kiln.compile(text)
    assert exe.ir("legalize").count("linalg.conv_2d_nhwc_hwcf") == 1


def test_many_small_groups_are_left_alone(rng):
    # 2 channels a group: too small to split into gemms; upstream's grouped loops run it
    x, w = data(rng, (2, 7, 6, 32)), data(rng, (3, 3, 2, 32))
    exe = check(lambda x, w: conv(x, w, groups=16, dn=("NHWC", "HWIO", "NHWC")), x, w,
                via_blas=False)
    assert exe.ir("legalize").count("linalg.conv_2d_nhwc_hwcf") == 0


def test_three_spatial_dimensions_are_left_alone(rng):
    x, w = data(rng, (2, 4, 5, 6, 3)), data(rng, (2, 2, 2, 3, 4))
    check(lambda x, w: jax.lax.conv_general_dilated(
        x, w, (1, 1, 1), "SAME", dimension_numbers=("NDHWC", "DHWIO", "NDHWC"),
        precision=HIGHEST), x, w, via_blas=False)
