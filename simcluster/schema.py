"""Schema helpers shared by every validated input (scenarios, topologies, options).

:func:`pydantic_to_config_error` turns a pydantic ``ValidationError`` into one
:class:`simcluster.errors.ConfigError` that names the file, the dotted field
path, the bad value, what is allowed and, for unknown keys and names, the near
misses.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from simcluster.errors import ConfigError, did_you_mean, format_path

__all__ = ["STRICT_CONFIG", "ListTuple", "StrictModel", "annotation_at", "pydantic_to_config_error"]


#: every schema model: unknown keys refused; no coercion (``true`` is not 1, ``"64"`` is not
#: 64); NaN and infinities refused. A subclass's new fields get the same treatment.
STRICT_CONFIG = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def _list_to_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


#: Strict models take a tuple field only as a tuple; files hold lists. Wrap tuple fields:
#: ``pair: ListTuple[tuple[int, int]]`` (the items stay strict).
class ListTuple:
    def __class_getitem__(cls, tp: Any) -> Any:
        return typing.Annotated[tp, BeforeValidator(_list_to_tuple)]


class StrictModel(BaseModel):
    """A frozen schema model that rejects unknown keys, coercion and non-finite numbers."""

    model_config = STRICT_CONFIG


def _unwrap(ann: Any) -> Any:
    """Strip Annotated / Optional from an annotation."""
    while True:
        origin = typing.get_origin(ann)
        if origin is typing.Annotated:
            ann = typing.get_args(ann)[0]
            continue
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(ann) if a is not type(None)]
            if len(args) == 1:
                ann = args[0]
                continue
        return ann


def annotation_at(root: type[BaseModel], loc: tuple[Any, ...]) -> Any:
    """The annotation of the field at ``loc`` inside ``root`` (None if unknown)."""
    ann: Any = root
    for part in loc:
        ann = _unwrap(ann)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            field = ann.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return None
            ann = field.annotation
        elif typing.get_origin(ann) in (list, tuple) and isinstance(part, int):
            args = typing.get_args(ann)
            ann = args[0] if typing.get_origin(ann) is list else args[min(part, len(args) - 1)]
        elif typing.get_origin(ann) is dict:
            ann = typing.get_args(ann)[1]
        else:
            return None
    return _unwrap(ann)


_TYPE_WORDS = {
    "int": "an integer",
    "float": "a number",
    "string": "a string",
    "bool": "true or false",
    "list": "a list",
    "dict": "a mapping",
    "model": "a mapping",
}
_BOUNDS = {
    "greater_than": ">",
    "greater_than_equal": ">=",
    "less_than": "<",
    "less_than_equal": "<=",
}


def pydantic_to_config_error(
    exc: ValidationError, file: str | None, root: type[BaseModel], prefix: tuple[Any, ...] = ()
) -> ConfigError:
    """The most telling error of ``exc`` as a ConfigError (with a count of the others).

    A validator may raise an exception with ``problem`` and ``allowed``
    attributes (a unit parser, say); they are used as they are.
    """
    errors = exc.errors(include_url=False)
    # A misspelled key shows up as an unknown key *and* a missing one: report the first.
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = tuple(err["loc"])
    typ = err["type"]
    ctx = err.get("ctx") or {}
    value = err.get("input")
    path = format_path(prefix + loc)
    allowed: Any = None
    suggestions: list[str] = []
    cause = ctx.get("error")
    if typ == "extra_forbidden":
        parent = annotation_at(root, loc[:-1])
        fields = parent.model_fields if isinstance(parent, type) else {}
        keys = sorted(k for k in fields if k != "source")
        problem = "unknown key"
        value = loc[-1]
        allowed = keys or None
        suggestions = did_you_mean(str(loc[-1]), keys)
    elif typ == "missing":
        problem = "missing required field"
        value = None
        others = [format_path(prefix + tuple(e["loc"])) for e in errors
                  if e["type"] == "missing" and e is not err]  # fmt: skip
        if others:  # name them all: a file missing four fields needs four edits
            problem += f" (also missing: {', '.join(others)})"
            errors = [e for e in errors if e["type"] != "missing" or e is err]
    elif typ in ("literal_error", "enum"):
        problem = "not one of the allowed values"
        ann = annotation_at(root, loc)
        if typing.get_origin(ann) is typing.Literal:
            choices = [str(a) for a in typing.get_args(ann)]
        else:
            text = str(ctx.get("expected", ""))
            choices = [c.strip().strip("'") for c in text.replace(" or ", ",").split(",")]
        choices = [c for c in choices if c]
        allowed = choices or ctx.get("expected")
        suggestions = did_you_mean(str(value), choices)
    elif typ in _BOUNDS:
        bound = next(iter(ctx.values()))
        problem = "out of range"
        allowed = f"a value {_BOUNDS[typ]} {bound}"
    elif typ in ("too_short", "too_long"):
        problem = "wrong length"
        allowed = err["msg"].split(", ", 1)[-1] if ", " in err["msg"] else err["msg"]
    elif typ == "string_pattern_mismatch":
        problem = "bad characters"
        allowed = "letters, digits, '_', '.', '-'"
    elif cause is not None and hasattr(cause, "problem"):
        problem = cause.problem
        allowed = getattr(cause, "allowed", None)
    else:
        msg = err["msg"].removeprefix("Value error, ")
        word = _TYPE_WORDS.get(typ.split("_")[0])
        problem = f"wrong type ({msg})" if word else msg
        allowed = word
    if len(errors) > 1:
        problem += f" [and {len(errors) - 1} more problem(s)]"
    return ConfigError(file, path, value, problem, allowed, suggestions)
