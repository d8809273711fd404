"""The copy with streaming stores (csrc/host/stream_copy.h) that direct uses for outputs past
_C.stream_min_bytes: every byte lands, whatever the alignment of either end and the length,
and nothing outside the destination changes."""
import glob

import numpy as np
import pytest

from dpcore import _C


@pytest.mark.parametrize("length", [0, 1, 63, 64, 65, 200, 4096 + 37, (1 << 20) + 3])
def test_every_alignment_and_length(length):
    rng = np.random.default_rng(length)
    src = rng.integers(0, 256, length + 128, dtype=np.uint8)
    for dst_offset in range(0, 72, 7):  # a vector is at most 64 bytes
        for src_offset in (0, 1, 33):
            dst = np.zeros(length + 128, np.uint8)
            _C.stream_copy(dst[dst_offset:dst_offset + length],
                           src[src_offset:src_offset + length])
            np.testing.assert_array_equal(dst[dst_offset:dst_offset + length],
                                          src[src_offset:src_offset + length])
            assert not dst[:dst_offset].any() and not dst[dst_offset + length:].any()


def test_refuses_unequal_sizes_strides_and_read_only_destinations():
    src = np.ones(10, np.float32)
    with pytest.raises(ValueError):
        _C.stream_copy(np.zeros(9, np.float32), src)
    with pytest.raises(ValueError):
        _C.stream_copy(np.zeros(20, np.float32)[::2], src)
    read_only = np.zeros(10, np.float32)
    read_only.flags.writeable = False
    with pytest.raises(ValueError):
        _C.stream_copy(read_only, src)


def test_threshold_is_half_the_largest_cache_sysfs_lists():
    sizes = []
    for index in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size")):
        text = open(index).read().strip()  # "32768K"
        sizes.append(int(text.rstrip("KM")) << {"K": 10, "M": 20}.get(text[-1], 0))
    assert _C.stream_min_bytes() == (max(sizes) if sizes else 32 << 20) // 2
