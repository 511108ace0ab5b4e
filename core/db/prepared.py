"""SELECTs of a fixed shape whose SQL is compiled once per process.

Turning a queryset with `select_related` into SQL costs Django 0.6-1.5 ms of Python on this
machine (profiled: about a third of an annotator's next + submit cycle went to compiling the same
few queries again on every request), more than PostgreSQL takes to answer them. A
:class:`PreparedSelect` compiles its queryset the first time it is used, keeps the SQL and
Django's description of the columns, and afterwards only binds the new parameters and builds the
instances as a queryset would (the row, its `select_related` objects, its annotations, the
database converters), with the converters and related populators it worked out the first time.

Where the database settings allow it (`prepare_threshold` in OPTIONS, see
config/settings/base.py), the statement is also prepared on the server (:func:`prepared_cursor`):
PostgreSQL then plans it once per connection instead of on every execution, which for these
joins by key took several times longer than running them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import psycopg
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.utils import CursorWrapper
from django.db.models import Model, QuerySet
from django.db.models.query import get_related_populators
from django.db.models.sql.compiler import SQLCompiler
from django.db.transaction import TransactionManagementError

M = TypeVar("M", bound=Model)


class _PreparingCursor(psycopg.Cursor[Any]):
    """psycopg's server-binding cursor, preparing every statement it runs on its connection
    (psycopg keeps the prepared statements per connection, by text and parameter types)."""

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, **kwargs: Any
    ) -> Any:
        return super().execute(query, params, prepare=True, **kwargs)

    def _send_query_prepared(self, name: bytes, pgq: Any, **kwargs: Any) -> None:
        # psycopg notes the query it sends only when it sends it unprepared; Django's query log
        # (DEBUG, CaptureQueriesContext) reads it from there.
        self._query = pgq
        super()._send_query_prepared(name, pgq, **kwargs)


def prepared_cursor() -> CursorWrapper:
    """A cursor of the default connection whose statements PostgreSQL plans once per connection.

    For statements of a fixed text run on every request (parameters as %s or %(name)s, bound on
    the server). When the database settings turn prepared statements off (`prepare_threshold`
    None, for a PgBouncer that cannot keep them), this is the ordinary cursor. Either way it is
    Django's cursor wrapper: errors, execute wrappers and query counting behave as usual.
    """
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.settings_dict["OPTIONS"].get("prepare_threshold") is None:
        return connection.cursor()
    # What connection.cursor() does, with a cursor of our class.
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        cursor: CursorWrapper = connection._prepare_cursor(  # type: ignore[attr-defined]
            _PreparingCursor(connection.connection)
        )
        return cursor


class _Compiled:
    """One compiled query: its SQL, its parameters, where each argument goes among them, and how
    a row becomes instances (the compiler's columns, their converters, the related populators,
    worked out once)."""

    def __init__(self, compiler: SQLCompiler, sql: str, params: tuple[Any, ...], slots: list[int]):
        self.compiler, self.sql, self.params, self.slots = compiler, sql, params, slots
        select, klass_info = compiler.select, compiler.klass_info
        assert klass_info is not None
        self.converters = compiler.get_converters([s[0] for s in select[: compiler.col_count]])
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        self.model: type[Model] = klass_info["model"]
        self.start, self.end = start, end
        self.names = [column[0].target.attname for column in select[start:end]]
        # Django 5.2's signature (the stubs describe a later one with a fetch mode).
        self.populators = get_related_populators(klass_info, select, DEFAULT_DB_ALIAS)  # type: ignore[call-arg]
        self.annotations = list(compiler.annotation_col_map.items())


class PreparedSelect(Generic[M]):
    """The first row of `build(*args)` (or None), its SQL compiled once per process.

    `build` must give a queryset of the same shape whatever its arguments, each argument bound
    as exactly one parameter of the SQL as given (no argument folded into the text, as a LIMIT
    is). That is checked when the query is compiled: an argument found in no parameter or in more
    than one (two equal arguments, say) makes that call run the queryset itself, and the next
    call tries again; so does an argument of another type than the one compiled. Meant for
    lookups on a unique key (no ORDER BY is added).
    """

    def __init__(self, build: Callable[..., QuerySet[M]], *, for_update: bool = False) -> None:
        self.build = build
        self.for_update = for_update
        self._compiled: _Compiled | None = None
        self._lock = threading.Lock()

    def first(self, *args: Any) -> M | None:
        connection = connections[DEFAULT_DB_ALIAS]
        if self.for_update and not connection.in_atomic_block:
            raise TransactionManagementError(
                "select_for_update cannot be used outside of a transaction."
            )
        compiled = self._compiled
        if compiled is None:
            compiled = self._compile(args)
            if compiled is None:
                return self.build(*args).first()
        params = list(compiled.params)
        for slot, value in zip(compiled.slots, args, strict=True):
            if type(value) is not type(params[slot]):
                return self.build(*args).first()  # bound as Django would, not as given
            params[slot] = value
        with prepared_cursor() as cursor:
            cursor.execute(compiled.sql, params)
            rows = cursor.fetchmany(1)
        if not rows:
            return None
        return self._instance(compiled, rows[0])

    def _compile(self, args: tuple[Any, ...]) -> _Compiled | None:
        queryset = self.build(*args)[:1]
        compiler = queryset.query.get_compiler(using=DEFAULT_DB_ALIAS)
        sql, params = compiler.as_sql()
        slots = []
        for value in args:
            found = [i for i, param in enumerate(params) if param == value]
            if len(found) != 1 or found[0] in slots:
                return None
            slots.append(found[0])
        compiled = _Compiled(compiler, sql, tuple(params), slots)
        with self._lock:
            self._compiled = compiled
        return compiled

    @staticmethod
    def _instance(compiled: _Compiled, row: tuple[Any, ...]) -> M:
        # What ModelIterable does for one row, from the compiled description of the columns.
        converted: list[Any] | tuple[Any, ...] = row
        if compiled.converters:
            (converted,) = compiled.compiler.apply_converters([row], compiled.converters)
        obj: M = compiled.model.from_db(  # type: ignore[assignment]
            DEFAULT_DB_ALIAS, compiled.names, converted[compiled.start : compiled.end]
        )
        for populator in compiled.populators:
            populator.populate(converted, obj)
        for name, position in compiled.annotations:
            setattr(obj, name, converted[position])
        return obj
