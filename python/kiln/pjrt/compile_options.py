"""The compile options JAX sends with a program (a serialized CompileOptionsProto), read with
the message classes of Kiln's compile_options.proto: replicas, partitions and the device
assignment."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from ..errors import KilnError
from .protos import messages


def _classes():
    return messages("compile_options.proto")


@dataclass(frozen=True)
class CompileOptions:
    num_replicas: int
    num_partitions: int
    # devices[replica][partition]: the client's device ids
    devices: tuple[tuple[int, ...], ...]

    @property
    def device_ids(self) -> list[int]:
        """The devices, replica-major: the order of Execute's argument lists."""
        return [d for replica in self.devices for d in replica]

    def serialized_device_assignment(self) -> bytes:
        assignment = _classes()["kiln.pjrt.DeviceAssignmentProto"](
            replica_count=self.num_replicas, computation_count=self.num_partitions)
        for p in range(self.num_partitions):
            assignment.computation_devices.add(
                replica_device_ids=[self.devices[r][p] for r in range(self.num_replicas)])
        return assignment.SerializeToString()


# Compiler options (jax.jit(..., compiler_options=...): XLA's env_option_overrides). XLA's own
# are fields of its DebugOptions, all named xla_*: Kiln reads none of them yet, so it takes
# them and says once per name that they have no effect (code written for XLA keeps working).
# Any other name is refused, as XLA refuses names it does not know: a misspelt option that
# silently does nothing is worse than an error.
XLA_OPTION_PREFIX = "xla_"
# XLA's options that take a bool, checked as XLA checks them ("true"/"false" strings too).
BOOL_OPTIONS = frozenset({"xla_embed_ir_in_executable", "xla_cpu_enable_fast_math",
                          "xla_llvm_disable_expensive_passes", "xla_dump_hlo_as_text",
                          "xla_dump_hlo_as_proto", "xla_detailed_logging"})
_reported: set[str] = set()


def _check_option(name: str, value) -> None:
    if not name.startswith(XLA_OPTION_PREFIX):
        raise KilnError(f"No such compile option: '{name}'",
                        hint="XLA's compile options are named xla_* (fields of its "
                             "DebugOptions); Kiln takes them and ignores them")
    present = value.ListFields()   # [] for a zero value of any kind (proto3 scalars)
    if name in BOOL_OPTIONS and present:
        (field, given), = present
        if field.name == "string_field":
            if given.lower() not in ("true", "false", "1", "0"):
                raise KilnError(f"compile option '{name}': '{given}' is not a valid bool value.")
        elif field.name != "bool_field":
            raise KilnError(f"compile option '{name}' takes a bool, not {given!r}")
    if name not in _reported:
        _reported.add(name)
        warnings.warn(f"Kiln: XLA's compile option '{name}' has no effect on Kiln's compile",
                      stacklevel=2)


def parse_compile_options(data: bytes, num_devices: int) -> CompileOptions:
    proto = _classes()["kiln.pjrt.CompileOptionsProto"]()
    try:
        proto.ParseFromString(data)
    except DecodeError as exc:
        raise KilnError(f"unreadable compile options from the framework: {exc}") from None
    for entry in proto.env_option_overrides:
        _check_option(entry.key, entry.value)
    build = proto.executable_build_options
    replicas = max(1, build.num_replicas)
    partitions = max(1, build.num_partitions)
    if proto.parameter_is_tupled_arguments:
        raise KilnError("tupled arguments are not supported by Kiln's PJRT plugin")
    if build.HasField("device_assignment"):
        given = build.device_assignment
        if (given.replica_count != replicas or given.computation_count != partitions
                or len(given.computation_devices) != partitions):
            raise KilnError(f"the device assignment ({given.replica_count} x "
                            f"{given.computation_count}) does not match {replicas} replica(s) x "
                            f"{partitions} partition(s)")
        devices = tuple(tuple(int(given.computation_devices[p].replica_device_ids[r])
                              for p in range(partitions)) for r in range(replicas))
    else:
        if replicas * partitions > num_devices:
            raise KilnError(f"{replicas} replica(s) x {partitions} partition(s) need more "
                            f"devices than Kiln's {num_devices}",
                            hint="set KILN_DEVICES=N before JAX starts")
        devices = tuple(tuple(r * partitions + p for p in range(partitions))
                        for r in range(replicas))
    for replica in devices:
        for device in replica:
            if not 0 <= device < num_devices:
                raise KilnError(f"device {device} in the device assignment does not exist "
                                f"(Kiln has {num_devices})", hint="set KILN_DEVICES=N")
    return CompileOptions(replicas, partitions, devices)
