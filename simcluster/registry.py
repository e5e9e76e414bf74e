"""One registry type: a name -> implementation map for every pluggable thing.

Schedules, collective algorithms (one registry per op), node builders,
fabrics, network models and profile kinds are each a :class:`Registry`. A
lookup of an unknown name raises :class:`simcluster.errors.UnknownNameError`
listing the valid names and the near misses ("did you mean").

A registry is a read-only mapping (``name in reg``, ``reg[name]``,
``sorted(reg)``). Registries are indexed by their ``kind`` so that a schema
field can say which registry its value must name (:class:`Registered`) without
importing the layer that fills it; :func:`check_registered` resolves the
marker when a scenario loads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from simcluster.errors import UnknownNameError

__all__ = ["Registry", "Registered", "registry_for", "check_registered"]

T = TypeVar("T")

_INDEX: dict[str, Registry[Any]] = {}


class Registry(Mapping[str, T], Generic[T]):
    """Names -> implementations of one kind (``"schedule"``, ``"allreduce algorithm"``).

    loader: called once before the first read, to import modules that
        register themselves (e.g. every schedule module).
    """

    def __init__(self, kind: str, loader: Callable[[], None] | None = None) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._loader = loader
        self._loaded = loader is None
        _INDEX[kind] = self

    # --- filling -------------------------------------------------------------------------
    def add(self, name: str, obj: T) -> T:
        """Register ``obj`` under ``name``; a second, different ``obj`` is an error."""
        old = self._items.get(name)
        if old is not None and old is not obj and _origin(old) != _origin(obj):
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._items[name] = obj
        return obj

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of :meth:`add`."""

        def deco(obj: T) -> T:
            return self.add(name, obj)

        return deco

    # --- reading -------------------------------------------------------------------------
    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            assert self._loader is not None
            self._loader()

    def __getitem__(self, name: str) -> T:
        self._load()
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(self._items)

    def __len__(self) -> int:
        self._load()
        return len(self._items)

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self)

    def lookup(self, name: str, file: str | None = None, path: str | None = None) -> T:
        """The implementation named ``name``; UnknownNameError (exit 2) if there is none."""
        self._load()
        try:
            return self._items[name]
        except (KeyError, TypeError):
            raise UnknownNameError(self.kind, name, list(self._items), file, path) from None

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._items)})"


def _origin(obj: Any) -> tuple[Any, Any]:
    """Where ``obj`` was defined (a reloaded module registers the same origin again)."""
    return (getattr(obj, "__module__", None), getattr(obj, "__qualname__", id(obj)))


def registry_for(kind: str) -> Registry[Any]:
    """The registry of ``kind`` (its module must have been imported)."""
    return _INDEX[kind]


@dataclass(frozen=True)
class Registered:
    """Schema marker: the field's value names an entry of every registry in ``kinds``.

    Used as ``Annotated[str, Registered("allreduce algorithm", also=("auto",))]``;
    pydantic ignores it, :func:`check_registered` enforces it. A name used for
    several ops (an algorithm for allreduce and broadcast) must exist in each.
    """

    kinds: tuple[str, ...]
    also: tuple[str, ...] = ()

    def __init__(self, *kinds: str, also: tuple[str, ...] = ()) -> None:
        object.__setattr__(self, "kinds", kinds)
        object.__setattr__(self, "also", tuple(also))

    def allowed(self) -> list[str]:
        common = set.intersection(*(set(registry_for(k)) for k in self.kinds))
        return list(self.also) + sorted(common - set(self.also))

    def check(self, value: Any, file: str | None, path: str) -> None:
        allowed = self.allowed()
        if value not in allowed:
            raise UnknownNameError(" / ".join(self.kinds), value, allowed, file, path)


def check_registered(model: Any, values: Mapping[str, Any], file: str | None, prefix: str) -> None:
    """Check every field of pydantic ``model`` marked :class:`Registered` in ``values``.

    ``prefix`` is the field path of ``values`` (``schedules[1].options``).
    """
    for name, info in model.model_fields.items():
        for mark in info.metadata:
            if isinstance(mark, Registered):
                value = values.get(name, info.default)
                mark.check(value, file, f"{prefix}.{name}" if prefix else name)
