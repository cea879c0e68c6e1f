"""What a compile worker's child does with a whole source (driver/front.py says why): import
it, read what the Executable needs around the code, and compile a static signature."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..frontend.convention import CallingConvention
from ..runtime.memref import TensorSpec


@dataclass
class ImportRequest:
    """A whole source to import (and, if its signature is static, compile) in a worker."""
    source: bytes | str                # the source's content, as read_source read it
    filename: str
    entry: str | None
    target: str
    options: dict
    custom_calls: list = field(default_factory=list)  # the caller's REGISTRY.describe()
    module_id: int = 0                 # numbers the dump files (dumping.py)


@dataclass
class ExecutableInfo:
    """What an Executable needs around its code, read from the imported module."""
    entry: str
    filename: str
    arg_specs: list[TensorSpec]
    result_specs: list[TensorSpec]
    layouts: dict                      # EntryLayouts.to_json() (driver/executable.py)
    convention: CallingConvention
    device_counts: tuple[int, int]

    @property
    def is_static(self) -> bool:
        return all(s.is_static for s in self.arg_specs)

    def to_json(self) -> dict:
        return {"entry": self.entry, "filename": self.filename,
                "arguments": [[list(s.shape), s.element] for s in self.arg_specs],
                "results": [[list(s.shape), s.element] for s in self.result_specs],
                "layouts": self.layouts, "convention": dataclasses.asdict(self.convention),
                "device_counts": list(self.device_counts)}

    @staticmethod
    def from_json(data: dict) -> "ExecutableInfo":
        from .saved import convention_from_json
        return ExecutableInfo(data["entry"], data["filename"],
                              [TensorSpec(tuple(s), e) for s, e in data["arguments"]],
                              [TensorSpec(tuple(s), e) for s, e in data["results"]],
                              data["layouts"], convention_from_json(data["convention"]),
                              tuple(data["device_counts"]))


def import_and_compile(request: ImportRequest, context, tell) -> None:
    """In a worker's child: import the source, tell the caller ("imported", info, module
    bytecode), then compile a static signature and tell ("ok", artifact bytes or None)."""
    from ..distributed.groups import device_counts
    from ..frontend import import_program
    from ..lowering.ir_util import find_entry
    from ..lowering.trust import check_imported
    from ..lowering.tuples import flatten_entry_tuples
    from .compiler import CompileRequest, compile_artifact, signature, to_bytecode
    from .layouts import EntryLayouts
    tell(("progress", "import", None))
    imported = import_program(request.source, context, request.filename, disposable=True)
    module, filename = imported.module, imported.filename
    check_imported(module, filename)  # the trust boundary, before anything reads the program
    with module.context:
        flatten_entry_tuples(module, request.entry)
    bytecode = to_bytecode(module)
    entry, arg_specs, result_specs = signature(module, request.entry)
    layouts = EntryLayouts.read(find_entry(module, entry), filename)
    info = ExecutableInfo(entry, filename, arg_specs, result_specs, layouts.to_json(),
                          imported.convention, device_counts(module, filename))
    tell(("imported", info.to_json(), bytecode))
    if not info.is_static:
        tell(("ok", None))
        return
    compile_request = CompileRequest(bytecode, entry, filename, request.target,
                                     request.options, arg_specs, None, imported.convention,
                                     request.module_id, request.custom_calls)
    artifact = compile_artifact(compile_request,
                                lambda stage, step: tell(("progress", stage, step)),
                                context=context, module=module)
    tell(("ok", artifact.to_bytes()))
