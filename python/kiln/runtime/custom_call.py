"""Custom-call targets: the registry, the call sites compiled code dispatches through, and the
Python-callable ABI.

A target is registered under a name and a platform ("cpu", also spelled "Host"; or "CUDA").
It is either

* a C function (a ctypes function pointer, an address, a PyCapsule such as
  `jax.ffi.pycapsule(fn)` returns, or a function a shared library registered with
  XLA_REGISTER_CUSTOM_CALL_TARGET or XLA_FFI_REGISTER_HANDLER): called by the C dispatcher in
  libkiln_runtime with XLA's calling convention for the call's api_version (see
  kiln/custom_call.h; api_version 4 is XLA's typed FFI, kiln/ffi.h and runtime/ffi.py), or
* a dictionary of typed-FFI handlers by execution stage ({"instantiate": ..., "prepare": ...,
  "initialize": ..., "execute": ...}; only "execute" is required), or
* a Python callable `fn(results, operands, *, attributes, backend_config)`: `operands` and
  `results` are lists of numpy arrays viewing the call's buffers (tuples flattened depth first;
  operands read-only, results to fill in place); `attributes` is the `mhlo.backend_config`
  dictionary (or a dictionary `backend_config`) as Python values; `backend_config` is the
  string backend_config ("" when there is none). A token operand or result (`!stablehlo.token`)
  has no data: its place in the lists holds None. Raising fails the call: the exception
  propagates out of the Executable call with its traceback. Returning a non-None value is an
  error (results are written in place).

At compile time each `stablehlo.custom_call` becomes a *call site* (a KilnCallSite in C
holding the target, its ABI, its opaque string and its tuple structure); compiled code calls
`kiln_custom_call(site, leaves)`. A failure longjmps back to KilnInvoke (`invoke_entry`), which
reports it here as a CustomCallError, or re-raises the Python target's exception.
"""
from __future__ import annotations

import ctypes
import itertools
import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .. import environment
from ..errors import CustomCallError, KilnError
from . import ffi

# XLA's CustomCallApiVersion values.
API_ORIGINAL, API_STATUS_RETURNING, API_STATUS_RETURNING_UNIFIED, API_TYPED_FFI = 1, 2, 3, 4
_API_NAMES = {1: "API_VERSION_ORIGINAL", 2: "API_VERSION_STATUS_RETURNING",
              3: "API_VERSION_STATUS_RETURNING_UNIFIED", 4: "API_VERSION_TYPED_FFI"}

ENV_LIBRARIES = "KILN_CUSTOM_CALL_LIBRARIES"
_PLATFORMS = {"cpu": "cpu", "host": "cpu", "cuda": "CUDA", "gpu": "CUDA", "rocm": "ROCM"}


def normalize_platform(platform: str) -> str:
    try:
        return _PLATFORMS[platform.lower()]
    except (KeyError, AttributeError):
        raise KilnError(f"unknown custom-call platform {platform!r}",
                        hint="use 'cpu' (or 'Host') or 'CUDA'") from None


# ---- the native runtime ---------------------------------------------------------------------

_DISPATCHER_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p),
                                    ctypes.c_void_p)
_lib_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def runtime() -> ctypes.CDLL:
    """libkiln_runtime, loaded once with RTLD_GLOBAL: users' custom-call libraries resolve
    XlaCustomCallStatusSetFailure and the registration function against this same copy, and
    the JIT (which dlopens the same file) shares its state."""
    global _lib
    if _lib is not None:
        return _lib
    with _lib_lock:
        if _lib is None:
            from ..native import runtime_library
            lib = ctypes.CDLL(str(runtime_library()), mode=ctypes.RTLD_GLOBAL)
            lib.KilnCallSiteCreate.restype = ctypes.c_void_p
            lib.KilnCallSiteCreate.argtypes = [
                ctypes.c_int64, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_char_p,
                ctypes.c_size_t, ctypes.c_int32, ctypes.POINTER(ctypes.c_int32), ctypes.c_int32]
            lib.KilnStatusCreate.restype = ctypes.c_void_p
            lib.KilnStatusFailed.argtypes = [ctypes.c_void_p]
            lib.KilnStatusMessage.restype = ctypes.c_char_p
            lib.KilnStatusMessage.argtypes = [ctypes.c_void_p]
            lib.KilnStatusDestroy.argtypes = [ctypes.c_void_p]
            lib.XlaCustomCallStatusSetSuccess.argtypes = [ctypes.c_void_p]
            lib.XlaCustomCallStatusSetFailure.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                          ctypes.c_size_t]
            lib.KilnInvoke.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
            lib.KilnInvoke.restype = ctypes.c_int
            lib.KilnCustomCallRegistrations.restype = ctypes.POINTER(_Registration)
            ffi.declare(lib)
            lib.KilnSetPythonDispatcher.argtypes = [_DISPATCHER_TYPE]
            lib.KilnSetPythonDispatcher(_python_dispatcher)
            lib.KilnSetRunTimeLimit.argtypes = [ctypes.c_double]
            lib.KilnSetRunTimeLimit(run_time_limit())
            _lib = lib
        return _lib


class _Registration(ctypes.Structure):
    pass


_Registration._fields_ = [("name", ctypes.c_char_p), ("function", ctypes.c_void_p),
                          ("platform", ctypes.c_char_p), ("next", ctypes.POINTER(_Registration))]


# ---- the registry ---------------------------------------------------------------------------

@dataclass
class CustomCallTarget:
    name: str
    platform: str
    address: int | None = None                # a C function
    function: Callable | None = None          # a Python callable
    api_version: int | None = None            # None: the call site's api_version decides
    origin: str = "python"
    keep_alive: Any = None
    placeholder: bool = False                 # stands for a caller's target in a compile worker
    ffi_stages: dict[str, int] | None = None  # typed-FFI handlers by stage ("execute": address)
    # False for XLA_REGISTER_CUSTOM_CALL_TARGET functions: they declare api_version 1-3
    # signatures, so a typed-FFI call of one is refused at compile time.
    ffi_capable: bool = True

    @property
    def is_python(self) -> bool:
        return self.function is not None


class CustomCallRegistry:
    """Targets by (platform, name). Kiln's compiler resolves `stablehlo.custom_call @name`
    against the default registry (`REGISTRY`) when it lowers the call."""

    def __init__(self):
        self._targets: dict[tuple[str, str], CustomCallTarget] = {}
        self._lock = threading.Lock()
        self._seen_registrations: set[int] = set()
        self._env_loaded = False

    def register(self, name: str, target, platform: str = "cpu", api_version: int | None = None,
                 origin: str = "python") -> CustomCallTarget:
        if not isinstance(name, str) or not name:
            raise KilnError("a custom-call target needs a non-empty string name")
        platform = normalize_platform(platform)
        if api_version is not None and api_version not in _API_NAMES:
            raise KilnError(f"unknown api_version {api_version!r} for custom call {name!r}",
                            hint="XLA's versions: " + ", ".join(f"{k} ({v})" for k, v in _API_NAMES.items()))
        entry = CustomCallTarget(name, platform, api_version=api_version, origin=origin)
        address = ffi.address_of(target, name)
        if isinstance(target, dict):  # typed-FFI handlers by execution stage
            if api_version not in (None, API_TYPED_FFI):
                raise KilnError(f"custom-call target {name!r} is a dictionary of typed-FFI "
                                f"handlers, which need api_version 4, not {api_version}")
            entry.ffi_stages = ffi.handler_addresses(target, name)
            entry.address, entry.api_version = entry.ffi_stages["execute"], API_TYPED_FFI
            entry.keep_alive = target
        elif address is not None:
            entry.address = address
            entry.keep_alive = target  # a ctypes function or capsule owns what it points at
        elif callable(target):
            entry.function = target
        else:
            raise KilnError(f"custom-call target {name!r} must be a ctypes function pointer, an "
                            f"address, a PyCapsule, a dictionary of typed-FFI handlers by stage "
                            f"or a Python callable, got {type(target).__name__}")
        if entry.address is not None and not entry.address:
            raise KilnError(f"custom-call target {name!r} is a null function pointer")
        with self._lock:
            self._targets[(platform, name)] = entry
        return entry

    def load_environment(self) -> None:
        """Load the libraries named in $KILN_CUSTOM_CALL_LIBRARIES (os.pathsep-separated) once,
        so command-line tools (kiln, kiln-opt) can compile programs calling their targets."""
        if self._env_loaded:
            return
        self._env_loaded = True
        for path in filter(None, environment.get(ENV_LIBRARIES).split(os.pathsep)):
            self.load_library(path)

    def lookup(self, name: str, platform: str = "cpu") -> CustomCallTarget | None:
        self.load_environment()
        with self._lock:
            return self._targets.get((normalize_platform(platform), name))

    def names(self, platform: str | None = None) -> list[str]:
        self.load_environment()
        with self._lock:
            keys = list(self._targets)
        wanted = normalize_platform(platform) if platform else None
        return sorted(n for p, n in keys if wanted is None or p == wanted)

    def platforms_of(self, name: str) -> list[str]:
        with self._lock:
            return sorted(p for p, n in self._targets if n == name)

    def unregister(self, name: str, platform: str = "cpu") -> None:
        with self._lock:
            self._targets.pop((normalize_platform(platform), name), None)

    def load_library(self, path, symbols=None, api_version: int | None = None) -> list[str]:
        """dlopen a shared library; its XLA_REGISTER_CUSTOM_CALL_TARGET constructors and
        XLA_FFI_REGISTER_HANDLER registrations append to libkiln_runtime's lists, whose new
        entries are registered here. `symbols` ({target name: symbol name}, or names that are
        both) registers the library's functions by symbol, with `api_version` (for handlers
        defined by XLA_FFI_DEFINE_HANDLER_SYMBOL: 4). Returns the names registered."""
        lib_runtime = runtime()
        path = Path(path)
        if not path.is_file():
            raise KilnError(f"custom-call library {str(path)!r} does not exist")
        try:
            handle = ctypes.CDLL(str(path.resolve()), mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:
            raise KilnError(f"cannot load custom-call library {str(path)!r}: {exc}",
                            hint="build it with `gcc -shared -fPIC -I$(kiln --include-dir) ...`") from None
        added = []
        for reg in self._fresh_registrations(lib_runtime.KilnCustomCallRegistrations()):
            name = reg.name.decode()
            refuse_internal_name(name, str(path))
            entry = self.register(name, int(reg.function), reg.platform.decode(), origin=str(path))
            entry.keep_alive, entry.ffi_capable = handle, False
            added.append(name)
        for reg in self._fresh_registrations(lib_runtime.KilnFfiRegistrations()):
            stages = {s: getattr(reg, s) for s in ffi.STAGES if getattr(reg, s)}
            refuse_internal_name(reg.name.decode(), str(path))
            entry = self.register(reg.name.decode(), stages, reg.platform.decode(),
                                  origin=str(path))
            entry.keep_alive = handle
            added.append(entry.name)
        if isinstance(symbols, dict):
            by_symbol = dict(symbols)
        else:
            by_symbol = {name: name for name in (symbols or ())}
        for name in by_symbol:
            refuse_internal_name(name, str(path))
        for name, symbol in by_symbol.items():
            try:
                function = getattr(handle, symbol)
            except AttributeError:
                raise KilnError(f"custom-call library {str(path)!r} has no symbol {symbol!r}",
                                hint="export it with extern \"C\" (XLA_FFI_DEFINE_HANDLER_SYMBOL "
                                     "does) and check the name with `nm -D`") from None
            self.register(name, ctypes.cast(function, ctypes.c_void_p).value,
                          api_version=api_version, origin=str(path))
            self._targets[("cpu", name)].keep_alive = handle
            added.append(name)
        return added

    def _fresh_registrations(self, node) -> list:
        """The entries of one of the runtime's registration lists (XLA_REGISTER_CUSTOM_CALL_
        TARGET's or the FFI API's; newest first) not seen before, oldest first."""
        fresh = []
        with self._lock:
            while node:
                address = ctypes.addressof(node.contents)
                if address not in self._seen_registrations:
                    self._seen_registrations.add(address)
                    fresh.append(node.contents)
                node = node.contents.next
        return list(reversed(fresh))

    def describe(self) -> list[tuple[str, str, int | None, bool]]:
        """(name, platform, api_version, is_python) of every target: what a compile worker
        needs to check calls against this process's registrations (`install_placeholders`)."""
        self.load_environment()
        with self._lock:
            return [(t.name, t.platform, t.api_version, t.is_python, t.ffi_capable)
                    for t in self._targets.values()]

    def install_placeholders(self, described) -> None:
        """In a compile worker: stand-ins for the caller's targets, enough to check calls
        (names, platforms, api_versions, Python or C); sites are made by the caller."""
        self._env_loaded = True  # the caller's environment libraries are in `described`
        with self._lock:
            self._targets = {
                (platform, name): CustomCallTarget(
                    name, platform, api_version=api_version, placeholder=True,
                    function=_placeholder if is_python else None,
                    address=None if is_python else 1, ffi_capable=ffi_capable)
                for name, platform, api_version, is_python, ffi_capable in described}


def _placeholder(*args, **kwargs):  # pragma: no cover - never called: sites are not made
    raise AssertionError("a placeholder custom-call target was called")


REGISTRY = CustomCallRegistry()


def register_custom_call(name: str, target, platform: str = "cpu", api_version: int | None = None):
    """Register `target` as custom-call target `name` on `platform`.

    `target` is a C function -- a ctypes function pointer, an integer address or a PyCapsule
    (`jax.ffi.pycapsule(fn)`) -- following XLA's C calling convention for the call's
    api_version (1, 2 or 3 on the CPU; 4, XLA's typed FFI, for handlers built against jaxlib's
    `xla/ffi/api/ffi.h`); a dictionary of typed-FFI handlers by execution stage
    ({"instantiate", "prepare", "initialize", "execute"}; api_version 4); or a Python callable
    `fn(results, operands, *, attributes, backend_config)` (any api_version; with 4,
    `attributes` carries the `mhlo.backend_config` dictionary). With `api_version` given,
    calls with another api_version are rejected at compile time. Registering a name again
    replaces it for programs compiled afterwards."""
    refuse_internal_name(name)
    REGISTRY.register(name, target, platform, api_version)


# dialects/kiln.py's PREFIX, spelled here so that the runtime needs no MLIR bindings.
INTERNAL_PREFIX = "kiln."


def refuse_internal_name(name, origin: str = "") -> None:
    """Kiln's own runtime targets live under `kiln.` (collectives, FFTs): its lowerings call
    them with configurations the runtime trusts, so a user's target may not take (or replace)
    one of those names."""
    if isinstance(name, str) and name.startswith(INTERNAL_PREFIX):
        where = f" (from {origin})" if origin else ""
        raise KilnError(f"custom-call target name {name!r}{where} is reserved: "
                        f"'{INTERNAL_PREFIX}*' names Kiln's internal runtime targets",
                        hint="register your target under another name, and call that name "
                             "from the program")


def register_custom_call_library(path, symbols=None, api_version: int | None = None) -> list[str]:
    """Load a shared library and register the targets its XLA_REGISTER_CUSTOM_CALL_TARGET and
    XLA_FFI_REGISTER_HANDLER macros declare, plus `symbols` ({target name: symbol}, or a list
    of names that are both) with `api_version` (4 for XLA_FFI_DEFINE_HANDLER_SYMBOL handlers);
    returns their names."""
    return REGISTRY.load_library(path, symbols, api_version)


# ---- call sites -----------------------------------------------------------------------------

@dataclass
class Leaf:
    """One buffer the target sees: its physical (memory-order) shape, its dtype, and the
    permutation giving the logical view (`physical.transpose(view_perm)`)."""
    shape: tuple[int, ...]
    dtype: np.dtype
    view_perm: tuple[int, ...] | None = None
    element: str | None = None  # the MLIR element type (typed-FFI targets see its XLA dtype)

    @property
    def is_token(self) -> bool:
        """A `!stablehlo.token` leaf: rank 0, no data (its pointer is null)."""
        return self.element == ffi.TOKEN

    @property
    def nbytes(self) -> int:
        if self.is_token:
            return 0
        return math.prod(self.shape) * self.dtype.itemsize  # math.prod: no numpy call per leaf

    @property
    def logical_shape(self) -> tuple[int, ...]:
        if self.view_perm is None:
            return tuple(self.shape)
        return tuple(self.shape[p] for p in self.view_perm)


@dataclass
class CallSite:
    id: int
    target: CustomCallTarget
    api_version: int
    backend_config: str
    attributes: dict
    operands: list[Leaf]
    results: list[Leaf]
    address: int = 0
    aliases: dict[int, int] = field(default_factory=dict)  # result leaf -> operand leaf


@dataclass
class SiteSpec:
    """A call site as the compiler records it: everything but process addresses, so object
    code that refers to it can be saved, cached or made in another process. The loader makes
    the C site (`make_site`) in the calling process, resolving the target by name there, and
    stores its address where the compiled code reads it (a global per site)."""
    target: str
    platform: str
    api_version: int
    backend_config: str
    attributes: dict
    operands: list[Leaf]
    results: list[Leaf]
    num_operands: int
    tree: list[int]
    aliases: dict[int, int] = field(default_factory=dict)  # result leaf -> operand leaf
    # A C typed-FFI target's attributes with their exact types (None for other calls).
    ffi_attributes: list[ffi.FfiAttr] | None = None

    def to_json(self) -> dict:
        from .serialization import encode

        def leaf(x: Leaf) -> dict:
            out = {"shape": list(x.shape), "dtype": x.dtype.str if x.dtype.kind != "V"
                   else x.dtype.name, "view_perm": x.view_perm and list(x.view_perm)}
            if x.element is not None:
                out["element"] = x.element
            return out
        out = {"target": self.target, "platform": self.platform, "api_version": self.api_version,
               "backend_config": self.backend_config, "attributes": encode(self.attributes),
               "operands": [leaf(x) for x in self.operands],
               "results": [leaf(x) for x in self.results], "num_operands": self.num_operands,
               "tree": self.tree, "aliases": [[r, o] for r, o in self.aliases.items()]}
        if self.ffi_attributes is not None:
            out["ffi_attributes"] = [a.to_json() for a in self.ffi_attributes]
        return out

    @classmethod
    def from_json(cls, data: dict) -> SiteSpec:
        from .serialization import decode
        from .dtypes import numpy_dtype_named
        leaf = lambda x: Leaf(tuple(x["shape"]), numpy_dtype_named(x["dtype"]),  # noqa: E731
                              tuple(x["view_perm"]) if x["view_perm"] else None,
                              x.get("element"))
        typed = data.get("ffi_attributes")
        return cls(data["target"], data["platform"], data["api_version"], data["backend_config"],
                   decode(data["attributes"]), [leaf(x) for x in data["operands"]],
                   [leaf(x) for x in data["results"]], data["num_operands"], data["tree"],
                   {r: o for r, o in data["aliases"]},
                   None if typed is None else [ffi.FfiAttr.from_json(a) for a in typed])


_site_ids = itertools.count(1)
# Call sites live as long as the process: compiled code refers to them by address.
_SITES: dict[int, CallSite] = {}


def make_site_for(spec: SiteSpec) -> CallSite:
    """The C call site for `spec`, its target resolved in this process's registry now."""
    target = REGISTRY.lookup(spec.target, spec.platform)
    if target is None:
        raise KilnError(f"custom-call target '{spec.target}' is not registered in this process",
                        hint="register it (kiln.register_custom_call or "
                             "kiln.register_custom_call_library) before loading the program")
    if target.api_version is not None and target.api_version != spec.api_version:
        raise KilnError(f"custom-call target '{spec.target}' was registered for api_version "
                        f"{target.api_version}, but the program calls it with {spec.api_version}")
    site = make_site(target, spec.api_version, spec.backend_config, spec.attributes,
                     spec.operands, spec.results, spec.num_operands, spec.tree,
                     spec.ffi_attributes)
    site.aliases = dict(spec.aliases)
    return site


def make_site(target: CustomCallTarget, api_version: int, backend_config: str, attributes: dict,
              operands: list[Leaf], results: list[Leaf], num_operands: int, tree: list[int],
              ffi_attributes: list[ffi.FfiAttr] | None = None) -> CallSite:
    """Create the C call site compiled code passes to kiln_custom_call (for a C typed-FFI
    target, with its FFI site: leaf types, encoded attributes, instantiated handler)."""
    lib = runtime()
    if target.placeholder:
        raise KilnError(f"custom-call target '{target.name}' is a placeholder in a compile "
                        "worker; call sites are made where the program is loaded")
    site = CallSite(next(_site_ids), target, api_version, backend_config, attributes, operands, results)
    opaque = backend_config.encode()
    tree_array = (ctypes.c_int32 * max(len(tree), 1))(*tree)
    address = lib.KilnCallSiteCreate(site.id, target.address or 0, api_version,
                                     1 if target.is_python else 0, opaque, len(opaque),
                                     num_operands, tree_array, len(tree))
    if not address:
        raise KilnError("out of memory creating a custom-call site")
    if api_version == API_TYPED_FFI and not target.is_python:
        stages = target.ffi_stages or {"execute": target.address}
        lib.KilnCallSiteSetFfi(address, ffi.create_site(lib, target.name, stages, operands,
                                                        results, ffi_attributes or []))
    site.address = address
    _SITES[site.id] = site
    return site


# ---- running Python targets -----------------------------------------------------------------

_pending = threading.local()


def _view(address: int, leaf: Leaf, writeable: bool) -> np.ndarray | None:
    if leaf.is_token:
        return None  # Python targets see None where the call passes a token
    if leaf.nbytes == 0 or not address:
        array = np.zeros(leaf.shape, leaf.dtype)
    else:
        raw = (ctypes.c_char * leaf.nbytes).from_address(address)
        array = np.frombuffer(raw, leaf.dtype).reshape(leaf.shape)
    if leaf.view_perm is not None:
        array = array.transpose(leaf.view_perm)
    if not writeable:
        array.flags.writeable = False
    return array


def _run_python(site_id: int, leaves, status) -> None:
    # Nothing may escape a ctypes callback (it would be printed and ignored): every failure
    # becomes the call's status, and the exception is re-raised by invoke_entry.
    try:
        site = _SITES[site_id]
        n = len(site.operands)
        aliased = set(site.aliases.values())
        operands = [_view(leaves[i] or 0, leaf, i in aliased) for i, leaf in enumerate(site.operands)]
        results = [_view(leaves[n + i] or 0, leaf, True) for i, leaf in enumerate(site.results)]
        returned = site.target.function(results, operands, attributes=dict(site.attributes),
                                        backend_config=site.backend_config)
        if returned is not None:
            raise CustomCallError(
                f"Python custom-call target {site.target.name!r} returned a value",
                hint="fill the `results` arrays in place (results[i][...] = value) and return None")
    except BaseException as exc:  # noqa: BLE001 - re-raised by invoke_entry
        _pending.exception = exc
        message = f"{type(exc).__name__}: {exc}".encode(errors="replace")
        runtime().XlaCustomCallStatusSetFailure(status, message, len(message))


_python_dispatcher = _DISPATCHER_TYPE(_run_python)


def _thread_status(lib: ctypes.CDLL) -> int:
    """This thread's status for KilnInvoke (one per thread, reset after each failure)."""
    status = getattr(_pending, "status", None)
    if status is None:
        status = _pending.status = _ThreadStatus(lib)
    return status.address


class _ThreadStatus:
    def __init__(self, lib: ctypes.CDLL):
        self.lib, self.address = lib, lib.KilnStatusCreate()
        if not self.address:
            raise KilnError("out of memory creating a custom-call status")

    def __del__(self):  # when the thread ends
        try:
            self.lib.KilnStatusDestroy(self.address)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


# KilnInvoke's results (runtime/kiln_invocation.h).
_STOPPED_OUT_OF_MEMORY, _STOPPED_BY_INTERRUPT, _STOPPED_BY_RUNTIME_CHECK = 2, 3, 4
_STOPPED_BY_TIME_LIMIT = 5


def run_time_limit() -> float:
    """KILN_RUN_TIMEOUT in seconds, 0 for none."""
    from .. import environment
    text = environment.get("KILN_RUN_TIMEOUT")
    if not text:
        return 0.0
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise KilnError(f"KILN_RUN_TIMEOUT={text!r}: expected a number of seconds above 0",
                        hint="unset it for no limit")
    return seconds


def invoke_entry(address: int, packed) -> None:
    """Call a compiled `_mlir_ciface_` entry through KilnInvoke; raise if it stopped early
    (runtime/kiln_invocation.h: a failed custom call, memory, Ctrl-C). Its temporaries are
    freed by then."""
    lib = runtime()
    status = _thread_status(lib)
    _pending.exception = None
    reason = lib.KilnInvoke(address, packed, status)
    if reason:
        message = lib.KilnStatusMessage(status).decode(errors="replace")
        lib.XlaCustomCallStatusSetSuccess(status)
        raise stop_exception(reason, message)


def stop_exception(reason: int, message: str) -> BaseException:
    """The exception for a KilnInvoke that stopped early for `reason` with its status's
    `message`. Called on the thread that invoked: a Python target's exception waits there."""
    exc = getattr(_pending, "exception", None)
    _pending.exception = None
    if reason == _STOPPED_BY_INTERRUPT:
        return KeyboardInterrupt()
    if reason == _STOPPED_BY_RUNTIME_CHECK:
        # "op \x1f location \x1f constraint", written by lowering/bounds_guards.py
        op, _, rest = message.partition("\x1f")
        location, _, constraint = rest.partition("\x1f")
        return KilnError(f"{op}: {constraint}", location=location or None,
                         hint="an index, size or stride the program computed at run time is "
                              "out of the range the StableHLO spec allows; the computation "
                              "was stopped and its outputs discarded")
    if reason == _STOPPED_OUT_OF_MEMORY:
        return KilnError(message, hint="the program's temporaries do not fit in this "
                                       "machine's memory; call it on smaller inputs")
    if reason == _STOPPED_BY_TIME_LIMIT:
        return KilnError(message, hint="it may loop forever on these inputs; raise "
                                       "KILN_RUN_TIMEOUT if it needs longer")
    if exc is not None:
        return exc
    return CustomCallError(message, hint="a custom-call target reported failure; the "
                                         "computation was stopped and its outputs discarded")
