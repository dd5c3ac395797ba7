"""Fuzzing CUDA_VISIBLE_DEVICES, the one environment variable the plugin parses: any value selects
the devices CUDA would (entries up to the first invalid one) or is a GpuUnavailable saying it
leaves no GPU, never another error. Runs against the fake NVML of tests/fake_nvml.py."""

from __future__ import annotations

import sys

import pytest
from fake_nvml import FakeNvml
from hypothesis import given
from hypothesis import strategies as st

from pytest_scalene.sampling.gpu_nvml import GpuUnavailable, open_nvml

DEVICES = 3
# Entries CUDA takes (ASCII digits below the count), ones it stops at (out of range, negative,
# Unicode digits such as '²' or '٣', anything else), with the spaces it ignores around them.
entry = (
    st.integers(0, 9).map(str)
    | st.sampled_from(["-1", "²", "٣", "1.0", "", "0x1", "+1"])
    # What an environment can hold: no NUL, no lone surrogates.
    | st.text(
        st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=4
    ).filter(lambda t: not t.strip().startswith(("GPU-", "MIG-")))
)
padded = st.tuples(st.sampled_from(["", " "]), entry, st.sampled_from(["", " "])).map("".join)


def cuda_selection(visible: str, count: int) -> list[int]:
    """What CUDA makes visible: each entry in turn until the first one that is not a device."""
    chosen = []
    for part in visible.split(","):
        part = part.strip()
        if not (part.isascii() and part.isdigit() and int(part) < count):
            break
        chosen.append(int(part))
    return chosen


@given(st.lists(padded, max_size=5).map(",".join))
def test_any_cuda_visible_devices_selects_as_cuda_or_says_no_gpu(visible: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "pynvml", FakeNvml(devices=DEVICES).module)
        mp.setenv("CUDA_VISIBLE_DEVICES", visible)
        expected = cuda_selection(visible, DEVICES)
        if not expected:
            with pytest.raises(GpuUnavailable, match="leaves no GPU"):
                open_nvml()
            return
        devices = open_nvml()
        try:
            assert [h.index for h in devices.handles] == expected
        finally:
            devices.close()


@pytest.mark.parametrize("visible", ["²", "1,²", "٣"])
def test_unicode_digits_are_not_device_numbers(monkeypatch, visible: str) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(devices=DEVICES).module)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    if visible.startswith("1"):
        devices = open_nvml()
        assert [h.index for h in devices.handles] == [1]
        devices.close()
    else:
        with pytest.raises(GpuUnavailable, match="leaves no GPU"):
            open_nvml()
