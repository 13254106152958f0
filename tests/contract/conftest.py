"""The contract classes' tests answer to their behaviour's name: ``-k Editing`` selects the
``Editing`` mixin's tests on every backend, as ``-k TestS3`` selects one backend's."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        function = getattr(item, "function", None)
        if function is not None and isinstance(item.parent, pytest.Class):
            item.extra_keyword_matches.add(function.__qualname__.split(".")[0])
