"""The compile options JAX sends with a program (a serialized CompileOptionsProto), read with
the message classes of Kiln's compile_options.proto: replicas, partitions and the device
assignment."""
from __future__ import annotations

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


def parse_compile_options(data: bytes, num_devices: int) -> CompileOptions:
    proto = _classes()["kiln.pjrt.CompileOptionsProto"]()
    try:
        proto.ParseFromString(data)
    except DecodeError as exc:
        raise KilnError(f"unreadable compile options from the framework: {exc}") from None
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
