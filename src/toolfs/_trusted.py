"""Building pydantic models from values toolfs made itself, without validating them again.

Every write and edit builds a handful of small models (its two events, the ledger's
observation, the new version, the result) from values that are valid by construction.
Validating them costs about a microsecond each, and ``BaseModel.model_construct`` more
than that (it walks the model's fields in Python). :func:`trusted` does what
``model_construct`` does for a complete set of values: it sets the four slots every
pydantic v2 model instance has (``__dict__``, ``__pydantic_fields_set__``,
``__pydantic_extra__``, ``__pydantic_private__``) and nothing else. Only for models
without private attributes, extras or ``model_post_init``; tests/contract/test_arguments.py
checks that each model built this way equals, dumps and reports its set fields exactly
as the validated one.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_setattr = object.__setattr__


def trusted(cls: type[M], fields_set: frozenset[str], values: dict[str, Any]) -> M:
    """An instance of ``cls`` holding ``values`` (every field, in declaration order),
    not validated; ``fields_set``: the fields the validated call would have been given
    (the others are at their defaults). The caller guarantees the values are valid."""
    obj = cls.__new__(cls)
    _setattr(obj, "__dict__", values)
    _setattr(obj, "__pydantic_fields_set__", set(fields_set))
    _setattr(obj, "__pydantic_extra__", None)
    _setattr(obj, "__pydantic_private__", None)
    return obj
