"""Kiln's PJRT plugin through its C table, without JAX: clients and devices, host transfers
with byte strides and host layouts (transposed arrays both ways), errors with codes and
messages, events, external references, and stubs that report instead of crashing. The argument
structs are pypjrt's reference ctypes layouts, so this also exercises the ABI."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

abi = pytest.importorskip("pypjrt._abi.pjrt_0_114", reason="pypjrt (the test extra) is needed")

from kiln.pjrt.plugin import library_path  # noqa: E402

FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
VOID_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Plugin:
    def __init__(self):
        lib = ctypes.CDLL(str(library_path()))
        lib.GetPjrtApi.restype = ctypes.POINTER(abi.PJRT_Api)
        self.api = lib.GetPjrtApi().contents

    def args(self, name: str, **fields):
        args = getattr(abi, f"{name}_Args")()
        args.struct_size = getattr(abi, f"{name}_Args_STRUCT_SIZE")
        for key, value in fields.items():
            setattr(args, key, value)
        return args

    def call(self, name: str, args=None) -> int | None:
        """The entry's error (a pointer), or None."""
        function = FN(getattr(self.api, name))
        return function(ctypes.byref(args) if args is not None else None)

    def ok(self, name: str, **fields):
        args = self.args(name, **fields)
        error = self.call(name, args)
        assert error is None, self.message(error)
        return args

    def message(self, error: int) -> tuple[int, str]:
        code = self.args("PJRT_Error_GetCode", error=error)
        assert self.call("PJRT_Error_GetCode", code) is None
        text = self.args("PJRT_Error_Message", error=error)
        VOID_FN(self.api.PJRT_Error_Message)(ctypes.byref(text))
        message = ctypes.string_at(text.message, text.message_size).decode()
        VOID_FN(self.api.PJRT_Error_Destroy)(ctypes.byref(self.args("PJRT_Error_Destroy",
                                                                    error=error)))
        return code.code, message


_KEEP = []  # C strings the plugin reads during a call


def c_string(text: str) -> int:
    buffer = ctypes.create_string_buffer(text.encode())
    _KEEP.append(buffer)
    return ctypes.addressof(buffer)


def named_int(name: str, value: int):
    nv = abi.PJRT_NamedValue()
    nv.struct_size = abi.PJRT_NamedValue_STRUCT_SIZE
    nv.name, nv.name_size = c_string(name), len(name)
    nv.type = abi.PJRT_NamedValue_kInt64
    nv.int64_value, nv.value_size = value, 1
    return nv


@pytest.fixture(scope="module")
def plugin():
    return Plugin()


@pytest.fixture
def client(plugin):
    options = (abi.PJRT_NamedValue * 1)(named_int("num_devices", 3))
    created = plugin.ok("PJRT_Client_Create", create_options=ctypes.cast(options, ctypes.c_void_p),
                        num_options=1)
    yield created.client
    plugin.ok("PJRT_Client_Destroy", client=created.client)


def test_devices_and_memories(plugin, client):
    devices = plugin.ok("PJRT_Client_Devices", client=client)
    assert devices.num_devices == 3
    name = plugin.ok("PJRT_Client_PlatformName", client=client)
    assert ctypes.string_at(name.platform_name, name.platform_name_size) == b"kiln"
    device = ctypes.cast(devices.devices, ctypes.POINTER(ctypes.c_void_p))[2]
    description = plugin.ok("PJRT_Device_GetDescription", device=device).device_description
    assert plugin.ok("PJRT_DeviceDescription_Id", device_description=description).id == 2
    memory = plugin.ok("PJRT_Device_DefaultMemory", device=device).memory
    kind = plugin.ok("PJRT_Memory_Kind", memory=memory)
    assert ctypes.string_at(kind.kind, kind.kind_size) == b"device"
    attributes = plugin.ok("PJRT_Device_GetAttributes", device=device)
    assert attributes.num_attributes == 0 and attributes.attributes_deleter


def test_unknown_client_option_is_an_error(plugin):
    options = (abi.PJRT_NamedValue * 1)(named_int("num_devicez", 2))
    args = plugin.args("PJRT_Client_Create", create_options=ctypes.cast(options, ctypes.c_void_p),
                       num_options=1)
    code, message = plugin.message(plugin.call("PJRT_Client_Create", args))
    assert code == abi.PJRT_Error_Code_INVALID_ARGUMENT and "num_devicez" in message


def to_device(plugin, client, array: np.ndarray):
    dims = (ctypes.c_int64 * array.ndim)(*array.shape)
    strides = (ctypes.c_int64 * array.ndim)(*array.strides)
    made = plugin.ok("PJRT_Client_BufferFromHostBuffer", client=client,
                     data=array.ctypes.data, type=abi.PJRT_Buffer_Type_F32,
                     dims=ctypes.cast(dims, ctypes.c_void_p), num_dims=array.ndim,
                     byte_strides=ctypes.cast(strides, ctypes.c_void_p),
                     num_byte_strides=array.ndim)
    assert plugin.call("PJRT_Event_Await", plugin.args(
        "PJRT_Event_Await", event=made.done_with_host_buffer)) is None
    plugin.ok("PJRT_Event_Destroy", event=made.done_with_host_buffer)
    return made.buffer


def test_strided_host_data_in_and_a_host_layout_out(plugin, client):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = base[::2, ::-1].T  # transposed, reversed and strided
    buffer = to_device(plugin, client, view)
    dims = plugin.ok("PJRT_Buffer_Dimensions", buffer=buffer)
    assert list(ctypes.cast(dims.dims, ctypes.POINTER(ctypes.c_int64))[:dims.num_dims]) == [6, 2]
    # back as column-major: a Strides host layout
    out = np.zeros((2, 6), np.float32)  # the transposed storage of a 6x2 column-major array
    layout = abi.PJRT_Buffer_MemoryLayout()
    layout.struct_size = abi.PJRT_Buffer_MemoryLayout_STRUCT_SIZE
    layout.type = abi.PJRT_Buffer_MemoryLayout_Type_Strides
    strides = (ctypes.c_int64 * 2)(4, 4 * 6)
    layout._anon2.strides.struct_size = abi.PJRT_Buffer_MemoryLayout_Strides_STRUCT_SIZE
    layout._anon2.strides.byte_strides = ctypes.cast(strides, ctypes.c_void_p)
    layout._anon2.strides.num_byte_strides = 2
    size = plugin.ok("PJRT_Buffer_ToHostBuffer", src=buffer, host_layout=ctypes.addressof(layout))
    assert size.dst_size == out.nbytes
    done = plugin.ok("PJRT_Buffer_ToHostBuffer", src=buffer, host_layout=ctypes.addressof(layout),
                     dst=out.ctypes.data, dst_size=out.nbytes)
    plugin.ok("PJRT_Event_Destroy", event=done.event)
    np.testing.assert_array_equal(out.T, view)
    plugin.ok("PJRT_Buffer_Destroy", buffer=buffer)


def test_external_references_keep_memory_past_the_handle(plugin, client):
    data = np.arange(5, dtype=np.float32)
    buffer = to_device(plugin, client, data)
    plugin.ok("PJRT_Buffer_IncreaseExternalReferenceCount", buffer=buffer)
    pointer = plugin.ok("PJRT_Buffer_UnsafePointer", buffer=buffer).buffer_pointer
    plugin.ok("PJRT_Buffer_Destroy", buffer=buffer)
    view = np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)), (5,))
    np.testing.assert_array_equal(view, data)  # still alive: one external reference left
    plugin.ok("PJRT_Buffer_DecreaseExternalReferenceCount", buffer=buffer)


def test_wrong_destination_size_is_an_error(plugin, client):
    buffer = to_device(plugin, client, np.ones(4, np.float32))
    small = np.zeros(2, np.float32)
    args = plugin.args("PJRT_Buffer_ToHostBuffer", src=buffer, dst=small.ctypes.data,
                       dst_size=small.nbytes)
    code, message = plugin.message(plugin.call("PJRT_Buffer_ToHostBuffer", args))
    assert code == abi.PJRT_Error_Code_INVALID_ARGUMENT and "needs 16" in message
    plugin.ok("PJRT_Buffer_Destroy", buffer=buffer)


def test_events_set_later_run_callbacks_with_the_error(plugin):
    event = plugin.ok("PJRT_Event_Create").event
    assert not plugin.ok("PJRT_Event_IsReady", event=event).is_ready
    seen = []
    callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(
        lambda error, _: seen.append(plugin.message(error) if error else None))
    plugin.ok("PJRT_Event_OnReady", event=event, callback=ctypes.cast(callback, ctypes.c_void_p))
    assert seen == []
    plugin.ok("PJRT_Event_Set", event=event, error_code=abi.PJRT_Error_Code_ABORTED,
              error_message=c_string("it failed"), error_message_size=len("it failed"))
    assert seen == [(abi.PJRT_Error_Code_ABORTED, "it failed")]
    code, message = plugin.message(plugin.call("PJRT_Event_Await", plugin.args(
        "PJRT_Event_Await", event=event)))
    assert (code, message) == (abi.PJRT_Error_Code_ABORTED, "it failed")
    plugin.ok("PJRT_Event_Destroy", event=event)


def test_error_payloads_are_visited_without_error(plugin):
    error = FN(plugin.api.PJRT_Client_DmaMap)(None)
    args = plugin.args("PJRT_Error_ForEachPayload", error=error)
    assert plugin.call("PJRT_Error_ForEachPayload", args) is None
    plugin.message(error)


@pytest.mark.parametrize("entry", ["PJRT_Client_DmaMap", "PJRT_TopologyDescription_Serialize",
                                   "PJRT_Compile", "PJRT_Buffer_Bitcast"])
def test_stubs_report_unimplemented(plugin, entry):
    code, message = plugin.message(FN(getattr(plugin.api, entry))(None))
    assert code == abi.PJRT_Error_Code_UNIMPLEMENTED
    assert message == f"{entry} is not implemented by Kiln's PJRT plugin"


def test_short_argument_structs_are_refused(plugin):
    """An argument struct older than the fields an entry writes is an error, not a write
    past its end."""
    args = plugin.args("PJRT_Client_PlatformName")
    args.struct_size = 16
    code, message = plugin.message(plugin.call("PJRT_Client_PlatformName", args))
    assert code == abi.PJRT_Error_Code_INVALID_ARGUMENT and "struct_size 16" in message


def _to_host(plugin, buffer, shape, dtype=np.float32) -> np.ndarray:
    out = np.empty(shape, dtype)
    done = plugin.ok("PJRT_Buffer_ToHostBuffer", src=buffer, dst=out.ctypes.data,
                     dst_size=out.nbytes)
    plugin.ok("PJRT_Event_Destroy", event=done.event)
    return out


def _execute(plugin, executable, buffers, num_outputs):
    """One device's run: (error or None, output buffers)."""
    arguments = (ctypes.c_void_p * len(buffers))(*buffers)
    argument_lists = (ctypes.c_void_p * 1)(ctypes.addressof(arguments))
    outputs = (ctypes.c_void_p * num_outputs)()
    output_lists = (ctypes.c_void_p * 1)(ctypes.addressof(outputs))
    args = plugin.args("PJRT_LoadedExecutable_Execute", executable=executable,
                       argument_lists=ctypes.cast(argument_lists, ctypes.c_void_p),
                       num_devices=1, num_args=len(buffers),
                       output_lists=ctypes.cast(output_lists, ctypes.c_void_p))
    return plugin.call("PJRT_LoadedExecutable_Execute", args), list(outputs)


def _compile_add_one(plugin, client, n):
    """A plain program over n floats: (x + 1, sum(x))."""
    text = (f"func.func @main(%x: tensor<{n}xf32>) -> (tensor<{n}xf32>, tensor<f32>) {{\n"
            f"  %one = stablehlo.constant dense<1.0> : tensor<{n}xf32>\n"
            f"  %y = stablehlo.add %x, %one : tensor<{n}xf32>\n"
            f"  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
            f"  %s = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [0]"
            f" : (tensor<{n}xf32>, tensor<f32>) -> tensor<f32>\n"
            f"  return %y, %s : tensor<{n}xf32>, tensor<f32>\n}}\n").encode()
    code = ctypes.create_string_buffer(text, len(text))
    program = abi.PJRT_Program()
    program.struct_size = abi.PJRT_Program_STRUCT_SIZE
    program.code, program.code_size = ctypes.addressof(code), len(text)
    program.format, program.format_size = c_string("mlir"), 4
    executable = plugin.ok("PJRT_Client_Compile", client=client,
                           program=ctypes.addressof(program)).executable
    return executable


def test_execute_runs_from_c_and_checks_its_arguments(plugin, client):
    """A plain program runs through the C execute path (runtime/pjrt/kiln_pjrt_direct.c, no
    Python per call; under the sanitizer job this is where it is checked), its 4 MB result on
    a block kept for reuse from the first run; an argument of another shape takes the Python
    path, which says what is wrong."""
    from kiln.pjrt import bridge
    n = 1 << 20
    executable = _compile_add_one(plugin, client, n)
    x = np.arange(n, dtype=np.float32) % 7
    argument = to_device(plugin, client, x)
    before = bridge.counts["python_execute"]
    for _ in range(2):
        error, (y, s) = _execute(plugin, executable, [argument], 2)
        assert error is None, plugin.message(error)
        np.testing.assert_array_equal(_to_host(plugin, y, (n,)), x + 1)
        assert _to_host(plugin, s, ())[()] == x.sum(dtype=np.float64)
        for buffer in (y, s):
            plugin.ok("PJRT_Buffer_Destroy", buffer=buffer)
    assert bridge.counts["python_execute"] == before
    short = to_device(plugin, client, np.ones(8, np.float32))
    error, _ = _execute(plugin, executable, [short], 2)
    code, message = plugin.message(error)
    assert code == abi.PJRT_Error_Code_INVALID_ARGUMENT and "Kiln" in message, message
    assert bridge.counts["python_execute"] == before + 1
    for buffer in (argument, short):
        plugin.ok("PJRT_Buffer_Destroy", buffer=buffer)
    plugin.ok("PJRT_LoadedExecutable_Destroy", executable=executable)


def test_a_queued_run_keeps_its_buffers_until_it_ends_and_its_events_complete(plugin, client):
    """A run over 8 MB is queued on its device (Execute returns before it ends): its argument
    and outputs destroyed at once are kept until it ends (the sanitizer job checks no memory
    is touched after it is freed); the next run's outputs complete their ready events, and
    read back right."""
    n = 1 << 20
    executable = _compile_add_one(plugin, client, n)
    x = np.arange(n, dtype=np.float32) % 5
    for _ in range(3):
        argument = to_device(plugin, client, x)
        error, outputs = _execute(plugin, executable, [argument], 2)
        assert error is None, plugin.message(error)
        for buffer in [argument] + outputs:
            plugin.ok("PJRT_Buffer_Destroy", buffer=buffer)
    argument = to_device(plugin, client, x)
    error, (y, s) = _execute(plugin, executable, [argument], 2)
    assert error is None, plugin.message(error)
    ready = plugin.ok("PJRT_Buffer_ReadyEvent", buffer=y).event
    plugin.ok("PJRT_Event_Await", event=ready)
    assert plugin.ok("PJRT_Event_IsReady", event=ready).is_ready
    plugin.ok("PJRT_Event_Destroy", event=ready)
    np.testing.assert_array_equal(_to_host(plugin, y, (n,)), x + 1)
    assert _to_host(plugin, s, ())[()] == x.sum(dtype=np.float64)
    for buffer in (argument, y, s):
        plugin.ok("PJRT_Buffer_Destroy", buffer=buffer)
    plugin.ok("PJRT_LoadedExecutable_Destroy", executable=executable)
