"""The engine host's messages as data, never code: commands and event batches encoded as
JSON, for the window's own host process and for a host on another machine alike.

A value is plain JSON where it can be; everything else is a tagged object:
  {"$dc": "module:Class", "f": {...}}  a dataclass of OpScope's engine
  {"$enum": "module:Class", "v": ...}  an Enum member of one
  {"$nd": [dtype, shape, base64]}     a numpy array (numbers and booleans only)
  {"$t": [...]}, {"$set": [...]}, {"$map": [[key, value], ...]}, {"$b": base64}
Decoding only ever builds those types: a class is looked up among OpScope's own engine
modules (a name elsewhere is refused) and constructed from its fields (no pickle, no eval,
no code of the sender's run). A message that is not this
schema, or too big, is refused with one line (WireError)."""

from __future__ import annotations

import base64
import collections.abc
import contextlib
import dataclasses
import enum
import importlib
import json
import math
import os
import select
import struct
import threading
import types
import typing
from pathlib import PurePath
from typing import Any, Protocol

import numpy as np

from engine.errors import OpScopeError

WIRE_VERSION = 1  # bumped whenever a message's shape changes incompatibly
MAX_FRAME = 512 * 1024 * 1024  # one message; a profile of a big model is tens of MB
UNCHECKED = ("engine.events",)  # the host's answers: its own, not a sender's input
MAX_DEPTH = 100  # containers within containers in one message
MAX_DIMS = 32  # dims of an array on the wire (numpy's own limit is 64)
_HEADER = struct.Struct(">I")

# Whose dataclasses and enums may cross: OpScope's own engine types (the commands, the
# events and what they carry: job requests and results). Never the sender's choice of any
# module: a name outside the engine, or a module that is not one, is refused.
WIRE_PACKAGE = "engine."


class WireError(OpScopeError):
    """A message that is not OpScope's schema (or too big): one line."""


# encoding ------------------------------------------------------------------------------
def _ours(module: str) -> bool:
    return module.startswith(WIRE_PACKAGE) and all(p.isidentifier() for p in module.split("."))


def _name(cls: type) -> str:
    if not _ours(cls.__module__):
        raise WireError(f"{cls.__module__}.{cls.__qualname__} is not in the wire schema")
    return f"{cls.__module__}:{cls.__qualname__}"


def _float(x: float) -> Any:
    if math.isfinite(x):
        return x
    return {"$f": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}


def to_data(obj: Any) -> Any:
    """`obj` as JSON-able data (raises WireError for a type outside the schema)."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, enum.Enum):
        return {"$enum": _name(type(obj)), "v": to_data(obj.value)}
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return _float(float(obj))
    if isinstance(obj, np.generic):
        return to_data(obj.item())
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biuf":
            raise WireError(f"a numpy array of {obj.dtype} is not in the wire schema")
        arr = np.ascontiguousarray(obj)
        return {"$nd": [arr.dtype.str, list(arr.shape), base64.b64encode(arr.tobytes()).decode()]}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: to_data(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        return {"$dc": _name(type(obj)), "f": fields}
    if isinstance(obj, list):
        return [to_data(x) for x in obj]
    if isinstance(obj, tuple):
        return {"$t": [to_data(x) for x in obj]}
    if isinstance(obj, (set, frozenset)):
        return {"$set": [to_data(x) for x in obj]}
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in obj):
            return {k: to_data(v) for k, v in obj.items()}
        return {"$map": [[to_data(k), to_data(v)] for k, v in obj.items()]}
    if isinstance(obj, (bytes, bytearray)):
        return {"$b": base64.b64encode(obj).decode()}
    if isinstance(obj, PurePath):
        return str(obj)
    raise WireError(f"{type(obj).__module__}.{type(obj).__qualname__} is not in the wire schema")


def encode(obj: Any) -> bytes:
    """One message: {"v": WIRE_VERSION, "m": data} as UTF-8 JSON."""
    return json.dumps({"v": WIRE_VERSION, "m": to_data(obj)}, separators=(",", ":")).encode()


# decoding ------------------------------------------------------------------------------
_classes: dict[str, type] = {}
_classes_lock = threading.Lock()


def _cls(name: Any, kind: str) -> type:
    """A dataclass or Enum of OpScope's engine by "module:Class" (else WireError)."""
    if not isinstance(name, str):
        raise WireError(f"a {kind} name that is not text ({type(name).__name__})")
    with _classes_lock:
        found = _classes.get(name)
    if found is not None:
        return found
    module, _, qualname = name.partition(":")
    if not _ours(module) or not qualname.isidentifier():
        raise WireError(f"{name[:80]!r} is not in the wire schema")
    try:
        mod = importlib.import_module(module)
    except ImportError:
        raise WireError(f"{name[:80]!r} is not in the wire schema") from None
    cls = getattr(mod, qualname, None)
    ok = isinstance(cls, type) and cls.__module__ == module
    if ok and kind == "dataclass":
        ok = dataclasses.is_dataclass(cls)
    elif ok:
        ok = issubclass(cls, enum.Enum)  # type: ignore[arg-type]
    if not ok:
        raise WireError(f"{name[:80]!r} is not a {kind} of the wire schema")
    assert isinstance(cls, type)
    with _classes_lock:
        _classes[name] = cls
    return cls


def _array(spec: Any) -> np.ndarray:
    if not (isinstance(spec, list) and len(spec) == 3):
        raise WireError("a malformed array")
    dtype_s, shape, data = spec
    try:
        dtype = np.dtype(dtype_s)
    except TypeError as exc:
        raise WireError(f"an array of unknown dtype {str(dtype_s)[:20]!r}") from exc
    if dtype.kind not in "biuf" or not isinstance(shape, list):
        raise WireError(f"an array of dtype {dtype} is not in the wire schema")
    if (  # booleans are ints to Python; a dim past int64 overflowed numpy's product
        len(shape) > MAX_DIMS
        or not all(type(n) is int and 0 <= n <= MAX_FRAME for n in shape)
        or not isinstance(data, str)
    ):
        raise WireError("a malformed array (its shape: up to 32 whole numbers, no booleans)")
    raw = _b64(data, "array")
    count = math.prod(shape)  # Python ints: exact, whatever the dims
    if count * dtype.itemsize != len(raw):
        raise WireError("an array whose bytes do not match its shape")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _b64(data: Any, what: str) -> bytes:
    if not isinstance(data, str):
        raise WireError(f"a malformed {what}: its base64 is not text")
    try:
        return base64.b64decode(data, validate=True)
    except ValueError:  # binascii.Error: not base64
        raise WireError(f"a malformed {what}: not base64") from None


_hint_cache: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """The class's field types, resolved: what a host is sent (commands, job requests,
    configs, workloads) is checked field by field. None for the events a host sends
    back, nor when they cannot be resolved: nothing checked."""
    with _classes_lock:
        found = _hint_cache.get(cls)
    if found is None:
        try:
            found = {} if cls.__module__ in UNCHECKED else typing.get_type_hints(cls)
        except Exception:  # a name only a type checker sees
            found = {}
        with _classes_lock:
            _hint_cache[cls] = found
    return found


def _fits(value: Any, hint: Any) -> bool:
    """Whether a decoded value can be what a field of type `hint` holds: its kind (text,
    bytes, a number, a container, an array, one of the engine's dataclasses or enums),
    not every detail. A hint it cannot judge passes."""
    if hint is Any or hint is object or isinstance(hint, typing.TypeVar):
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(_fits(value, a) for a in args)
    if origin is typing.Literal:
        return value in args
    if origin is typing.ClassVar or origin is collections.abc.Callable:
        return True
    if origin is not None:
        return _fits_container(value, origin, args)
    if hint in (int, float, complex):
        return isinstance(value, (int, float))
    if hint is bool:
        return isinstance(value, (bool, int))
    if hint is str:
        return isinstance(value, str)
    if hint is bytes:
        return isinstance(value, bytes)
    if isinstance(hint, type) and issubclass(hint, PurePath):
        return isinstance(value, (str, PurePath))  # a path crosses as text
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or issubclass(hint, enum.Enum)):
        return isinstance(value, hint)
    if hint is np.ndarray:
        return isinstance(value, np.ndarray)
    return True


def _fits_container(value: Any, origin: Any, args: tuple[Any, ...]) -> bool:
    if origin in (list, collections.abc.Sequence, collections.abc.Iterable):
        if not isinstance(value, (list, tuple)):
            return False
        return not args or all(_fits(v, args[0]) for v in value)
    if origin is tuple:
        if not isinstance(value, (tuple, list)):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(v, args[0]) for v in value)
        return not args or (len(args) == len(value) and all(map(_fits, value, args)))
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, dict):
            return False
        return len(args) != 2 or all(_fits(v, args[1]) for v in value.values())
    if origin in (set, frozenset, collections.abc.Set):
        return isinstance(value, (set, frozenset))
    if origin is np.ndarray:
        return isinstance(value, np.ndarray)
    return True


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _hint_text(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")[:60]


def _dataclass(name: Any, fields: Any, depth: int = 0) -> Any:
    cls = _cls(name, "dataclass")
    if not isinstance(fields, dict):
        raise WireError(f"{name}: fields that are not an object")
    declared = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(fields) - set(declared)
    if unknown:
        raise WireError(f"{name}: unknown fields {sorted(unknown)[:3]}")
    values = {k: from_data(v, depth) for k, v in fields.items()}
    hints = _hints(cls)
    for k, v in values.items():
        if k in hints and not _fits(v, hints[k]):
            raise WireError(f"{name}: {k} is a {_kind(v)}, not what the field holds "
                            f"({_hint_text(hints[k])})")  # fmt: skip
    init = {k: v for k, v in values.items() if declared[k].init}
    try:
        obj = cls(**init)
    except Exception as exc:  # a field missing or refused by the class's own checks
        raise WireError(f"{name}: {str(exc)[:200]}") from None
    for k, v in values.items():
        if not declared[k].init:
            object.__setattr__(obj, k, v)
    return obj


def from_data(data: Any, depth: int = 0) -> Any:
    """The value `to_data` encoded (WireError for anything outside the schema, or nested
    deeper than MAX_DEPTH: sent back, it would not encode)."""
    if depth > MAX_DEPTH:
        raise WireError("a message nested too deeply")
    d = depth + 1
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [from_data(x, d) for x in data]
    if not isinstance(data, dict):
        raise WireError(f"a {type(data).__name__} is not in the wire schema")
    if "$dc" in data:
        return _dataclass(data["$dc"], data.get("f"), d)
    if "$nd" in data:
        return _array(data["$nd"])
    if "$t" in data:
        return tuple(from_data(x, d) for x in _items(data["$t"]))
    if "$map" in data:
        pairs = _items(data["$map"])
        if not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            raise WireError("a malformed map")
        return {_key(from_data(k, d)): from_data(v, d) for k, v in pairs}
    if "$f" in data:
        if data["$f"] not in ("nan", "inf", "-inf"):
            raise WireError("a malformed number")
        return float(data["$f"])
    if "$enum" in data:
        cls = _cls(data["$enum"], "enum")
        try:
            return cls(from_data(data.get("v"), d))
        except ValueError as exc:
            raise WireError(f"{data['$enum']}: {exc}") from None
    if "$set" in data:
        return {_key(from_data(x, d)) for x in _items(data["$set"])}
    if "$b" in data:
        return _b64(data["$b"], "byte string")
    if any(k.startswith("$") for k in data):
        raise WireError(f"an unknown tag {next(k for k in data if k.startswith('$'))[:20]!r}")
    return {k: from_data(v, d) for k, v in data.items()}


def _items(x: Any) -> list[Any]:
    if not isinstance(x, list):
        raise WireError("a malformed sequence")
    return x


def _key(k: Any) -> Any:
    try:
        hash(k)
    except TypeError:
        raise WireError("an unhashable key") from None
    return k


def decode(raw: bytes) -> Any:
    """The message in `raw` (WireError, one line, for anything but OpScope's schema of
    this version)."""
    try:
        msg = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise WireError(f"a message that is not JSON ({str(exc)[:80]})") from None
    except RecursionError:
        raise WireError("a message nested too deeply") from None
    if not isinstance(msg, dict) or "m" not in msg:
        raise WireError("a message that is not OpScope's")
    if msg.get("v") != WIRE_VERSION:
        raise WireError(f"a message of wire version {msg.get('v')!r} (this side speaks "
                        f"{WIRE_VERSION}): install the same OpScope on both sides")  # fmt: skip
    try:
        return from_data(msg["m"])
    except RecursionError:
        raise WireError("a message nested too deeply") from None
    except WireError:
        raise
    except Exception as exc:  # whatever else the schema missed: a protocol error still
        raise WireError(f"a malformed message ({type(exc).__name__}: {str(exc)[:120]})") from None


# connections ---------------------------------------------------------------------------
class Channel(Protocol):
    """What the engine host and the window talk through: wire messages, either way."""

    def send(self, obj: Any) -> None: ...
    def recv(self) -> Any: ...
    def poll(self, timeout: float = 0.0) -> bool: ...
    def close(self) -> None: ...


def as_channel(conn: Any) -> Channel:
    """A channel as is; a multiprocessing Connection wrapped to carry wire messages."""
    if isinstance(conn, (PipeConnection, StreamConnection)):
        return conn
    return PipeConnection(conn)


class PipeConnection:
    """A multiprocessing Connection that carries wire messages (bytes) instead of pickles:
    the same send/recv/poll/close, so the host loop serves a local or a remote window."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def send(self, obj: Any) -> None:
        self._conn.send_bytes(encode(obj))

    def recv(self) -> Any:
        return decode(self._conn.recv_bytes(MAX_FRAME))

    def poll(self, timeout: float = 0.0) -> bool:
        return bool(self._conn.poll(timeout))

    def close(self) -> None:
        self._conn.close()


class StreamConnection:
    """Wire messages framed by a 4-byte length over two file descriptors (an SSH
    session's stdin and stdout): send/recv/poll/close as a Connection. EOF on the read
    side raises EOFError, as a closed pipe does."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._r, self._w = read_fd, write_fd
        self._send_lock = threading.Lock()

    def send(self, obj: Any) -> None:
        raw = encode(obj)
        if len(raw) > MAX_FRAME:
            raise WireError(f"a message of {len(raw) >> 20} MiB (at most {MAX_FRAME >> 20})")
        with self._send_lock:
            _write_all(self._w, _HEADER.pack(len(raw)) + raw)

    def recv(self) -> Any:
        (size,) = _HEADER.unpack(self._read_exactly(_HEADER.size))
        if size > MAX_FRAME:
            raise WireError(f"a message of {size >> 20} MiB (at most {MAX_FRAME >> 20})")
        return decode(self._read_exactly(size))

    def poll(self, timeout: float = 0.0) -> bool:
        ready, _, _ = select.select([self._r], [], [], timeout)
        return bool(ready)

    def close(self) -> None:
        for fd in {self._r, self._w}:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _read_exactly(self, n: int) -> bytes:
        parts: list[bytes] = []
        while n:
            chunk = os.read(self._r, min(n, 1 << 20))
            if not chunk:
                raise EOFError("the other side closed the connection")
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
