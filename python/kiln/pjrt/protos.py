"""Message classes from the .proto files Kiln declares (compile_options.proto), without protoc.

The protobuf runtime builds classes from a FileDescriptorProto; this module reads the small
subset of the proto3 language those files use into one: `syntax`, `package`, comments,
(nested) messages and singular or repeated fields of scalar or message type. Anything else in
the file is an error, so a later edit that needs more of the language says so.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from ..errors import KilnError

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {"double": _F.TYPE_DOUBLE, "float": _F.TYPE_FLOAT, "int64": _F.TYPE_INT64,
            "uint64": _F.TYPE_UINT64, "int32": _F.TYPE_INT32, "uint32": _F.TYPE_UINT32,
            "bool": _F.TYPE_BOOL, "string": _F.TYPE_STRING, "bytes": _F.TYPE_BYTES,
            "sint32": _F.TYPE_SINT32, "sint64": _F.TYPE_SINT64}
_TOKEN = re.compile(r"\s*(//[^\n]*|[A-Za-z_][\w.]*|\d+|\"[^\"]*\"|[{};=])")


def _tokens(text: str, path: str) -> list[str]:
    tokens, at = [], 0
    text = text.rstrip()
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            line = text.count("\n", 0, at) + 1
            raise KilnError(f"cannot read '{text[at:at + 20].strip()}'", location=f"{path}:{line}")
        if not match.group(1).startswith("//"):
            tokens.append(match.group(1))
        at = match.end()
    return tokens


def _parse(text: str, path: str) -> descriptor_pb2.FileDescriptorProto:
    tokens = _tokens(text, path)
    file = descriptor_pb2.FileDescriptorProto(name=Path(path).name, syntax="proto3")
    pos = 0

    def take(expected: str | None = None) -> str:
        nonlocal pos
        if pos >= len(tokens):
            raise KilnError("unexpected end of file", location=path)
        token = tokens[pos]
        if expected is not None and token != expected:
            raise KilnError(f"expected '{expected}', found '{token}'", location=path)
        pos += 1
        return token

    def message(into, scope: str) -> None:
        name = take()
        msg = into.add(name=name)
        full = f"{scope}.{name}"
        take("{")
        while tokens[pos] != "}":
            if tokens[pos] == "message":
                take()
                message(msg.nested_type, full)
                continue
            label = _F.LABEL_OPTIONAL
            if tokens[pos] == "repeated":
                take()
                label = _F.LABEL_REPEATED
            type_name, field_name = take(), take()
            take("=")
            number = int(take())
            take(";")
            field = msg.field.add(name=field_name, number=number, label=label)
            if type_name in _SCALARS:
                field.type = _SCALARS[type_name]
            else:  # a message of this file, named relative to the enclosing scopes
                field.type = _F.TYPE_MESSAGE
                field.type_name = type_name
        take("}")

    while pos < len(tokens):
        keyword = take()
        if keyword == "syntax":
            take("=")
            if take() != '"proto3"':
                raise KilnError("only proto3 files are read", location=path)
            take(";")
        elif keyword == "package":
            file.package = take()
            take(";")
        elif keyword == "message":
            message(file.message_type, "")
        else:
            raise KilnError(f"unsupported .proto construct '{keyword}'", location=path,
                            hint="this reader knows syntax, package and messages")
    _resolve(file)
    return file


def _resolve(file: descriptor_pb2.FileDescriptorProto) -> None:
    """Turns relative message type names into fully qualified ones (innermost scope first)."""
    known: set[str] = set()

    def collect(messages, scope):
        for m in messages:
            known.add(f"{scope}.{m.name}")
            collect(m.nested_type, f"{scope}.{m.name}")

    root = f".{file.package}" if file.package else ""
    collect(file.message_type, root)

    def fix(messages, scope):
        for m in messages:
            inner = f"{scope}.{m.name}"
            for field in m.field:
                if field.type != _F.TYPE_MESSAGE:
                    continue
                candidates = [f"{s}.{field.type_name}" for s in _scopes(inner)]
                found = next((c for c in candidates if c in known), None)
                if found is None:
                    raise KilnError(f"unknown message type '{field.type_name}' of field "
                                    f"'{field.name}'", location=file.name)
                field.type_name = found
            fix(m.nested_type, inner)

    fix(file.message_type, root)


def _scopes(scope: str) -> list[str]:
    parts = scope.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


@lru_cache(maxsize=None)
def messages(proto_file: str) -> dict[str, type]:
    """The message classes of `proto_file` (a file next to this module), by full name."""
    path = Path(__file__).with_name(proto_file)
    file = _parse(path.read_text(), str(path))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    classes = {}

    def add(descriptor):
        classes[descriptor.full_name] = message_factory.GetMessageClass(descriptor)
        for nested in descriptor.nested_types:
            add(nested)

    for name in file.message_type:
        add(pool.FindMessageTypeByName(f"{file.package}.{name.name}"))
    return classes
