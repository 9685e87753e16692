"""The live public surface both docs checks read: every name in the ``__all__`` of
``tenferro_storage``, ``tenferro_ad`` and each public module they export (read at test time,
so names other branches add are checked without editing this file)."""

from __future__ import annotations

import importlib
import inspect
import types
from collections.abc import Iterator
from typing import Any

PACKAGES = ("tenferro_storage", "tenferro_ad")
#: public modules that are documented API but not in a package's ``__all__``
EXTRA_MODULES = ("tenferro_ad.tree_util",)


def public_modules() -> list[types.ModuleType]:
    """Both packages, every module in their ``__all__``, then :data:`EXTRA_MODULES`."""
    mods: list[types.ModuleType] = []
    for top in PACKAGES:
        pkg = importlib.import_module(top)
        mods.append(pkg)
        for name in pkg.__all__:
            value = getattr(pkg, name)
            if isinstance(value, types.ModuleType) and value not in mods:
                mods.append(value)
    for extra in EXTRA_MODULES:
        mod = importlib.import_module(extra)
        if mod not in mods:
            mods.append(mod)
    return mods


def public_names() -> Iterator[tuple[str, Any]]:
    """``(qualified name, object)`` for every name in every public module's ``__all__``;
    an object exported under several names is yielded once, under its first name."""
    seen: set[int] = set()
    for mod in public_modules():
        for name in getattr(mod, "__all__", ()):
            value = getattr(mod, name)
            if isinstance(value, types.ModuleType) or id(value) in seen:
                continue
            seen.add(id(value))
            yield f"{mod.__name__}.{name}", value


def public_methods() -> Iterator[tuple[str, Any]]:
    """``(qualified name, function)`` for every public method of every public class
    (exception classes excepted): the plain, class and static methods a user reaches on
    the class -- its own and those it inherits from our private bases, not ``object``'s or
    a foreign library's -- without underscore names or properties (reading a field).  A
    function reachable from several classes is yielded once, under its first name."""
    seen: set[int] = set()
    for qualname, cls in public_names():
        if not isinstance(cls, type) or issubclass(cls, BaseException):
            continue
        for name in sorted(dir(cls)):
            if name.startswith("_"):
                continue
            member = inspect.getattr_static(cls, name)
            if isinstance(member, property):
                continue
            func = getattr(member, "__func__", member)
            if not inspect.isfunction(func) or id(func) in seen:
                continue
            if not str(getattr(func, "__module__", "")).startswith(PACKAGES):
                continue
            seen.add(id(func))
            yield f"{qualname}.{name}", func
