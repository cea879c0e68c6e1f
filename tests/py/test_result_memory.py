"""Large results on reusable blocks (driver/result_memory.py): a block is reused only once no
array views it, results of successive calls never share memory while alive, and the free
list stays bounded."""
import gc

import numpy as np

import kiln
from kiln.driver import result_memory

BIG = (result_memory.MIN_BYTES // 4) * 2      # int32 elements: twice the threshold
SOURCE = f"""func.func @main(%a: tensor<{BIG}xi32>) -> tensor<{BIG}xi32> {{
  %three = stablehlo.constant dense<3> : tensor<{BIG}xi32>
  %0 = stablehlo.multiply %a, %three : tensor<{BIG}xi32>
  return %0 : tensor<{BIG}xi32>
}}"""


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_a_block_is_reused_only_after_every_view_is_gone():
    exe = kiln.compile(SOURCE)
    a = np.arange(BIG, dtype=np.int32)
    (first,) = exe(a)
    kept_slice = first[10:20]
    where = _address(first)
    del first
    gc.collect()
    (second,) = exe(a + 1)
    assert _address(second) != where          # the slice still views the first block
    np.testing.assert_array_equal(kept_slice, np.arange(10, 20, dtype=np.int32) * 3)
    np.testing.assert_array_equal(second, (a + 1) * 3)
    del kept_slice
    gc.collect()
    (third,) = exe(a + 2)
    assert _address(third) == where            # now free: reused, and fully rewritten
    np.testing.assert_array_equal(third, (a + 2) * 3)
    np.testing.assert_array_equal(second, (a + 1) * 3)


def test_results_are_writable_contiguous_and_own_their_lifetime():
    out = result_memory.empty((BIG // 8, 8), np.float32)
    assert out.flags.c_contiguous and out.flags.writeable and out.shape == (BIG // 8, 8)
    assert _address(out) % 64 == 0
    out[...] = 1.5
    assert float(out.sum()) == 1.5 * BIG
    small = result_memory.empty((4,), np.float64)
    assert small.base is None                  # small results stay numpy's own


def test_the_free_list_is_bounded():
    many = [result_memory.empty((result_memory.MIN_BYTES,), np.uint8)
            for _ in range(result_memory.KEPT_BYTES // result_memory.MIN_BYTES + 8)]
    del many
    gc.collect()
    assert result_memory.kept_bytes() <= result_memory.KEPT_BYTES
