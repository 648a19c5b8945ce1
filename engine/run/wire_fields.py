"""Whether a decoded value can be what a field of one of the engine's dataclasses holds:
the check every dataclass a peer sends (commands, job requests, configs, workloads) passes
field by field before it is built, so that a host never runs on a config that is text or a
shape of booleans (engine/run/wire_format.py decodes, then asks `misfit`). The events a
host sends back are its own: not checked."""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import threading
import types
import typing
from pathlib import PurePath
from typing import Any

import numpy as np

UNCHECKED = ("engine.events",)  # the host's answers: its own, not a sender's input

_hint_cache: dict[type, dict[str, Any]] = {}
_lock = threading.Lock()


def misfit(cls: type, values: dict[str, Any]) -> str | None:
    """The first field of `cls` whose decoded value cannot be what it holds, said as
    "FIELD is a KIND, not what the field holds (TYPE)" (None: every one fits)."""
    hints = _hints(cls)
    for k, v in values.items():
        if k in hints and not _fits(v, hints[k]):
            return f"{k} is a {_kind(v)}, not what the field holds ({_hint_text(hints[k])})"
    return None


def _hints(cls: type) -> dict[str, Any]:
    """The class's field types, resolved: what a host is sent (commands, job requests,
    configs, workloads) is checked field by field. None for the events a host sends
    back, nor when they cannot be resolved: nothing checked."""
    with _lock:
        found = _hint_cache.get(cls)
    if found is None:
        try:
            found = {} if cls.__module__ in UNCHECKED else typing.get_type_hints(cls)
        except Exception:  # a name only a type checker sees
            found = {}
        with _lock:
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
