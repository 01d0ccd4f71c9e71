"""A script of bench/ loaded as a module, for the tests of its pure parts."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.conftest import REPO


def bench_module(name: str) -> ModuleType:
    """bench/`name`.py, loaded under `name`. It is entered in sys.modules before it runs:
    dataclasses look their module up there while a class is built."""
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
