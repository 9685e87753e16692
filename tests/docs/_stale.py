"""The stale-language check: names the docs mention in code spans must exist.

A code span (Markdown backticks) is checked when it names something, recognized by shape:

- a dotted name whose first part is a package, a public module's own name (``lax.scan``,
  ``sharding.shard``), a usual alias (``ad.grad``, ``rt.engines()``) or a module the page's
  own code blocks import under that name (``from tenferro_storage import sharding as sh``
  makes ``sh.shard(...)`` a module-qualified name) resolves attribute by attribute;
- a dotted name on a value (``grads.take_grad``, ``x.to_numpy()``) names an attribute some
  public class has, or some class a public function returns (``ad.jit``'s ``Jitted``);
- a bare ``CamelCase`` name (a class), an ``UPPER_CASE`` name (an enum member) or ``call()``
  is a public name, a public class's attribute, or a builtin;
- a repository path (``docs/guides/x.md``, ``tests/docs/``) exists;
- ``python -m module`` names an importable module, and ``--flag`` is a flag one of the CLIs
  defines (a ``"--flag"`` literal in ``scripts/`` or a ``__main__``/``demo`` module).

Spans that are code in other libraries (``np.``, ``jax.``, ``torch.``...) and plain words
are not checked.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.docs._surface import public_modules, public_names

ROOT = Path(__file__).resolve().parents[2]
ALIASES = {
    "ad": "tenferro_ad",
    "ts": "tenferro_storage",
    "rt": "tenferro_storage.runtime",
    "ledger": "tenferro_storage.ledger",
    "extend": "tenferro_ad.extend",
    "optim": "tenferro_ad.optim",
    "runtime": "tenferro_storage.runtime",
    "providers": "tenferro_storage.providers",
    "kernel": "tenferro_storage.kernel",
    "traced": "tenferro_ad.traced",
    "tree_util": "tenferro_ad.tree_util",
}
FOREIGN = {"np", "numpy", "jax", "jnp", "torch", "scipy", "pytest", "sys", "os", "math",
           "functools", "typing", "collections", "hypothesis", "matplotlib", "opt_einsum",
           "weakref", "copy", "builtins"}
#: names of other libraries that the comparison pages (for JAX / PyTorch users, the
#: optimizer guide) and the Rust-language analogies mention on purpose
FOREIGN_NAMES = {"RefCell", "RMSprop", "StepLR", "ExponentialLR", "CosineAnnealingLR",
                 "LinearLR", "requires_grad_", "add_", "Re"}
_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = re.compile(rf"^({_IDENT}(?:\.{_IDENT})+)(\(.*\))?$")
_CALL = re.compile(rf"^({_IDENT})\(.*\)$")
_CAMEL = re.compile(r"^_?[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*$|^[A-Z][a-z]+Error$")
_PATH = re.compile(r"^(src|tests|docs|scripts|tutorials|bench|\.ci)/[\w./-]*$")
_FLAG = re.compile(r"^--[a-z][a-z0-9-]*")
_MEMBER = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$")  # an enum member, env var, error code
_PYM = re.compile(rf"^python3? -m ({_IDENT}(?:\.{_IDENT})*)")


def spans(text: str) -> Iterator[str]:
    """The inline code spans of Markdown ``text`` (fenced blocks skipped)."""
    yield from (m.group(1).strip() for m in _SPAN.finditer(_FENCE.sub("", text)))


class Surface:
    """What exists: public names, attributes of public classes, CLI flags."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.attributes: set[str] = set(dir(object))
        for mod in public_modules():
            self.names.add(mod.__name__.rsplit(".", 1)[-1])
        #: public modules by their own name (``lax`` -> ``tenferro_ad.lax``)
        self.modules: dict[str, str] = {
            m.__name__.rsplit(".", 1)[-1]: m.__name__ for m in public_modules()
        }
        for qual, value in public_names():
            self.names.add(qual.rsplit(".", 1)[-1])
            self.names.add(getattr(value, "__name__", ""))
            classes = [value] if isinstance(value, type) else _returned_classes(value)
            for klass in classes:
                self.attributes.update(dir(klass))
                for base in klass.__mro__:
                    self.attributes.update(getattr(base, "__annotations__", {}))
        self.flags: set[str] = set()
        sources = [*ROOT.glob("scripts/**/*.py"), *ROOT.glob("src/**/__main__.py"),
                   *ROOT.glob("src/**/demo.py"), *ROOT.glob("src/**/_runner.py"),
                   *ROOT.glob("src/**/scenarios/__init__.py")]
        for src in sources:
            self.flags.update(re.findall(r"[\"'](--[a-z][a-z0-9-]*)[\"']", src.read_text()))

    def in_code(self, word: str) -> bool:
        """Whether ``word`` occurs in ``src/``, ``scripts/`` or the test harness (not
        ``tests/docs/``): an environment variable the code reads, a code a checker prints."""
        if not hasattr(self, "_code_words"):
            tests = [p for p in ROOT.glob("tests/**/*.py") if "docs" not in p.parts]
            files = [*ROOT.glob("src/**/*.py"), *ROOT.glob("scripts/**/*.py"), *tests]
            self._code_words = set(
                re.findall(r"[A-Z][A-Z0-9_]+", "\n".join(p.read_text() for p in files))
            )
        return word in self._code_words

    def defined_in_src(self, name: str) -> bool:
        """Whether ``name`` is defined (a class or a module-level assignment) anywhere under
        ``src/``: the design notes describe internals as well as the public API."""
        if not hasattr(self, "_src_defs"):
            text = "\n".join(p.read_text() for p in ROOT.glob("src/**/*.py"))
            self._src_defs = set(re.findall(rf"^\s*class ({_IDENT})", text, re.M)) | set(
                re.findall(rf"^({_IDENT})\s*[:=]", text, re.M)
            )
        return name in self._src_defs

    def resolve(self, dotted: str, aliases: dict[str, str] | None = None) -> bool:
        """Whether ``dotted`` (first part a module or alias: ``aliases``, then
        :data:`ALIASES`, then a public module's own name) resolves attribute by attribute."""
        first, *rest = dotted.split(".")
        modname = (aliases or {}).get(first) or ALIASES.get(first) or self.modules.get(
            first, first)
        try:
            obj: Any = importlib.import_module(modname)
        except ImportError:
            return False
        for i, part in enumerate(rest):
            if hasattr(obj, part):
                obj = getattr(obj, part)
                continue
            try:
                obj = importlib.import_module(".".join([modname, *rest[: i + 1]]))
            except ImportError:
                return False
        return True


def _returned_classes(f: Any) -> list[type]:
    """The classes a public function's return annotation names (``Jitted | ShardedJitted``
    for ``ad.jit``): a caller holds their instances, so their attributes are public too.
    Empty for a non-function or an annotation that does not evaluate."""
    if not inspect.isfunction(f):
        return []
    try:
        ret = typing.get_type_hints(f).get("return")
    except Exception:  # a name only imported under TYPE_CHECKING: nothing to learn
        return []
    todo, out = [ret], []
    while todo:
        t = todo.pop()
        if isinstance(t, type) and t.__module__.split(".", 1)[0] in ("tenferro_ad",
                                                                     "tenferro_storage"):
            out.append(t)
        elif isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union:
            todo.extend(typing.get_args(t))
    return out


def problem(
    span: str, surface: Surface, local: set[str] = frozenset(), internals: bool = False,  # type: ignore[assignment]
    aliases: dict[str, str] | None = None,
) -> str | None:
    """Why ``span`` names something that does not exist (``None``: it exists or is not a
    name this check reads).  ``local``: names the page's own code blocks define (an
    example's ``loss``); ``internals``: the page is a design note, which may also name
    what ``src/`` defines internally (its value attributes are not checked); ``aliases``:
    the modules the page's code blocks import, by the name they bind (:func:`imports`)."""
    if m := _PYM.match(span):
        mod = m.group(1)
        return None if surface.resolve(mod) else f"`{span}`: no module {mod!r}"
    if _FLAG.match(span):
        flag = _FLAG.match(span).group(0)  # type: ignore[union-attr]
        return None if flag in surface.flags else f"`{span}`: no CLI defines {flag}"
    if _PATH.match(span):
        path = span.split("::", 1)[0]
        return None if (ROOT / path).exists() else f"`{span}`: no such file in the repository"
    if re.search(r"\.(json|toml|png|md|py|npz|txt|html|zip)$", span):
        return None  # a file name, not a repository path: nothing to resolve
    if m := _DOTTED.match(span):
        dotted = m.group(1)
        first, *rest = dotted.split(".")
        aliases = aliases or {}
        if first in FOREIGN or (first in local and first not in aliases):
            return None
        if first in aliases or first in ALIASES or first in surface.modules or first in (
                "tenferro_ad", "tenferro_storage"):
            ok = surface.resolve(dotted, aliases)
            return None if ok else f"`{span}`: {dotted} does not exist"
        if first[0].isupper() and first in surface.names:  # Class.attribute
            owner = [v for q, v in public_names() if q.rsplit(".", 1)[-1] == first]
            if owner and not all(hasattr(o, rest[0]) for o in owner[:1]):
                return f"`{span}`: {first} has no attribute {rest[0]!r}"
            return None
        last = rest[-1]
        if internals or last in FOREIGN_NAMES:
            return None
        if first[0].islower() and last not in surface.attributes:
            return f"`{span}`: no public class has an attribute {last!r}"
        return None
    if m := _CALL.match(span):
        name = m.group(1)
        if len(name) == 1 or name in local or name in FOREIGN_NAMES:  # O(n), a page's own def
            return None
        ok = name in surface.names or name in surface.attributes or hasattr(builtins, name)
        ok = ok or (internals and surface.defined_in_src(name))
        return None if ok else f"`{span}`: no public function {name!r}"
    if _MEMBER.match(span):
        ok = span in surface.attributes or span in surface.names or surface.in_code(span)
        return None if ok else f"`{span}`: no enum member, variable or code {span!r} exists"
    if _CAMEL.match(span):
        if span in FOREIGN_NAMES or span in local:
            return None
        ok = span in surface.names or span in surface.attributes or hasattr(builtins, span)
        ok = ok or (internals and surface.defined_in_src(span))
        return None if ok else f"`{span}`: no public class {span!r}"
    return None


def doc_files() -> list[Path]:
    """The hand-written Markdown the check reads: the README and ``docs/`` (without the
    generated ``api/`` and ``tutorials/`` pages)."""
    docs = ROOT / "docs"
    out = [ROOT / "README.md"]
    for path in sorted(docs.rglob("*.md")):
        rel = path.relative_to(docs).parts
        if rel[0] not in ("api", "tutorials", "_build"):
            out.append(path)
    return out


_DEFINED = re.compile(rf"^\s*(?:def|class)\s+({_IDENT})|^({_IDENT})\s*(?:,\s*{_IDENT}\s*)*=", re.M)


def local_names(text: str) -> set[str]:
    """The names a Markdown text's own code blocks define (``def f``, ``class C``, ``x =``)."""
    names: set[str] = set()
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M):
        for m in _DEFINED.finditer(block):
            names.add(m.group(1) or m.group(2))
    return names


_IMPORT_AS = re.compile(rf"^\s*import\s+({_IDENT}(?:\.{_IDENT})*)\s+as\s+({_IDENT})", re.M)
_FROM_IMPORT = re.compile(rf"^\s*from\s+({_IDENT}(?:\.{_IDENT})*)\s+import\s+([^\n(]+)$", re.M)


def imports(text: str) -> dict[str, str]:
    """The tenferro modules a Markdown text's code blocks import, by the name they bind:
    ``import tenferro_ad as ad`` and ``from tenferro_storage import sharding as sh`` give
    ``{"ad": "tenferro_ad", "sh": "tenferro_storage.sharding"}``.  A name imported from a
    module that is not a module itself (``from tenferro_ad import grad``) is not one."""
    out: dict[str, str] = {}
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M):
        for m in _IMPORT_AS.finditer(block):
            out[m.group(2)] = m.group(1)
        for m in _FROM_IMPORT.finditer(block):
            for part in m.group(2).split("#", 1)[0].split(","):
                name, _, bound = part.strip().partition(" as ")
                if name.isidentifier():
                    out[(bound or name).strip()] = f"{m.group(1)}.{name}"
    found: dict[str, str] = {}
    for bound, mod in out.items():
        if mod.split(".", 1)[0] not in ("tenferro_ad", "tenferro_storage"):
            continue
        try:
            importlib.import_module(mod)
        except ImportError:
            continue
        found[bound] = mod
    return found


def check_text(text: str, surface: Surface, internals: bool = False) -> list[str]:
    """Every stale name in one Markdown text (``internals``: a design note)."""
    local, aliases = local_names(text), imports(text)
    return [p for s in spans(text)
            if (p := problem(s, surface, local, internals, aliases)) is not None]
