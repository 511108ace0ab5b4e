"""Rows and model instances, where the hot path steps past the ORM.

A few services write or read a row in SQL of their own for speed (the claim is one PL/pgSQL call,
the submit one statement of three writes) and still hand their callers model instances that
behave as the ORM's would. What that takes touches Django's internals (the instance's `_state`,
the model's concrete fields, the values an INSERT sends, a relation's cache). Those uses live
here, behind names that say what they do, so the services read as plain Django and a Django
upgrade that changes an internal breaks tests/core/test_db_seams.py first.
"""

from __future__ import annotations

import functools
from collections.abc import Container
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import NOT_PROVIDED, Field, ForeignObject, Model, QuerySet

M = TypeVar("M", bound=Model)


def instance_saved(model: type[M], *, db: str = DEFAULT_DB_ALIAS, **values: Any) -> M:
    """An instance of `model` built from `values` (field names, attnames or related objects, as
    the model's constructor takes them) that is a row already in `db`.

    Saving it updates that row (it is not `adding`) and its relations read from `db`. Fields not
    in `values` take their defaults, as in the constructor; none is deferred, so reading one runs
    no query (it need not be what the row holds).
    """
    obj = model(**values)
    obj._state.adding = False
    obj._state.db = db
    return obj


def mark_saved(obj: Model, *, pk: Any, db: str = DEFAULT_DB_ALIAS) -> None:
    """Record that `obj` was inserted in `db` with primary key `pk` by SQL of the caller's own
    (what `save()` records after its INSERT)."""
    obj.pk = pk
    obj._state.adding = False
    obj._state.db = db


def mark_new(obj: Model) -> None:
    """Make `obj` a copy not yet saved: its next `save()` inserts a new row with a new key (as
    Django's documentation says to copy an instance)."""
    obj.pk = None
    obj._state.adding = True


def relation_loaded(obj: Model, name: str) -> bool:
    """Whether the forward relation `name` of `obj` is loaded (reading it runs no query)."""
    return bool(_forward_relation(obj, name).is_cached(obj))


def relation_attach(obj: Model, name: str, related: Model) -> None:
    """Attach `related`, already read, as the relation `name` of `obj` without a check or query.

    For a caller that read `related` itself and knows it is the row `obj` points at (its key
    equals `obj`'s foreign key); the foreign key is left as it is.
    """
    _forward_relation(obj, name).set_cached_value(obj, related)


def _forward_relation(obj: Model, name: str) -> ForeignObject[Any, Any]:
    field = obj._meta.get_field(name)
    if not isinstance(field, ForeignObject):
        raise TypeError(f"{name} is not a foreign key or one-to-one field of {obj._meta.label}")
    return field


@dataclass(frozen=True)
class ModelInsert:
    """What Django's INSERT of one `model` row writes: the quoted table and columns (every
    concrete field but the primary key and generated fields, in the model's order) and the
    attnames of those fields. For models whose primary key the database assigns, and whose
    fields have no `db_default` (the INSERT would send DEFAULT for it)."""

    model: type[Model]
    table: str
    columns: tuple[str, ...]
    attnames: tuple[str, ...]
    fields: tuple[Field[Any, Any], ...]

    def values(self, obj: Model, *, skip: Container[str] = ()) -> list[Any]:
        """The values Django's INSERT would send for `obj`, in `columns`' order, leaving out the
        fields whose attnames are in `skip` (each as `pre_save`, then `get_db_prep_save`, make
        it: auto_now times set, JSON adapted, decimals quantized)."""
        connection = connections[obj._state.db or DEFAULT_DB_ALIAS]
        return [
            field.get_db_prep_save(field.pre_save(obj, add=True), connection=connection)
            for field in self.fields
            if field.attname not in skip
        ]


@functools.cache
def model_insert(model: type[Model], *, db: str = DEFAULT_DB_ALIAS) -> ModelInsert:
    """The INSERT shape of `model` on `db` (worked out once per process)."""
    quote = connections[db].ops.quote_name

    def column(field: Field[Any, Any]) -> str:
        assert field.column is not None  # concrete fields have columns
        return quote(field.column)

    fields = tuple(
        field
        for field in model._meta.concrete_fields
        if not field.primary_key and not field.generated
    )
    sent_as_default = [
        f.name for f in fields if f.db_default is not NOT_PROVIDED and not f.has_default()
    ]
    if sent_as_default:
        raise ValueError(f"{model._meta.label} leaves {sent_as_default} to the database's default")
    return ModelInsert(
        model=model,
        table=quote(model._meta.db_table),
        columns=tuple(column(field) for field in fields),
        attnames=tuple(field.attname for field in fields),
        fields=fields,
    )


def queryset_sql(queryset: QuerySet[Any]) -> tuple[str, tuple[Any, ...]]:
    """The SQL `queryset` runs and its parameters, to nest in a statement of the caller's own.

    Raises django.core.exceptions.EmptyResultSet when the queryset can match no row (a filter on
    an empty list): there is then no SQL to run.
    """
    sql, params = queryset.query.sql_with_params()
    return sql, tuple(params)
