"""The StableHLO reference interpreter as an oracle for programs that carry no checks."""
from __future__ import annotations

import numpy as np
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo

from .context import make_context
from .errors import KilnError
from .runtime.dtypes import numpy_dtype


def _to_attr(array: np.ndarray, mlir_type: str) -> ir.Attribute:
    t = ir.RankedTensorType(ir.Type.parse(mlir_type))
    array = np.ascontiguousarray(array)
    if array.dtype.kind == "V" or type(array.dtype).__module__.startswith("ml_dtypes"):
        # The bindings know numpy's own dtypes only; bf16/f8 travel as their bits, typed by `t`.
        array = array.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[array.dtype.itemsize])
    return ir.DenseElementsAttr.get(array, type=t)


def _export_type(t: ir.RankedTensorType) -> str | None:
    """The type a result is converted to (exactly) to cross the bindings, if numpy cannot take
    it as is: narrow floats (bf16, f8, f6, f4) as f32, sub-byte integers as 8-bit ones."""
    element = t.element_type
    if isinstance(element, ir.FloatType) and str(element) not in ("f16", "f32", "f64"):
        return str(t).replace(str(element), "f32")
    if isinstance(element, ir.IntegerType) and 1 < element.width < 8:
        return str(t).replace(str(element), "ui8" if element.is_unsigned else "i8")
    return None


def _wrap(module: ir.Module, entry: str) -> list[tuple[str, str]]:
    """Rename the entry and add a new @main returning every result in a form the bindings can
    export: complex results as (real, imag), narrow types widened exactly (see _export_type). Returns
    per original result how it was split. (The bindings abort the process on complex results.)"""
    from .lowering.ir_util import find_entry, function_type
    main = find_entry(module, entry)
    main.attributes["sym_name"] = ir.StringAttr.get("kiln_reference_main")
    main.attributes["sym_visibility"] = ir.StringAttr.get("private")
    ftype = function_type(main)
    params = ", ".join(f"%a{i}: {t}" for i, t in enumerate(ftype.inputs))
    args = ", ".join(f"%a{i}" for i in range(len(ftype.inputs)))
    results = [ir.RankedTensorType(t) for t in ftype.results]
    lines, outs, out_types, kinds = [], [], [], []
    call = f"%r:{len(results)} = " if len(results) > 1 else "%r = " if results else ""
    for i, t in enumerate(results):
        value = f"%r#{i}" if len(results) > 1 else "%r"
        if isinstance(t.element_type, ir.ComplexType):
            part = str(t).replace(str(t.element_type), str(ir.ComplexType(t.element_type).element_type))
            lines.append(f"%re{i} = stablehlo.real {value} : ({t}) -> {part}")
            lines.append(f"%im{i} = stablehlo.imag {value} : ({t}) -> {part}")
            outs += [f"%re{i}", f"%im{i}"]
            out_types += [part, part]
            kinds.append(("complex", str(t.element_type)))
        elif (wide := _export_type(t)) is not None:
            lines.append(f"%w{i} = stablehlo.convert {value} : ({t}) -> {wide}")
            outs.append(f"%w{i}")
            out_types.append(wide)
            kinds.append(("widened", str(t.element_type)))
        else:
            outs.append(value)
            out_types.append(str(t))
            kinds.append(("plain", str(t.element_type)))
    body = "\n  ".join(lines)
    text = (f"func.func @main({params}) -> ({', '.join(out_types)}) {{\n"
            f"  {call}func.call @kiln_reference_main({args}) : "
            f"({', '.join(map(str, ftype.inputs))}) -> ({', '.join(map(str, results))})\n"
            f"  {body}\n  return" + (f" {', '.join(outs)} : {', '.join(out_types)}" if outs else "") + "\n}")
    # The declaration lets the wrapper parse on its own; only the wrapper moves over.
    declaration = (f"func.func private @kiln_reference_main({', '.join(map(str, ftype.inputs))}) -> "
                   f"({', '.join(map(str, results))})\n")
    wrapper = ir.Module.parse(declaration + text)
    module.body.append(list(wrapper.body.operations)[1])
    return kinds


def _unwrap(values: list[np.ndarray], kinds: list[tuple[str, str]]) -> list[np.ndarray]:
    out, i = [], 0
    for kind, element in kinds:
        if kind == "complex":
            # complex64 from f32 parts, complex128 from f64 parts.
            complex_dtype = np.result_type(values[i].dtype, np.complex64)
            out.append(values[i].astype(complex_dtype) + 1j * values[i + 1].astype(complex_dtype))
            i += 2
        elif kind == "widened":
            out.append(values[i].astype(numpy_dtype(element)))
            i += 1
        else:
            out.append(values[i])
            i += 1
    return out


def _evaluate_here(module_text: str, args: list[np.ndarray], arg_types: list[str],
                   entry: str) -> list[np.ndarray]:
    ctx = make_context()
    with ctx:
        attrs = [_to_attr(a, t) for a, t in zip(args, arg_types)]
        module = ir.Module.parse(module_text)
        kinds = _wrap(module, entry)
        try:
            results = _stablehlo.eval_module(module, attrs)
        except Exception as exc:  # the interpreter reports failures as plain exceptions
            raise KilnError(f"reference interpreter failed: {str(exc).splitlines()[0][:300]}") from None
        return _unwrap([np.array(r) for r in results], kinds)


def _answer(call) -> tuple[str, object]:
    try:
        return "ok", _evaluate_here(*call)
    except KilnError as exc:
        return "error", exc.one_line()
    except Exception as exc:  # anything else is still an answer, not a hang
        return "error", f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"


def evaluate(module_text: str, args: list[np.ndarray], arg_types: list[str],
             entry: str = "main") -> list[np.ndarray]:
    """Run `module_text`'s function `entry` on `args` in the reference interpreter.

    The interpreter aborts the process on some inputs (dynamic result types, some
    triangular_solve forms), so it runs in a forked child (os.fork: the conformance runner's
    own children are daemons, which multiprocessing forbids to fork); a crash there is a
    KilnError."""
    import os
    import pickle
    import tempfile
    errors = tempfile.TemporaryFile()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer through the pipe, never return into the caller
        os.close(read_end)
        os.dup2(errors.fileno(), 2)  # what the interpreter says as it dies names the cause
        import faulthandler
        faulthandler.disable()  # an abort here is expected and reported by the parent
        try:
            data = pickle.dumps(_answer((module_text, args, arg_types, entry)))
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as inp:
        data = inp.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        errors.seek(0)
        said = [l for l in errors.read().decode(errors="replace").splitlines() if "ERROR" in l]
        errors.close()
        raise KilnError(f"the reference interpreter crashed ({_describe(status)}) on @{entry}"
                        + (f": {said[0].strip()[:200]}" if said else ""),
                        hint="the program needs another oracle (checks in the program)")
    errors.close()
    kind, payload = pickle.loads(data)
    if kind == "error":
        raise KilnError(payload)
    return payload


def _describe(status: int) -> str:
    import os
    import signal
    if os.WIFSIGNALED(status):
        return signal.Signals(os.WTERMSIG(status)).name
    return f"exit code {os.WEXITSTATUS(status)}"
