"""One declared spec per session record: its columns, and from them its SELECT, its typed
reader and its INSERT.

A `RecordSpec` names a table's columns once, each with how a value read from a file that
may come from anyone is checked (`Column.read`: SQL type and the bounds
engine/session/columns.py declares, JSON parsed and its kind checked, a further check).
Every SQL text a reader or the writer uses is made from it, and values travel by name,
never by position: `read(row)` builds the record from a row of `select()`, `row(**values)`
and `rows(**columns)` put values in the order `insert()` names them. Reordering a spec's
columns changes nothing. The raw-sample tables (latency, requests, batches, steps,
telemetry) keep their fast paths: the spec names their columns, `rows` zips the caller's
column iterables for `executemany`, and `select(names=...)` lets a reader unpack whole
columns itself.

The schema is not generated from the specs: engine/session/schema.py's migrations stay
explicit (tests/test_session_specs.py checks that each spec's columns exist in it).
"""

from __future__ import annotations

import dataclasses
import functools
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from engine.session.trust import parse_json, typed

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a record: how its value is read back and checked."""

    name: str  # the column's name in the table (and the INSERT)
    kind: type  # int | float | str; dict | list for a JSON column (text holding that kind)
    nullable: bool = False  # NULL (or a value out of its bounds) reads as `default`
    default: Any = None  # what NULL reads as (an immutable value: see `then`)
    then: Callable[[Any], Any] | None = None  # a further check or conversion of the value
    field: str = ""  # the record's attribute, where it is not `name` (`pass` -> `pass_`)
    expr: str = ""  # the SQL selecting it, where it is not the column itself (a join)
    what: str = ""  # the name checks and errors use ("table.column" by default)

    @property
    def attr(self) -> str:
        return self.field or self.name

    def read(self, value: object, table: str) -> Any:
        """The value read, checked (ValueError naming the column where it cannot be read)."""
        return self.reader(table)(value)

    def reader(self, table: str) -> Callable[[object], Any]:
        """`read` for values of `table`, its names and checks settled once (a pass's node
        rows are 10^5 rows of 15 values)."""
        what = self.what or f"{table}.{self.name}"
        kind, nullable, default, then = self.kind, self.nullable, self.default, self.then
        if kind is dict or kind is list:

            def base(value: object) -> Any:
                return parse_json(value, kind, what)

        else:

            def base(value: object) -> Any:
                return typed(value, kind, what, nullable=nullable)

        if default is None and then is None:
            return base

        def read(value: object) -> Any:
            out = base(value)
            if out is None:
                out = default
            return out if then is None else then(out)

        return read


def _keywords(**values: Any) -> dict[str, Any]:
    return values


@dataclass(frozen=True)
class RecordSpec(Generic[R]):
    """A session record: its table, its columns, and the record its rows read as."""

    table: str
    columns: tuple[Column, ...]
    # the record from its fields, by keyword (default: the dict of them)
    build: Callable[..., R] = _keywords  # type: ignore[assignment]
    source: str = ""  # the FROM clause, where it is not the table itself (a join)

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @functools.cached_property
    def _name_set(self) -> frozenset[str]:
        return frozenset(self.names)

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.table} has no column {name!r} in its spec")

    def reordered(self, names: Sequence[str]) -> RecordSpec[R]:
        """The same spec with its columns in the order `names` gives (every one of them)."""
        if sorted(names) != sorted(self.names):
            raise ValueError(f"{self.table}: {list(names)} are not its columns")
        return dataclasses.replace(self, columns=tuple(self.column(n) for n in names))

    # -- reading -----------------------------------------------------------------------

    def select(self, where: str = "", order: str = "", names: Sequence[str] = ()) -> str:
        """SELECT of every column (or of `names`, in that order) with `where` and `order`
        (SQL text, as given)."""
        cols = [self.column(n) for n in names] if names else self.columns
        picked = ", ".join(c.expr or c.name for c in cols)
        tail = " ".join(part for part in (where, order) if part)
        return f"SELECT {picked} FROM {self.source or self.table}" + (f" {tail}" if tail else "")

    @functools.cached_property
    def _readers(self) -> tuple[tuple[str, Callable[[object], Any]], ...]:
        return tuple((c.attr, c.reader(self.table)) for c in self.columns)

    def values(self, row: Sequence[Any]) -> dict[str, Any]:
        """A row of `select()` -> its checked values by attribute name."""
        return {attr: read(v) for (attr, read), v in zip(self._readers, row, strict=True)}

    def value(self, row: Sequence[Any], name: str) -> Any:
        """One column's checked value from a row of `select()`."""
        for c, v in zip(self.columns, row, strict=True):
            if c.name == name:
                return c.read(v, self.table)
        raise KeyError(f"{self.table} has no column {name!r} in its spec")

    def read(self, row: Sequence[Any]) -> R:
        """A row of `select()` -> the record, every value checked."""
        return self.build(**self.values(row))

    def read_all(
        self, conn: sqlite3.Connection, where: str = "", order: str = "", args: Sequence[Any] = ()
    ) -> list[R]:
        return [self.read(r) for r in conn.execute(self.select(where, order), args)]

    # -- writing -----------------------------------------------------------------------

    def insert(self, verb: str = "INSERT", names: Sequence[str] = ()) -> str:
        """INSERT naming every column (or `names`, checked to be its columns), in order."""
        cols = [self.column(n).name for n in names] if names else self.names
        marks = ", ".join("?" * len(cols))
        return f"{verb} INTO {self.table} ({', '.join(cols)}) VALUES ({marks})"

    def row(self, **values: Any) -> tuple[Any, ...]:
        """Every column's value, by name, in the order `insert()` names them."""
        self._exactly(values)
        return tuple(values[n] for n in self.names)

    def rows(self, **columns: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
        """Rows for `executemany(insert())` from whole columns given by name (iterables of
        one length; `itertools.repeat` for a constant): the fast path of bulk rows."""
        self._exactly(columns)
        return zip(*(columns[n] for n in self.names), strict=False)

    def of(self, record: object, **values: Any) -> tuple[Any, ...]:
        """A row from a record's attributes (and `values` for columns it lacks or that are
        stored otherwise), in the order `insert()` names them."""
        return tuple(
            values[c.name] if c.name in values else getattr(record, c.attr) for c in self.columns
        )

    def write(self, conn: sqlite3.Connection, verb: str = "INSERT", **values: Any) -> int:
        """Insert one row of the columns named in `values` (the others take their default);
        returns its rowid."""
        names = list(values)
        cur = conn.execute(self.insert(verb, names), [values[n] for n in names])
        return int(cur.lastrowid or 0)

    def upsert(
        self, conn: sqlite3.Connection, key: Sequence[str], keep: Sequence[str] = (), **values: Any
    ) -> None:
        """Insert the row of `values`, or update the one with its `key`: the columns named
        in `values` are set, those in `keep` only where NULL."""
        names = list(values)
        sets = ", ".join(
            f"{n} = COALESCE({self.table}.{n}, excluded.{n})"
            if n in keep
            else f"{n} = excluded.{n}"
            for n in names
            if n not in key
        )
        conflict = f" ON CONFLICT({', '.join(key)}) DO UPDATE SET {sets}" if sets else ""
        conn.execute(self.insert(names=names) + conflict, [values[n] for n in names])

    def update(self, conn: sqlite3.Connection, where: Mapping[str, Any], **values: Any) -> None:
        """Set the columns named in `values` of the rows whose `where` columns match."""
        sets = ", ".join(f"{self.column(n).name} = ?" for n in values)
        match = " AND ".join(f"{self.column(n).name} = ?" for n in where)
        conn.execute(
            f"UPDATE {self.table} SET {sets} WHERE {match}", [*values.values(), *where.values()]
        )

    def _exactly(self, given: Mapping[str, Any]) -> None:
        if given.keys() != self._name_set:
            missing = sorted(self._name_set - given.keys())
            extra = sorted(given.keys() - self._name_set)
            raise KeyError(f"{self.table}: missing {missing}, not columns {extra}")
