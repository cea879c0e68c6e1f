"""The argument checks every entry of Kiln's PJRT plugin opens with (KILN_PJRT_ARGS and
KILN_PJRT_ARGS_ON in runtime/pjrt/kiln_pjrt_internal.h): a struct older than the fields an
entry needs, or a missing handle, is a located INVALID_ARGUMENT error naming the entry, never
a read past the struct or through NULL. Called through the C table with pypjrt's reference
layouts (test_pjrt_c_api.py's Plugin)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("pypjrt._abi.pjrt_0_114", reason="pypjrt (the test extra) is needed")
sys.path.insert(0, str(Path(__file__).parent))
from test_pjrt_c_api import Plugin  # noqa: E402

INVALID_ARGUMENT = 3

# (entry, the handle field it works on): one per family of entries.
ENTRIES_AND_HANDLES = [
    ("PJRT_Client_PlatformName", None), ("PJRT_Client_Devices", "client"),
    ("PJRT_Client_BufferFromHostBuffer", "client"), ("PJRT_Device_DefaultMemory", "device"),
    ("PJRT_DeviceDescription_Id", "device_description"), ("PJRT_Memory_Id", "memory"),
    ("PJRT_Buffer_Dimensions", "buffer"), ("PJRT_Buffer_ToHostBuffer", "src"),
    ("PJRT_Event_Await", "event"), ("PJRT_Executable_NumOutputs", "executable"),
    ("PJRT_LoadedExecutable_Execute", "executable"),
    ("PJRT_LoadedExecutable_GetExecutable", "loaded_executable"),
    ("PJRT_Executable_Serialize", "executable"),
    ("PJRT_Executable_DeserializeAndLoad", "client"),
    ("PJRT_TopologyDescription_GetDeviceDescriptions", "topology"),
]


@pytest.fixture(scope="module")
def plugin():
    return Plugin()


@pytest.mark.parametrize("entry", [e for e, _ in ENTRIES_AND_HANDLES])
def test_a_struct_too_small_is_an_error_naming_the_entry(plugin, entry):
    args = plugin.args(entry)
    args.struct_size = 16  # struct_size and extension_start only: an ancient caller
    code, message = plugin.message(plugin.call(entry, args))
    assert code == INVALID_ARGUMENT
    assert message.startswith(f"{entry}: argument struct too small (struct_size 16, need ")


@pytest.mark.parametrize("entry,handle", [(e, h) for e, h in ENTRIES_AND_HANDLES if h])
def test_a_missing_handle_is_an_error_naming_it(plugin, entry, handle):
    code, message = plugin.message(plugin.call(entry, plugin.args(entry)))  # all fields NULL
    assert (code, message) == (INVALID_ARGUMENT, f"{entry}: no {handle} given")


def test_no_arguments_at_all_is_an_error(plugin):
    code, message = plugin.message(plugin.call("PJRT_Buffer_Dimensions", None))
    assert code == INVALID_ARGUMENT and "struct_size 0" in message
