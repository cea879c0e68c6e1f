"""The StableHLO reference interpreter as an oracle for programs that carry no checks."""
from __future__ import annotations

import numpy as np
from torch_mlir import ir
from torch_mlir._mlir_libs import _stablehlo
from torch_mlir.dialects import func

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


def _export_type(t: ir.RankedTensorType) -> ir.RankedTensorType | None:
    """The type a result is converted to (exactly) to cross the bindings, if numpy cannot take
    it as is: narrow floats (bf16, f8, f6, f4) as f32, sub-byte integers as 8-bit ones."""
    element = t.element_type
    if isinstance(element, ir.FloatType) and str(element) not in ("f16", "f32", "f64"):
        return ir.RankedTensorType.get(t.shape, ir.F32Type.get())
    if isinstance(element, ir.IntegerType) and 1 < element.width < 8:
        wide = ir.IntegerType.get_unsigned(8) if element.is_unsigned else ir.IntegerType.get_signless(8)
        return ir.RankedTensorType.get(t.shape, wide)
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
    results = [ir.RankedTensorType(t) for t in ftype.results]
    with ir.InsertionPoint(module.body), main.location:
        wrapper = func.FuncOp("main", (list(ftype.inputs), []))
        block = wrapper.add_entry_block()
        with ir.InsertionPoint(block):
            call = func.CallOp(results, "kiln_reference_main", list(block.arguments))
            outs, kinds = [], []
            for value, t in zip(call.results, results):
                if isinstance(t.element_type, ir.ComplexType):
                    part = ir.RankedTensorType.get(t.shape, ir.ComplexType(t.element_type).element_type)
                    outs += [_unary("stablehlo.real", value, part), _unary("stablehlo.imag", value, part)]
                    kinds.append(("complex", str(t.element_type)))
                elif (wide := _export_type(t)) is not None:
                    outs.append(_unary("stablehlo.convert", value, wide))
                    kinds.append(("widened", str(t.element_type)))
                else:
                    outs.append(value)
                    kinds.append(("plain", str(t.element_type)))
            func.ReturnOp(outs)
        wrapper.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(list(ftype.inputs), [v.type for v in outs]))
    return kinds


def _unary(name: str, operand: ir.Value, result: ir.Type) -> ir.Value:
    return ir.Operation.create(name, results=[result], operands=[operand]).result


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
