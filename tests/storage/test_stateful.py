"""Stateful ownership test: random borrow/consume/split/group programs against a reference model.

A hypothesis ``RuleBasedStateMachine`` drives random sequences of borrows (``as_view`` /
``as_view_mut`` on owners, slicing and reborrows of views), releases, consuming calls
(``into_storage``, ``take``, duplicate-then-drop, group insert), ``OwnedStorage.split``,
``Tensor.from_storage``, group ``insert``/``alias``/``view``/``view_mut``/``split_mut``/
``try_extract``/``remove``, ``prepare_host``/``prepare_host_mut`` and drops, against a tiny
model of who owns and who borrows which bytes.  After every step:

* every object's read/write permission (probed on the real object) equals the model's;
* no two objects that may write, and no writer and reader, reach one byte of one root;
* ledger live allocations and bytes equal the model's live roots.

Every rule predicts its outcome from the model first; a refused operation must raise the
named error and (checked by the invariants) change nothing.  The brute-force byte sets
double as an oracle for slicing (children stay inside their parent) and ``split_mut``
(accepted children are disjoint; an ``OVERLAP`` refusal names a real shared byte).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import tenferro_storage as ts
from tenferro_storage import AllocationGroup, ledger
from tenferro_storage.errors import (
    BorrowError,
    DisjointCause,
    DisjointViewError,
    ExpiredBorrowError,
    ExtractError,
    GroupError,
    LayoutError,
    TenferroError,
    UseAfterMoveError,
)
from tests.strategies import index_keys

MAX_HELD = 16
KINDS = ("owner", "storage", "group", "view", "mut", "prep_r", "prep_w")
_SPAN = re.compile(r"alloc#(\d+)\[(\d+):(\d+)\)")

Err = type[BaseException] | None


def _outcome(fn: Callable[[], Any]) -> tuple[Any, Err]:
    """Run ``fn``; return (result, None) or (None, the TenferroError type it raised)."""
    try:
        return fn(), None
    except TenferroError as exc:  # the exception (and its traceback) dies here
        return None, type(exc)


def _span(obj: Any) -> tuple[int, int, int]:
    m = _SPAN.fullmatch(obj.span)
    assert m is not None, obj.span
    return int(m[1]), int(m[2]), int(m[3])


def _layout_bytes(
    start: int, item: int, shape: tuple[int, ...], strides: tuple[int, ...], offset: int
) -> tuple[frozenset[int], bool]:
    """The root bytes a layout reaches (brute force) and whether it is write-injective."""
    offs = np.array([offset], dtype=np.int64)
    for n, s in zip(shape, strides, strict=True):
        offs = (offs[:, None] + np.arange(n, dtype=np.int64) * s).ravel()
    listed = offs.tolist()
    reached = frozenset(start + o * item + j for o in listed for j in range(item))
    return reached, len(set(listed)) == len(listed)


def _obj_bytes(obj: Any, start: int) -> frozenset[int]:
    reached, _ = _layout_bytes(start, obj.dtype.itemsize, obj.shape, obj.strides, obj.offset)
    return reached


class Node:
    """Model of one object: its kind, the bytes it reaches, and its borrow cell."""

    def __init__(self, kind: str, obj: Any, root: int, reach: frozenset[int]) -> None:
        self.kind = kind  # owner storage group view mut prep_r prep_w token
        self.obj = obj
        self.root = root
        self.reach = reach  # owner/storage: the claim; borrowers: the layout
        self.layout = reach  # owner: the layout bytes its views reach
        self.start = 0  # claim/span start (bytes)
        self.item = 1  # owner: itemsize of its dtype
        self.held = True
        self.consumed = False
        self.shared = 0
        self.excl: Node | None = None
        self.children = 0  # token only
        self.lender: Node | None = None
        self.exclusive = False
        self.records: dict[int, Rec] = {}  # group only
        self.entries: dict[int, Entry] = {}  # group only
        self.vacant: list[Any] = []  # group only: slots of removed/extracted records


class Entry:
    def __init__(self, root: int, start: int, claim: frozenset[int]) -> None:
        self.root, self.start, self.claim, self.refs = root, start, claim, 1


class Rec:
    def __init__(
        self, slot: Any, entry: int, reach: frozenset[int], injective: bool, item: int
    ) -> None:
        self.slot, self.entry, self.reach = slot, entry, reach
        self.injective, self.item = injective, item


class OwnershipMachine(RuleBasedStateMachine):
    """Random ownership programs; the kernel must agree with the reference model."""

    def __init__(self) -> None:
        super().__init__()
        # A capture sees only this program's roots (not those a failed example left behind).
        self.capture = ledger.capture()
        self.record = self.capture.__enter__()
        self.nodes: list[Node] = []
        self.cap: dict[int, int] = {}

    # -- model helpers ------------------------------------------------------------------
    def held(self, *kinds: str) -> list[Node]:
        return [n for n in self.nodes if n.held and n.kind in kinds]

    def pick(self, data: st.DataObject, nodes: list[Node]) -> Node:
        return nodes[data.draw(st.integers(0, len(nodes) - 1), label="index")]

    def add(self, node: Node, lender: Node | None = None, exclusive: bool = False) -> Node:
        self.nodes.append(node)
        if lender is not None:
            node.lender, node.exclusive = lender, exclusive
            if lender.kind == "token":
                lender.children += 1
            elif exclusive:
                assert lender.excl is None
                lender.excl = node
            else:
                lender.shared += 1
        return node

    def new_root(self, obj: Any, kind: str) -> Node:
        root, start, stop = _span(obj)
        self.cap.setdefault(root, stop - start)
        node = Node(kind, obj, root, frozenset(range(start, stop)))
        node.start = start
        if kind == "owner":
            node.layout = _obj_bytes(obj, start)
            node.item = obj.dtype.itemsize
        return self.add(node)

    def alive(self, n: Node) -> bool:
        return n.held or n.shared > 0 or n.excl is not None or n.children > 0

    def end_borrow(self, b: Node) -> None:
        lender = b.lender
        assert lender is not None
        self.nodes.remove(b)
        b.lender = None
        if lender.kind == "token":
            lender.children -= 1
        elif b.exclusive:
            assert lender.excl is b
            lender.excl = None
        else:
            lender.shared -= 1
        self.collect(lender)

    def collect(self, n: Node) -> None:
        """Model CPython's refcounting: an unreachable borrower ends its borrow."""
        if n not in self.nodes or self.alive(n):
            return
        if n.lender is not None:
            self.end_borrow(n)
        else:
            self.nodes.remove(n)

    def replace(self, old: Node, new: Node) -> None:
        """``new`` takes over ``old``'s borrow (a consuming prepare)."""
        lender = old.lender
        assert lender is not None
        new.lender, new.exclusive = lender, old.exclusive
        if lender.excl is old:
            lender.excl = new
        self.nodes[self.nodes.index(old)] = new
        old.obj, old.lender = None, None

    def consumed(self, data: st.DataObject, n: Node) -> None:
        """Mark ``n`` moved-from; keep the husk around (for later use-after-move probes) or not."""
        n.consumed = True
        if data.draw(st.integers(0, 3), label="keep husk") != 0:
            n.held, n.obj = False, None
            self.nodes.remove(n)

    def live_roots(self) -> set[int]:
        roots: set[int] = set()
        for n in self.nodes:
            if n.kind in ("owner", "storage") and not n.consumed:
                roots.add(n.root)
            elif n.kind == "group":
                roots.update(e.root for e in n.entries.values())
        return roots

    def expect(self, expected: Err, got: Err, what: str) -> None:
        assert got is expected, f"{what}: expected {expected}, got {got}"

    # -- creation -----------------------------------------------------------------------
    @initialize()
    def start(self) -> None:
        """Every program starts from one owner, one storage and one empty group."""
        self.new_root(ts.zeros((2, 3), "float64"), "owner")
        self.new_root(ts.allocate_storage(24), "storage")
        self.add(Node("group", AllocationGroup(), -1, frozenset()))

    @precondition(lambda self: len(self.held(*KINDS)) < MAX_HELD)
    @rule(
        shape=st.lists(st.integers(0, 4), max_size=2).map(tuple),
        dtype=st.sampled_from(("float64", "int32", "bool", "complex64")),
    )
    def new_owner(self, shape: tuple[int, ...], dtype: str) -> None:
        """A fresh owner is one live root whose bytes it alone may write."""
        self.new_root(ts.zeros(shape, dtype), "owner")

    @precondition(lambda self: len(self.held(*KINDS)) < MAX_HELD)
    @rule(nbytes=st.integers(0, 40))
    def new_storage(self, nbytes: int) -> None:
        """allocate_storage makes one live root owned by one OwnedStorage."""
        self.new_root(ts.allocate_storage(nbytes), "storage")

    @precondition(lambda self: len(self.held("group")) < 3)
    @rule()
    def new_group(self) -> None:
        """An empty group owns nothing."""
        self.add(Node("group", AllocationGroup(), -1, frozenset()))

    # -- storage ------------------------------------------------------------------------
    @precondition(lambda self: self.held("storage") and len(self.held(*KINDS)) < MAX_HELD)
    @rule(data=st.data())
    def split_storage(self, data: st.DataObject) -> None:
        """split consumes a storage into two disjoint claims; a bad point changes nothing."""
        s = self.pick(data, self.held("storage"))
        nbytes = len(s.reach)
        at = data.draw(st.integers(0, nbytes + 1), label="at")
        if s.consumed:
            expected: Err = UseAfterMoveError
        else:
            expected = LayoutError if at > nbytes else None
        parts, got = _outcome(lambda: s.obj.split(at))
        self.expect(expected, got, "OwnedStorage.split")
        if parts is None:
            return
        self.consumed(data, s)
        for part in parts:
            self.new_root(part, "storage")
        assert self.nodes[-2].reach | self.nodes[-1].reach == s.reach
        assert not self.nodes[-2].reach & self.nodes[-1].reach

    @precondition(lambda self: self.held("storage"))
    @rule(data=st.data(), too_big=st.booleans())
    def storage_into_tensor(self, data: st.DataObject, too_big: bool) -> None:
        """from_storage consumes the storage; a layout outside the span consumes nothing."""
        s = self.pick(data, self.held("storage"))
        start, nbytes = s.start, len(s.reach)
        dtype = next(
            name
            for name, k in (("float64", 8), ("int32", 4), ("bool", 1))
            if start % k == 0 and nbytes % k == 0
        )
        n = nbytes // ts.dtype(dtype).itemsize + int(too_big)
        expected: Err = UseAfterMoveError if s.consumed else LayoutError if too_big else None
        t, got = _outcome(lambda: ts.Tensor.from_storage(s.obj, dtype=dtype, shape=(n,)))
        self.expect(expected, got, "Tensor.from_storage")
        if t is not None:
            self.consumed(data, s)
            self.new_root(t, "owner")
            del t

    # -- owners -------------------------------------------------------------------------
    @precondition(lambda self: self.held("owner") and len(self.nodes) < 3 * MAX_HELD)
    @rule(data=st.data(), mutable=st.booleans())
    def borrow_owner(self, data: st.DataObject, mutable: bool) -> None:
        """as_view is refused only while mutably borrowed, as_view_mut while borrowed at all."""
        o = self.pick(data, self.held("owner"))
        if o.consumed:
            expected: Err = UseAfterMoveError
        elif o.excl is not None or (mutable and o.shared):
            expected = BorrowError
        else:
            expected = None
        v, got = _outcome(o.obj.as_view_mut if mutable else o.obj.as_view)
        self.expect(expected, got, "as_view_mut" if mutable else "as_view")
        if v is not None:
            node = Node("mut" if mutable else "view", v, o.root, o.layout)
            node.start = o.start
            assert _obj_bytes(v, o.start) == o.layout
            self.add(node, o, mutable)

    @precondition(lambda self: self.held("owner"))
    @rule(data=st.data(), how=st.sampled_from(("into_storage", "take", "duplicate", "insert")))
    def consume_owner(self, data: st.DataObject, how: str) -> None:
        """Consuming a borrowed owner raises BorrowError, a consumed one UseAfterMoveError."""
        o = self.pick(data, self.held("owner"))
        blocked = o.excl is not None if how == "duplicate" else bool(o.shared or o.excl)
        expected: Err = UseAfterMoveError if o.consumed else BorrowError if blocked else None
        if how == "insert":
            groups = self.held("group")
            if not groups:
                return
            g = self.pick(data, groups)
            if g.excl is not None:
                expected = BorrowError  # the group is checked first
            slot, got = _outcome(lambda: g.obj.insert(o.obj))
            self.expect(expected, got, "AllocationGroup.insert")
            if slot is not None:
                self.consumed(data, o)
                e = max(g.entries, default=-1) + 1
                g.entries[e] = Entry(o.root, o.start, o.reach)
                g.records[slot] = Rec(slot, e, o.layout, True, o.item)
            return
        if how == "duplicate":
            before = ledger.live_bytes()
            dup, got = _outcome(o.obj.duplicate)
            self.expect(expected, got, "duplicate")
            if dup is not None:
                assert ledger.live_bytes() == before + dup.nbytes
                del dup
                assert ledger.live_bytes() == before  # the copy's root died with it
            return
        out, got = _outcome(getattr(o.obj, how))
        self.expect(expected, got, how)
        if out is not None:
            self.consumed(data, o)
            self.new_root(out, "storage" if how == "into_storage" else "owner")
            assert self.nodes[-1].reach == o.reach
            del out

    # -- views --------------------------------------------------------------------------
    @precondition(lambda self: self.held("view") and len(self.nodes) < 3 * MAX_HELD)
    @rule(data=st.data(), transpose=st.booleans())
    def derive_view(self, data: st.DataObject, transpose: bool) -> None:
        """Slicing a shared view borrows its lender again and never reaches outside it."""
        v = self.pick(data, self.held("view"))
        if transpose:
            child = v.obj.T
        else:
            child = v.obj[data.draw(index_keys(v.obj.shape), label="key")]
        node = Node("view", child, v.root, _obj_bytes(child, v.start))
        node.start = v.start
        assert node.reach <= v.reach
        assert v.lender is not None
        self.add(node, v.lender, False)

    @precondition(lambda self: self.held("mut") and len(self.nodes) < 3 * MAX_HELD)
    @rule(data=st.data(), how=st.sampled_from(("index", "T", "as_view")))
    def reborrow_mut(self, data: st.DataObject, how: str) -> None:
        """A mutable view lends like an owner: shared as_view, exclusive slices."""
        m = self.pick(data, self.held("mut"))
        blocked = m.excl is not None or (how != "as_view" and m.shared > 0)
        if how == "as_view":
            fn: Callable[[], Any] = m.obj.as_view
        elif how == "T":
            fn = lambda: m.obj.T  # noqa: E731
        else:
            shape, got = _outcome(lambda: m.obj.shape)  # metadata too waits for a mutable child
            self.expect(BorrowError if m.excl is not None else None, got, "TensorViewMut.shape")
            key = data.draw(index_keys(shape), label="key") if shape is not None else ()
            fn = lambda: m.obj[key]  # noqa: E731
        child, got = _outcome(fn)
        self.expect(BorrowError if blocked else None, got, f"TensorViewMut {how}")
        if child is not None:
            kind = "view" if how == "as_view" else "mut"
            node = Node(kind, child, m.root, _obj_bytes(child, m.start))
            node.start = m.start
            assert node.reach <= m.reach
            self.add(node, m, kind == "mut")

    @precondition(lambda self: self.held("owner", "view", "mut"))
    @rule(data=st.data(), write=st.booleans())
    def prepare(self, data: st.DataObject, write: bool) -> None:
        """prepare_host(_mut) carries the borrow on; the consumed view is used-after-move."""
        write = write and bool(self.held("owner", "mut"))
        src = self.pick(
            data, self.held("owner", "mut") if write else self.held("owner", "view", "mut")
        )
        if src.consumed:
            expected: Err = UseAfterMoveError
        elif src.excl is not None or (write and src.shared):
            expected = BorrowError
        else:
            expected = None
        p, got = _outcome(src.obj.prepare_host_mut if write else src.obj.prepare_host)
        self.expect(expected, got, "prepare_host_mut" if write else "prepare_host")
        if p is None:
            return
        node = Node("prep_w" if write else "prep_r", p, src.root, src.layout)
        assert p.as_array().flags.writeable == write
        if src.kind == "owner" or (src.kind == "mut" and not write):
            self.add(node, src, write)
        else:  # a view or mutable view consumed into the prepared access
            husk = src.obj
            self.replace(src, node)
            self.expect(UseAfterMoveError, _outcome(lambda: husk.shape)[1], "consumed view")
            del husk

    @precondition(lambda self: self.held("view", "mut", "prep_r", "prep_w"))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        """release ends a borrow (refused on a reborrowed TensorViewMut); later use expires."""
        b = self.pick(data, self.held("view", "mut", "prep_r", "prep_w"))
        blocked = b.kind == "mut" and (b.shared > 0 or b.excl is not None)
        obj = b.obj
        self.expect(BorrowError if blocked else None, _outcome(obj.release)[1], "release")
        if blocked:
            return
        obj.release()  # idempotent
        self.expect(ExpiredBorrowError, _outcome(lambda: obj.shape)[1], "released borrow")
        b.obj = None
        self.end_borrow(b)

    @precondition(lambda self: self.held(*KINDS))
    @rule(data=st.data())
    def drop(self, data: st.DataObject) -> None:
        """Dropping an object ends its borrows (at once, or when its reborrows end)."""
        n = self.pick(data, [n for n in self.nodes if n.held])
        n.held, n.obj = False, None
        self.collect(n)

    # -- groups -------------------------------------------------------------------------
    def pick_slot(self, data: st.DataObject, g: Node) -> tuple[Any, Rec | None]:
        """A live slot of ``g`` (mostly), a vacant one, or one of another group."""
        choice = data.draw(st.integers(0, 7), label="slot kind")
        foreign = [r.slot for h in self.held("group") if h is not g for r in h.records.values()]
        if choice == 0 and g.vacant:
            return g.vacant[data.draw(st.integers(0, len(g.vacant) - 1))], None
        if choice == 1 and foreign:
            return foreign[data.draw(st.integers(0, len(foreign) - 1))], None
        if not g.records:
            return None, None
        recs = list(g.records.values())
        r = recs[data.draw(st.integers(0, len(recs) - 1), label="record")]
        return r.slot, r

    @precondition(lambda self: self.held("group"))
    @rule(data=st.data(), rank2=st.booleans(), bad_offset=st.booleans())
    def alias(self, data: st.DataObject, rank2: bool, bad_offset: bool) -> None:
        """alias appends a record (refused only while mutably borrowed or out of bounds)."""
        g = self.pick(data, self.held("group"))
        slot, rec = self.pick_slot(data, g)
        if slot is None:
            return
        if rec is None:
            expected: Err = BorrowError if g.excl is not None else GroupError
            self.expect(
                expected,
                _outcome(lambda: g.obj.alias(slot, shape=(1,), strides=(1,)))[1],
                "alias of a bad slot",
            )
            return
        entry = g.entries[rec.entry]
        item = rec.item
        n_elems = len(entry.claim) // item
        rank = 2 if rank2 else 1
        shape = tuple(data.draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank)))
        strides = tuple(data.draw(st.lists(st.integers(-3, 3), min_size=rank, max_size=rank)))
        size = int(np.prod(shape))
        axes = list(zip(shape, strides, strict=True)) if size else []
        neg = sum(s * (k - 1) for k, s in axes if s < 0)
        pos = sum(s * (k - 1) for k, s in axes if s > 0)
        bad_offset = bad_offset and size > 0
        if n_elems == 0:
            return
        if -neg > n_elems - 1 - pos:  # does not fit: fall back to one element
            shape, neg, pos, size = (1,) * rank, 0, 0, 1
        if bad_offset:
            offset = n_elems - pos  # the highest element lands one past the span
        else:
            offset = data.draw(st.integers(-neg, n_elems - 1 - pos), label="offset")
        expected = BorrowError if g.excl is not None else LayoutError if bad_offset else None
        new, got = _outcome(lambda: g.obj.alias(slot, shape=shape, strides=strides, offset=offset))
        self.expect(expected, got, f"alias {shape} {strides} +{offset}")
        if new is not None:
            reach, injective = _layout_bytes(entry.start, item, shape, strides, offset)
            assert reach <= entry.claim
            g.records[new] = Rec(new, rec.entry, reach, injective, item)
            entry.refs += 1

    @precondition(lambda self: self.held("group") and self.held("owner"))
    @rule(data=st.data())
    def insert(self, data: st.DataObject) -> None:
        """insert consumes an unborrowed owner (even while the group is shared-borrowed)."""
        self.consume_owner(data, "insert")

    @precondition(lambda self: self.held("group") and len(self.nodes) < 3 * MAX_HELD)
    @rule(data=st.data(), mutable=st.booleans())
    def group_view(self, data: st.DataObject, mutable: bool) -> None:
        """view needs the group not mutably borrowed; view_mut needs it unborrowed."""
        g = self.pick(data, self.held("group"))
        slot, rec = self.pick_slot(data, g)
        if slot is None:
            return
        if g.excl is not None or (mutable and g.shared):
            expected: Err = BorrowError
        elif rec is None:
            expected = GroupError
        elif mutable and not rec.injective:
            expected = LayoutError
        else:
            expected = None
        v, got = _outcome(lambda: (g.obj.view_mut if mutable else g.obj.view)(slot))
        self.expect(expected, got, "view_mut" if mutable else "view")
        if v is not None:
            assert rec is not None
            entry = g.entries[rec.entry]
            node = Node("mut" if mutable else "view", v, entry.root, rec.reach)
            node.start = entry.start
            assert _obj_bytes(v, entry.start) == rec.reach
            self.add(node, g, mutable)

    @precondition(lambda self: self.held("group") and len(self.nodes) < 3 * MAX_HELD)
    @rule(data=st.data(), n=st.integers(0, 3))
    def split_mut(self, data: st.DataObject, n: int) -> None:
        """split_mut hands out children only when their byte envelopes are disjoint."""
        g = self.pick(data, self.held("group"))
        picks = [self.pick_slot(data, g) for _ in range(n)]
        if any(s is None for s, _ in picks):
            return
        slots = [s for s, _ in picks]
        recs = [r for _, r in picks]
        cause: DisjointCause | None = None
        if g.excl is not None or g.shared:
            expected: Err = BorrowError
        elif any(r is None for r in recs):
            expected, cause = DisjointViewError, DisjointCause.INVALID_SLOT
        elif not all(r.injective for r in recs if r is not None):
            expected, cause = DisjointViewError, DisjointCause.NON_INJECTIVE
        else:
            live = [r for r in recs if r is not None and r.reach]
            env = [(r.entry, min(r.reach), max(r.reach) + 1) for r in live]
            clash = any(
                a[0] == b[0] and a[1] < b[2] and b[1] < a[2]
                for i, a in enumerate(env)
                for b in env[i + 1 :]
            )
            expected = DisjointViewError if clash else None
        err: list[DisjointViewError] = []

        def call() -> Any:
            try:
                return g.obj.split_mut(slots)
            except DisjointViewError as exc:
                err.append(exc)
                raise

        children, got = _outcome(call)
        self.expect(expected, got, "split_mut")
        if err:
            refused = err.pop()
            if cause is not None:
                assert refused.cause is cause
            elif refused.cause is DisjointCause.OVERLAP:  # OVERLAP claims a real shared byte
                live = [r for r in recs if r is not None]
                assert any(
                    a.entry == b.entry and a.reach & b.reach
                    for i, a in enumerate(live)
                    for b in live[i + 1 :]
                )
            else:
                assert refused.cause is DisjointCause.NOT_PROVABLY_DISJOINT
            del refused
        if not children:
            assert children == [] or children is None
            return
        token = self.add(Node("token", None, -1, frozenset()), g, True)
        token.held = False
        proven = [r for r in recs if r is not None]
        for i, a in enumerate(proven):  # brute-force oracle: children never share a byte
            for b in proven[i + 1 :]:
                assert a.entry != b.entry or not a.reach & b.reach
        for child, r in zip(children, recs, strict=True):
            assert r is not None
            entry = g.entries[r.entry]
            node = Node("mut", child, entry.root, r.reach)
            node.start = entry.start
            self.add(node, token, True)
        del children, child

    @precondition(lambda self: self.held("group"))
    @rule(data=st.data(), extract=st.booleans())
    def vacate(self, data: st.DataObject, extract: bool) -> None:
        """try_extract moves a lone injective record's owner out; remove just vacates."""
        g = self.pick(data, self.held("group"))
        slot, rec = self.pick_slot(data, g)
        if slot is None:
            return
        reason = None
        if g.excl is not None or g.shared:
            expected: Err = BorrowError
        elif rec is None:
            expected, reason = (ExtractError, "invalid_slot") if extract else (GroupError, None)
        elif extract and g.entries[rec.entry].refs != 1:
            expected, reason = ExtractError, "aliased"
        elif extract and not rec.injective:
            expected, reason = ExtractError, "non_injective"
        else:
            expected = None
        why: list[str] = []

        def call() -> Any:
            try:
                return (g.obj.try_extract if extract else g.obj.remove)(slot)
            except ExtractError as exc:
                why.append(exc.reason)
                raise

        out, got = _outcome(call)
        self.expect(expected, got, "try_extract" if extract else "remove")
        if reason is not None:
            assert why == [reason]
        if expected is not None:
            return
        assert rec is not None
        del g.records[slot]
        g.vacant.append(slot)
        entry = g.entries[rec.entry]
        entry.refs -= 1
        if entry.refs == 0:
            del g.entries[rec.entry]
        if extract:
            node = self.new_root(out, "owner")
            assert node.reach == entry.claim and node.layout == rec.reach and node.item == rec.item
        del out

    # -- invariants ---------------------------------------------------------------------
    def probe(self, n: Node, obj: Any, access: list[tuple[Node, frozenset[int], bool]]) -> None:
        """Probe what ``obj`` may do; it must match the model. Record what it may reach."""
        if n.consumed:
            attr = "byte_range" if n.kind == "storage" else "shape"
            self.expect(UseAfterMoveError, _outcome(lambda: getattr(obj, attr))[1], "husk")
            return
        can_read = n.excl is None
        can_write = can_read and n.shared == 0
        reach = n.reach
        write: Callable[[], Any] | None
        if n.kind == "owner":
            read, write = (lambda: obj.shape), (lambda: obj.fill(0))
        elif n.kind == "storage":
            assert obj.byte_range == range(min(reach, default=0), max(reach, default=-1) + 1)
            read, write = (lambda: obj.as_ref().release()), (lambda: obj.as_mut().release())
        elif n.kind == "group":
            reach = frozenset().union(*(e.claim for e in n.entries.values()))
            read, write = obj.slots, (lambda: obj.split_mut([]))
            assert len(obj) == len(n.records)
            if can_read:
                assert obj.slots() == [r.slot for r in n.records.values()]
        elif n.kind == "mut":
            read, write = obj.to_numpy, (lambda: obj.fill(0))
        elif n.kind == "view":
            read, write, can_write = obj.to_numpy, None, False
        else:
            arr = obj.as_array()
            assert arr.flags.writeable == (n.kind == "prep_w")
            if n.kind == "prep_w":
                arr[...] = 0
            access.append((n, reach, n.kind == "prep_w"))
            return
        self.expect(None if can_read else BorrowError, _outcome(read)[1], f"{n.kind} read")
        if write is not None:
            self.expect(None if can_write else BorrowError, _outcome(write)[1], f"{n.kind} write")
        if can_read:
            access.append((n, reach, can_write))

    @invariant()
    def permissions_match_the_model_and_never_alias_a_writer(self) -> None:
        """Who may read/write (probed) equals the model; no writer shares a byte with anyone."""
        access: list[tuple[Node, frozenset[int], bool]] = []
        for n in self.held(*KINDS):
            self.probe(n, n.obj, access)
        for i, (a, ra, wa) in enumerate(access):
            for b, rb, wb in access[i + 1 :]:
                if (wa or wb) and a.root == b.root and a.root >= 0:
                    assert not ra & rb, f"a {a.kind} and a {b.kind} share bytes {ra & rb}"
        # groups span several roots: compare their entries' claims with everything else
        for g, _, wg in access:
            if g.kind != "group":
                continue
            for e in g.entries.values():
                for b, rb, wb in access:
                    if b is not g and (wg or wb) and b.root == e.root:
                        assert not e.claim & rb, f"group entry and a {b.kind} share bytes"

    @invariant()
    def ledger_matches_the_model(self) -> None:
        """Ledger live allocations and bytes equal the model's live roots."""
        roots = self.live_roots()
        rec = self.record
        assert sum(rec.allocations.values()) - rec.releases == len(roots)
        assert rec.live_bytes == sum(self.cap[r] for r in roots)

    def teardown(self) -> None:
        """Dropping every object releases every root exactly once."""
        for n in self.nodes:
            n.obj = None
        self.nodes.clear()
        self.capture.__exit__(None, None, None)
        if sys.exc_info()[0] is not None:
            return  # a failing step's traceback keeps its objects alive; report that failure
        rec = self.record
        assert sum(rec.allocations.values()) == rec.releases and rec.live_bytes == 0


TestOwnershipMachine = OwnershipMachine.TestCase
TestOwnershipMachine.settings = settings(
    max_examples=settings().max_examples,  # the loaded profile's: dev 20, ci 100
    stateful_step_count=40,
    deadline=None,
)
