"""The engine host's messages as data, never code: commands and event batches encoded as
JSON, for the window's own host process and for a host on another machine alike.

A value is plain JSON where it can be; everything else is a tagged object:
  {"$dc": "module:Class", "f": {...}}  a dataclass of OpScope's engine
  {"$enum": "module:Class", "v": ...}  an Enum member of one
  {"$nd": [dtype, shape, base64]}     a numpy array (numbers and booleans only)
  {"$t": [...]}, {"$set": [...]}, {"$map": [[key, value], ...]}, {"$b": base64}
Decoding only ever builds those types: a class is looked up among OpScope's own engine
modules (a name elsewhere is refused) and constructed from its fields (no pickle, no eval,
no code of the sender's run); each field a peer sends is checked against the type its field
declares (engine/run/wire_fields.py). A message that is not this schema, or too big, is
refused with one line (WireError). The connections that carry these messages, framed, are
engine/run/wire.py's."""

from __future__ import annotations

import base64
import dataclasses
import enum
import importlib
import json
import math
import threading
from pathlib import PurePath
from typing import Any

import numpy as np

from engine.errors import OpScopeError
from engine.run.wire_fields import misfit

WIRE_VERSION = 1  # bumped whenever a message's shape changes incompatibly
MAX_FRAME = 512 * 1024 * 1024  # one message; a profile of a big model is tens of MB
MAX_DEPTH = 100  # containers within containers in one message
MAX_DIMS = 32  # dims of an array on the wire (numpy's own limit is 64)

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


def _dataclass(name: Any, fields: Any, depth: int = 0) -> Any:
    cls = _cls(name, "dataclass")
    if not isinstance(fields, dict):
        raise WireError(f"{name}: fields that are not an object")
    declared = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(fields) - set(declared)
    if unknown:
        raise WireError(f"{name}: unknown fields {sorted(unknown)[:3]}")
    values = {k: from_data(v, depth) for k, v in fields.items()}
    wrong = misfit(cls, values)
    if wrong:
        raise WireError(f"{name}: {wrong}")
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
