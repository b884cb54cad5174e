"""Telemetry wire format v2: columns over GPUs and ports, keyframes and deltas.

docs/protocol.md ("Telemetry v2") is the description; in short:

* ``"v": 2``, same topic as v1 (a console tells them apart by ``v``);
* ``g`` and ``p`` hold one array per field over the GPUs and the ports (``"util_pct": [..8]``),
  nested ``ecc``/``row_remap``/``nvlink`` flattened to ``"ecc.dbe_vol"``; ``xids`` is a
  per-GPU list; every value is bounded exactly as in v1 (the column types are made from the
  fast Structs' field types, :mod:`fleetdeck.protocol.fast`);
* a keyframe (``kf == seq``) is a whole sample: a column it leaves out holds the field's
  default on every row, and ``g.index`` / ``p.dev`` fix the row count;
* a delta names its keyframe (``kf``) and carries only what differs from that keyframe: the
  columns, and ``agent``/``host``/``job``/``interval_s`` when they differ. A lost delta loses
  nothing; a delta whose keyframe the console lacks cannot be applied (it asks for one, op
  ``keyframe``).

Agents call :class:`TelemetryEncoder`; consoles :func:`decode` and :class:`Reassembler`, which
hands on a full :class:`fast.Telemetry` so the rest of the console sees one type.
"""

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import is_not, itemgetter
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args, get_origin

import msgspec
from msgspec import UNSET, UnsetType
from msgspec.structs import astuple, replace

from fleetdeck.protocol import fast
from fleetdeck.protocol.codec import (
    DEFAULT_MAX_PAYLOAD,
    DecodeError,
    Reason,
    check_u64,
    printable,
)
from fleetdeck.protocol.codec import decode_telemetry as codec_decode_v1

WIRE_MAJOR = 2
MAX_ROWS = 64
"""Column length bound: v1's ``max_length`` on ``gpus`` and ``ib_ports``."""
KEYFRAME_EVERY_S = 30.0
V2_PREFIX = b'{"v":2,'
"""How :class:`TelemetryEncoder` starts every v2 payload: a console's cheap first guess."""

_NESTED: dict[str, type[msgspec.Struct]] = {
    "ecc": fast.Ecc, "row_remap": fast.RowRemap, "nvlink": fast.NvLink,
}


@dataclass(frozen=True, slots=True)
class Column:
    wire: str
    """Name on the wire: ``util_pct``, ``ecc.dbe_vol``."""
    group: str | None
    """The nested Struct it belongs to (``ecc``), or None for a field of the row itself."""
    field: str
    default: Any
    required: bool
    top: int
    """Position of the row's field (for a nested column: of the nested Struct) in the row."""
    sub: int | None
    """Position in the nested Struct, or None."""
    one_type: bool
    """Its values decode as one scalar type or None (``float | None``, never an int beside a
    float: decoding is strict), so equal values are of one type (``_share``)."""


def _one_scalar_type(tp: Any) -> bool:
    """Whether ``tp`` (a field's type) is one of int, float, bool, str, or that or None."""
    members = get_args(tp) if get_origin(tp) in (Union, UnionType) else (tp,)
    kinds = {get_args(m)[0] if get_origin(m) is Annotated else m
             for m in members if m is not type(None)}
    return len(kinds) == 1 and kinds <= {int, float, bool, str}


def _columns_of(cls: type[msgspec.Struct]) -> tuple[Column, ...]:
    out: list[Column] = []
    for i, f in enumerate(msgspec.structs.fields(cls)):
        if f.name in _NESTED:
            out.extend(Column(f"{f.name}.{sub.name}", f.name, sub.name, sub.default, False, i, j,
                              _one_scalar_type(sub.type))
                       for j, sub in enumerate(msgspec.structs.fields(_NESTED[f.name])))
        else:
            default = f.default if f.default_factory is msgspec.NODEFAULT else f.default_factory()
            out.append(Column(f.name, None, f.name, default, f.required, i, None,
                              _one_scalar_type(f.type)))
    return tuple(out)


def _column_types(cls: type[msgspec.Struct]) -> list[tuple[str, Any, Any]]:
    types: dict[str, Any] = {}
    for f in msgspec.structs.fields(cls):
        if f.name in _NESTED:
            types.update({f"{f.name}.{sub.name}": sub.type
                          for sub in msgspec.structs.fields(_NESTED[f.name])})
        else:
            types[f.name] = f.type
    # Attribute names cannot hold a dot; the wire name is given by ``name=``. Columns decode
    # as tuples: a tuple of numbers, strings or ``gc=False`` Structs leaves the GC's view at
    # its first collection, a list never does. A held keyframe per node was ~40 tracked
    # lists, most of what the console's periodic full collection walked at 16,384 nodes
    # (docs/performance.md, "Frozen garbage"). A cell keeps its type (``xids`` a list), so
    # a v2 sample equals the v1 sample it stands for.
    return [(wire.replace(".", "__"),
             Annotated[tuple[t, ...],  # type: ignore[valid-type]
                       msgspec.Meta(max_length=MAX_ROWS)] | UnsetType,
             msgspec.field(default=UNSET, name=wire))
            for wire, t in types.items()]



GPU_COLUMNS = _columns_of(fast.GpuSample)
PORT_COLUMNS = _columns_of(fast.IbPortSample)

if TYPE_CHECKING:
    # Made at run time from the row Structs' fields (below), so a field added to v1 is a v2
    # column at once; to the type checker they are plain Structs.
    GpuColumns = msgspec.Struct
    PortColumns = msgspec.Struct
else:
    GpuColumns = msgspec.defstruct("GpuColumns", _column_types(fast.GpuSample),
                                   frozen=True, gc=False, kw_only=True)
    PortColumns = msgspec.defstruct("PortColumns", _column_types(fast.IbPortSample),
                                    frozen=True, gc=False, kw_only=True)


class TelemetryV2(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """One v2 telemetry message, keyframe or delta (validated, not yet merged)."""

    v: Literal[2]
    node: fast.Id
    seq: fast.U64
    bdSeq: fast.U64
    ts: fast.TsMs
    kf: fast.U64
    """``seq`` of the keyframe this message is relative to; ``kf == seq``: a keyframe."""
    interval_s: fast.Interval | UnsetType = UNSET
    agent: fast.AgentInfo | UnsetType = UNSET
    job: fast.JobOnNode | UnsetType | None = UNSET
    host: fast.HostSample | UnsetType = UNSET
    g: GpuColumns | UnsetType = UNSET
    p: PortColumns | UnsetType = UNSET

    @property
    def keyframe(self) -> bool:
        return self.kf == self.seq


_DECODER = msgspec.json.Decoder(TelemetryV2)


def decode(payload: bytes, max_size: int = DEFAULT_MAX_PAYLOAD) -> TelemetryV2:
    """Validate a v2 payload: types and bounds as v1, equal column lengths, a sane ``kf``.

    Raises :class:`DecodeError` (``oversize``, ``not_json``, ``invalid`` with ``loc: msg``)."""
    if len(payload) > max_size:
        raise DecodeError(Reason.OVERSIZE, f"{len(payload)} bytes > limit {max_size}")
    try:
        msg = _DECODER.decode(printable(payload))
    except msgspec.ValidationError as err:
        raise DecodeError(Reason.INVALID, _loc_msg(str(err))) from None
    except msgspec.DecodeError:
        raise DecodeError(Reason.NOT_JSON, "payload is not valid JSON") from None
    if msg.kf > msg.seq:
        raise DecodeError(Reason.INVALID, f"kf: keyframe {msg.kf} is after seq {msg.seq}")
    if msg.keyframe:
        _check_keyframe(msg.g, GPU_COLUMNS, "g")
        _check_keyframe(msg.p, PORT_COLUMNS, "p")
    return msg


def decode_telemetry(payload: bytes,
                     max_size: int = DEFAULT_MAX_PAYLOAD) -> fast.Telemetry | TelemetryV2:
    """v1 or v2 telemetry, told apart by ``v``: a v1 sample as a fast Struct, a v2 message
    still to be merged (:class:`Reassembler`). Raises :class:`DecodeError`."""
    if payload.startswith(V2_PREFIX):
        return decode(payload, max_size)
    try:
        return codec_decode_v1(payload, max_size)
    except DecodeError as err:
        # Rare: a v2 payload written by another encoder (spaces, another key order).
        if err.reason is Reason.UNKNOWN_VERSION and _major(payload) == WIRE_MAJOR:
            return decode(payload, max_size)
        raise


def _major(payload: bytes) -> object:
    try:
        raw = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    return raw.get("v") if isinstance(raw, dict) else None


def _loc_msg(text: str) -> str:
    # msgspec: "Expected `float` <= 100.0 - at `$.g.util_pct[1]`" -> "g.util_pct.1: Expected..."
    msg, sep, at = text.rpartition(" - at `")
    if not sep:
        return text
    loc = at.rstrip("`").removeprefix("$").lstrip(".").replace("[", ".").replace("]", "")
    return f"{loc or '(payload)'}: {msg}"


_Present = list[tuple["Column", Sequence[Any]]]
"""The columns a message carries, with their values (one per row)."""
_Values = tuple[Any, ...]
"""A delta's columns of one kind in column order, UNSET where it leaves one out."""
_ABSENT = {id(spec): (UNSET,) * len(spec) for spec in (GPU_COLUMNS, PORT_COLUMNS)}
"""The column tuple of a delta that carries no columns of that kind (``g`` or ``p``)."""
_REQUIRED = {id(spec): tuple(i for i, c in enumerate(spec) if c.required)
             for spec in (GPU_COLUMNS, PORT_COLUMNS)}
"""Positions of the columns a keyframe must carry (``g.index``, ``p.dev``), in column order."""


def _present(cols: msgspec.Struct | UnsetType,
             spec: tuple[Column, ...]) -> _Present:
    if cols is UNSET:
        return []
    return _present_of(astuple(cols), spec)


def _check_keyframe(cols: msgspec.Struct | UnsetType, spec: tuple[Column, ...],
                    where: str) -> None:
    """A keyframe's columns of one kind: none at all (no rows), or every required one, whose
    length is the row count, and every other one as long."""
    if cols is UNSET:
        return
    values = astuple(cols)
    if values.count(UNSET) == len(values):
        return
    required = _REQUIRED[id(spec)]
    for i in required:
        if values[i] is UNSET:
            raise DecodeError(Reason.INVALID, f"{where}.{spec[i].wire}: a keyframe needs it")
    _check_rows(values, spec, len(values[required[0]]), where)


def _check_rows(values: "_Values", spec: tuple[Column, ...], n: int, where: str) -> None:
    """Every column present in ``values`` holds ``n`` values (one per row). In C for the
    common case: UNSET is falsy, so is an empty column, every other one is a list; a Python
    loop over ~45 columns cost ~3 µs a message (~70 columns a keyframe)."""
    present = list(filter(None, values))
    if len(present) + values.count(UNSET) != len(values) or set(map(len, present)) - {n}:
        for c, v in zip(spec, values, strict=True):
            if v is not UNSET and len(v) != n:
                raise DecodeError(Reason.INVALID, f"{where}.{c.wire}: {len(v)} values, "
                                                  f"expected {n} (one per row)")


def _checked(cols: msgspec.Struct | UnsetType, spec: tuple[Column, ...]) -> tuple[_Present, int]:
    """A keyframe's columns and row count, as :func:`decode` checked them: every
    column holds one value per row, so any of them gives the count."""
    present = _present(cols, spec)
    return present, len(present[0][1]) if present else 0


class _Table(msgspec.Struct, gc=False):
    """One keyframe's rows as columns, ready for positional construction: ``top`` per field of
    the row Struct (nested ones as columns of Structs), ``nested`` per field of those.

    Held per node until its next keyframe, so it is no object the GC tracks: a ``gc=False``
    Struct of tuples (docs/performance.md, "Frozen garbage"). ``top`` is a ``gc=False`` Struct
    too (:data:`_TOP`; read a column with :func:`_top`), not a tuple: a collection looks at a
    tuple before the tuples only it holds, so a keyframe's ``top`` stayed tracked after the
    collection that untracked its columns, frozen so until the next sweep; with a column of
    lists or dicts in it (``xids``, a port's ``d``), for ever. Two a node, ~30 references
    each, were 1.06 of the 1.41 million references a full sweep followed at 16,384 nodes
    (docs/performance.md, "Out of the collector's view")."""

    n: int
    top: msgspec.Struct
    nested: dict[int, tuple[Sequence[Any], ...]]


def _top_struct(cls: type[msgspec.Struct]) -> type[msgspec.Struct]:
    # Named as the module attribute it is bound to below: a replay's seek snapshot pickles
    # the held tables (docs/performance.md, "Out of the collector's view").
    return msgspec.defstruct(f"_{cls.__name__}Top", [(f, Any) for f in cls.__struct_fields__],
                             gc=False, module=__name__)


_GpuSampleTop = _top_struct(fast.GpuSample)
_IbPortSampleTop = _top_struct(fast.IbPortSample)
_TOP: dict[type[Any], type[msgspec.Struct]] = {
    fast.GpuSample: _GpuSampleTop, fast.IbPortSample: _IbPortSampleTop}
"""Per row Struct, the ``gc=False`` Struct a table holds its top columns in (field for field)."""


def _top(base: _Table, i: int) -> Sequence[Any]:
    """Column ``i`` of ``base.top``."""
    return getattr(base.top, base.top.__struct_fields__[i])  # type: ignore[no-any-return]


_NESTED_AT: dict[type[Any], dict[int, type[msgspec.Struct]]] = {
    cls: {i: _NESTED[f.name] for i, f in enumerate(msgspec.structs.fields(cls))
          if f.name in _NESTED}
    for cls in (fast.GpuSample, fast.IbPortSample)
}


_EMPTY: dict[tuple[type[Any], int], _Table] = {}


def _empty(cls: type[msgspec.Struct], n: int) -> _Table:
    """Every field at its default on ``n`` rows (what a keyframe leaves out); shared, never
    changed (:func:`_merge` copies)."""
    table = _EMPTY.get((cls, n))
    if table is None:
        table = _EMPTY[cls, n] = _defaults(cls, n)
    return table


def _defaults(cls: type[msgspec.Struct], n: int) -> _Table:
    top: list[Sequence[Any]] = []
    nested: dict[int, tuple[Sequence[Any], ...]] = {}
    for i, f in enumerate(msgspec.structs.fields(cls)):
        default = f.default if f.default_factory is msgspec.NODEFAULT else f.default_factory()
        top.append((default,) * n)
        if f.name in _NESTED:
            nested[i] = tuple((sf.default,) * n for sf in msgspec.structs.fields(_NESTED[f.name]))
    return _Table(n, _TOP[cls](*top), nested)


_SHAREABLE = frozenset({int, float, str, bool, type(None), fast.Ecc, fast.RowRemap, fast.NvLink})
_NUMBERS = frozenset({int, float, bool})
_SHARED: dict[tuple[Any, ...], Sequence[Any]] = {}
_SHARED_MAX = 65_536


def _share(col: Sequence[Any], one_type: bool = False) -> Sequence[Any]:
    """One tuple for every column that holds one value on every row (most columns of a keyframe:
    counters at 0, link state, rates, inventory-like fields), shared by all nodes: a held
    keyframe per node was ~19 KB, 54 of its 72 columns constant (issue 12: RSS at 16,384
    nodes). Only immutable values; their type is part of the key (``1``, ``1.0`` and ``True``
    are equal), as is the sign of a zero. ``one_type``: the column's values are all of one type
    when equal (``Column.one_type``): the check by type, half of this, is left out."""
    n = len(col)
    if not n:
        return col
    v = col[0]
    t = type(v)
    if t not in _SHAREABLE or col.count(v) != n:
        return col
    # Equal is not enough for numbers: 1 == 1.0 == True, and 0.0 == -0.0 (C-level checks only:
    # a keyframe has ~70 columns).
    if t in _NUMBERS and not one_type and len(set(map(type, col))) != 1:
        return col
    sign = 0.0
    if t is float:
        sign = math.copysign(1.0, v)
        if v == 0.0 and len(set(map(math.copysign, repeat(1.0, n), col))) != 1:
            return col
    key = (t, v, n, sign)
    hit = _SHARED.get(key)
    if hit is None:
        if len(_SHARED) >= _SHARED_MAX:
            _SHARED.clear()  # values come from the network: never grow without bound
        hit = _SHARED[key] = (v,) * len(col)
    return hit


def _merge(cls: type[Any], base: _Table,
           present: _Present) -> tuple[tuple[Any, ...], _Table]:
    """Rows from ``base`` with the ``present`` columns in place of its own, and their table
    (a keyframe's, held: its columns as tuples; a delta needs only :func:`_rows`)."""
    top, changed = _columns(cls, base, present)
    nested = base.nested
    if changed is not None:
        nested = _intern_nested(
            {**base.nested, **{ti: tuple(cols) for ti, cols in changed.items()}})
    for i in _INTERNED_AT[cls]:
        top[i] = _intern(top[i])
    return tuple(map(cls, *top)), _Table(base.n, _TOP[cls](*top), nested)


_INTERNED: dict[Any, Any] = {}
"""Held values equal on many nodes though not constant within a column: a GPU ``index``
column ``(0, …, 7)``, a port ``dev`` column, a keyframe's nested columns (ECC, row remap,
NVLink; nearly always the same). One object for every node that holds an equal one: each was
a container made with its keyframe and frozen before any collection looked at it, ~8 of the
references a live sweep followed a node (docs/performance.md, "Counters kept while they stand
still"). Equal is enough here: decoding is strict, so an equal column at the same place holds
values of the same types (no ``1`` for ``True`` or ``1.0``)."""

_INTERNED_AT: dict[type[Any], tuple[int, ...]] = {
    cls: tuple(i for i, f in enumerate(msgspec.structs.fields(cls)) if f.name in ("index", "dev"))
    for cls in (fast.GpuSample, fast.IbPortSample)
}
"""Per row Struct, its top columns interned (:data:`_INTERNED`)."""


def _intern(value: Any) -> Any:
    hit = _INTERNED.get(value)
    if hit is None:
        if len(_INTERNED) >= _SHARED_MAX:
            _INTERNED.clear()  # values come from the network: never grow without bound
        hit = _INTERNED[value] = value
    return hit


def _intern_nested(nested: dict[int, tuple[Sequence[Any], ...]]
                   ) -> dict[int, tuple[Sequence[Any], ...]]:
    """``nested``, or an equal dict already held (never changed in place: :func:`_columns`
    copies). Only when every column in it holds one value on every row, as nearly always: a
    node whose ECC or NVLink counters grow made a new entry at every keyframe, kept after its
    table was replaced until the cache filled (~75 MB at 65,536 entries, a review)."""
    for cols in nested.values():
        for col in cols:
            if col and col.count(col[0]) != len(col):
                return nested
    key = ("nested", *nested.items())
    hit = _INTERNED.get(key)
    if hit is None:
        if len(_INTERNED) >= _SHARED_MAX:
            _INTERNED.clear()
        hit = _INTERNED[key] = nested
    return hit


def _rows(cls: type[Any], base: _Table, present: _Present) -> tuple[Any, ...]:
    """:func:`_merge`'s rows without the table: a delta's table is never held."""
    return tuple(map(cls, *_columns(cls, base, present)[0]))


def _columns(cls: type[Any], base: _Table, present: _Present
             ) -> tuple[list[Sequence[Any]], dict[int, list[Sequence[Any]]] | None]:
    """``base``'s top columns with the ``present`` ones in their place (nested ones rebuilt
    as columns of Structs), and the nested columns that changed.

    Positional construction from the columns: one C call per row, however many fields
    changed (``structs.replace`` with keywords cost ~2 µs a row), and ``map`` over the columns
    builds no argument tuple in Python (~25 % less than a comprehension over ``zip``). The
    columns all hold ``base.n`` values (checked by :func:`decode`). No validation: the columns
    were decoded strictly and the rows are made from nothing else."""
    top: list[Any] = list(astuple(base.top))
    changed: dict[int, list[Sequence[Any]]] | None = None
    for c, v in present:
        if c.sub is None:
            top[c.top] = v
        else:
            if changed is None:
                changed = {}
            if c.top not in changed:
                changed[c.top] = list(base.nested[c.top])
            changed[c.top][c.sub] = v
    if changed is not None:
        makers = _NESTED_AT[cls]
        for ti, cols in changed.items():
            top[ti] = _share(tuple(map(makers[ti], *cols)))
    return top, changed

Basis = tuple[int, int, bool]
"""``(bdSeq, kf, quiet)``: a sample's keyframe, and whether every column that differs from that
keyframe is quiet (``Reassembler(quiet_gpu=…, quiet_port=…)``). Two samples on one keyframe that
are both quiet hold equal values in every other column: a caller whose rules read only those
need not run them again (docs/protocol.md)."""


class _Held(msgspec.Struct, gc=False):
    bd_seq: int
    kf: int
    tel: fast.Telemetry
    """The keyframe without its rows (``gpus``/``ib_ports`` empty): those are the tables."""
    gpus: _Table
    ports: _Table


_GPU_AT = {c.wire: i for i, c in enumerate(GPU_COLUMNS)}
_PORT_AT = {c.wire: i for i, c in enumerate(PORT_COLUMNS)}



class Pending(msgspec.Struct, gc=False):
    """A quiet delta's sample with its rows not built yet (``Reassembler(lazy=True)``).

    The header (``node``, ``seq``, ``ts``, ``agent``, …) is there at once, a column of the rows
    costs a lookup (:meth:`gpu_column`), and :meth:`full` builds the :class:`fast.Telemetry` once,
    when something reads the rows. A console whose rules skip quiet samples need not build 16
    rows a sample, nor free them a second later (issue 12; docs/protocol.md "Telemetry v2").

    A Struct with ``gc=False``: it holds Structs that are themselves ``gc=False`` and tuples of
    cells, so it can be in no reference cycle, and each node's latest sample (and the tuple a
    console caches its figures in, ``NodeState.metered``) was one more object each GC sweep
    walked (docs/performance.md, "Fewer objects for the GC to walk")."""

    head: fast.Telemetry
    """The sample without its rows (``gpus``/``ib_ports`` empty)."""
    # The keyframe's tables and the delta's columns as decoded (``GpuColumns``/``PortColumns``,
    # UNSET where it carries none), in fields of their own: a tuple of each pair was two more
    # objects per sample for the GC to walk. The decoded Structs, not a tuple of their
    # columns: a collection looks at a tuple before the tuples only it holds, so such a tuple
    # stayed tracked, frozen so until the next sweep (docs/performance.md, "Out of the
    # collector's view").
    _gtab: _Table
    _gcols: msgspec.Struct | UnsetType
    _ptab: _Table
    _pcols: msgspec.Struct | UnsetType
    _tel: fast.Telemetry | None = None

    @property
    def node(self) -> str:
        return self.head.node

    @property
    def seq(self) -> int:
        return self.head.seq

    @property
    def bdSeq(self) -> int:
        return self.head.bdSeq

    @property
    def ts(self) -> int:
        return self.head.ts

    @property
    def interval_s(self) -> float:
        return self.head.interval_s

    @property
    def agent(self) -> fast.AgentInfo:
        return self.head.agent

    @property
    def job(self) -> fast.JobOnNode | None:
        return self.head.job

    @property
    def host(self) -> fast.HostSample:
        return self.head.host

    @property
    def gpus(self) -> tuple[fast.GpuSample, ...]:
        return self.full().gpus

    @property
    def ib_ports(self) -> tuple[fast.IbPortSample, ...]:
        return self.full().ib_ports

    @property
    def built(self) -> bool:
        return self._tel is not None

    def __eq__(self, other: object) -> bool:
        """Equal to the sample it stands for (its rows are built to compare)."""
        if isinstance(other, Pending):
            other = other.full()
        if not isinstance(other, fast.Telemetry):
            return NotImplemented
        return self.full() == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Pending({self.full()!r})"

    def full(self) -> fast.Telemetry:
        tel = self._tel
        if tel is None:
            tel = self._tel = replace(
                self.head,
                gpus=_rows(fast.GpuSample, self._gtab, _present(self._gcols, GPU_COLUMNS)),
                ib_ports=_rows(fast.IbPortSample, self._ptab,
                               _present(self._pcols, PORT_COLUMNS)))
            self._gcols = self._pcols = UNSET  # the rows hold the values now
        return tel

    def gpu_column(self, wire: str) -> Sequence[Any]:
        """One GPU column (``"temp_c"``, ``"ecc.dbe_vol"``) in row order, without the rows."""
        i = _GPU_AT[wire]
        if self._tel is not None:
            return [_value(g, GPU_COLUMNS[i]) for g in self._tel.gpus]
        return _column(self._gtab, self._gcols, GPU_COLUMNS[i], i)

    def gpu_columns(self, *wires: str) -> list[Sequence[Any]]:
        """Several GPU columns at once, as :meth:`gpu_column` gives each (the console's
        history reads five of every quiet sample: one call, not five)."""
        if self._tel is not None:
            return [self.gpu_column(w) for w in wires]
        base, cols = self._gtab, self._gcols
        out: list[Sequence[Any]] = []
        for w in wires:
            i = _GPU_AT[w]
            v = UNSET if cols is UNSET else getattr(cols, cols.__struct_fields__[i])
            if v is UNSET:
                c = GPU_COLUMNS[i]
                v = _top(base, c.top) if c.sub is None else base.nested[c.top][c.sub]
            out.append(v)
        return out

    def port_column(self, wire: str) -> Sequence[Any]:
        """One IB port column in row order, without the rows."""
        i = _PORT_AT[wire]
        if self._tel is not None:
            return [_value(p, PORT_COLUMNS[i]) for p in self._tel.ib_ports]
        return _column(self._ptab, self._pcols, PORT_COLUMNS[i], i)


Sample = fast.Telemetry | Pending
"""What a console's ingest hands on for one telemetry message: a sample, or a quiet one whose
rows are built when first read."""


def rows_of(sample: Sample) -> tuple[int, int]:
    """(GPU rows, IB port rows) of a sample, without building a Pending's rows."""
    if type(sample) is Pending:
        return len(sample.gpu_column("index")), len(sample.port_column("dev"))
    return len(sample.gpus), len(sample.ib_ports)


def full(sample: Sample) -> fast.Telemetry:
    """The sample with its rows."""
    return sample.full() if type(sample) is Pending else sample  # type: ignore[return-value]


def _value(row: msgspec.Struct, col: Column) -> Any:
    value = getattr(row, col.group or col.field)
    return getattr(value, col.field) if col.group else value


def _column(base: _Table, cols: msgspec.Struct | UnsetType, col: Column,
            i: int) -> Sequence[Any]:
    """Column ``col`` (``i``-th of its spec) of a delta's sample: the delta's (``cols``, as
    decoded), or its keyframe's."""
    v = UNSET if cols is UNSET else getattr(cols, cols.__struct_fields__[i])
    if v is not UNSET:
        return v  # type: ignore[no-any-return]
    return _top(base, col.top) if col.sub is None else base.nested[col.top][col.sub]


class Reassembler:
    """The console's side: the latest keyframe per node, and deltas merged into it."""

    def __init__(self, quiet_gpu: frozenset[str] = frozenset(),
                 quiet_port: frozenset[str] = frozenset(), lazy: bool = False) -> None:
        self._held: dict[str, _Held] = {}
        self.lazy = lazy
        """A quiet delta comes back as a :class:`Pending` (its rows built when first read)."""
        # A delta's loud columns, picked out of its column tuple in C (absent ones are UNSET).
        self._loud_gpu = _picker(tuple(i for i, c in enumerate(GPU_COLUMNS)
                                       if c.wire not in quiet_gpu))
        self._loud_port = _picker(tuple(i for i, c in enumerate(PORT_COLUMNS)
                                        if c.wire not in quiet_port))
        self.basis: Basis | None = None
        """Of the sample the last ``apply`` returned: which keyframe it rests on and whether
        it moved only the caller's quiet columns (``quiet_gpu``/``quiet_port``) away from it."""

    def __len__(self) -> int:
        return len(self._held)

    def holds(self, node: str) -> tuple[int, int] | None:
        """(bdSeq, kf) of the keyframe held for ``node``."""
        h = self._held.get(node)
        return None if h is None else (h.bd_seq, h.kf)

    def forget(self, node: str) -> None:
        self._held.pop(node, None)

    def apply(self, msg: TelemetryV2, payload: bytes) -> "fast.Telemetry | Pending | None":
        """The full sample ``msg`` (from :func:`decode`) stands for, or None: a delta whose
        keyframe is not held.
        With ``lazy``, a quiet delta's sample is a :class:`Pending`.

        Raises :class:`DecodeError` for a delta that does not fit its keyframe (column lengths)
        or a value out of a u64; nothing is kept from a rejected message."""
        if msg.keyframe:
            # decode() checked the columns (a keyframe's were ~16 µs to check again).
            gpus_p, n_gpus = _checked(msg.g, GPU_COLUMNS)
            ports_p, n_ports = _checked(msg.p, PORT_COLUMNS)
            # The keyframe is held until the next one (30 s): its constant columns are shared.
            gpus_p = [(c, _share(v, c.one_type)) for c, v in gpus_p]
            ports_p = [(c, _share(v, c.one_type)) for c, v in ports_p]
            gpus, gtab = _merge(fast.GpuSample, _empty(fast.GpuSample, n_gpus), gpus_p)
            ports, ptab = _merge(fast.IbPortSample, _empty(fast.IbPortSample, n_ports), ports_p)
            tel = fast.Telemetry(
                node=msg.node, seq=msg.seq, bdSeq=msg.bdSeq, ts=msg.ts,
                interval_s=1.0 if msg.interval_s is UNSET else msg.interval_s,
                agent=fast.AgentInfo() if msg.agent is UNSET else msg.agent,
                job=None if msg.job is UNSET else msg.job,
                host=fast.HostSample() if msg.host is UNSET else msg.host,
                gpus=gpus, ib_ports=ports,
            )
            check_u64(tel, payload)
            h = self._held.get(msg.node)
            if h is None or (msg.bdSeq, msg.seq) >= (h.bd_seq, h.kf):
                # Rows are kept as columns only (they share their values with the sample):
                # 16,384 held keyframes must not double the fleet's memory. No rows is ``()``,
                # not two empty lists per node for the GC to walk.
                self._held[msg.node] = _Held(msg.bdSeq, msg.seq,
                                             replace(tel, gpus=(), ib_ports=()), gtab, ptab)
            self.basis = (msg.bdSeq, msg.seq, True)
            return tel
        h = self._held.get(msg.node)
        if h is None or h.bd_seq != msg.bdSeq or h.kf != msg.kf:
            return None
        gvals = _delta_values(msg.g, GPU_COLUMNS, h.gpus.n, "g")
        pvals = _delta_values(msg.p, PORT_COLUMNS, h.ports.n, "p")
        loud_g, loud_p = self._loud_gpu(gvals), self._loud_port(pvals)
        quiet = (loud_g.count(UNSET) == len(loud_g)
                 and loud_p.count(UNSET) == len(loud_p))
        if (msg.interval_s is UNSET and msg.agent is UNSET and msg.job is UNSET
                and msg.host is UNSET):
            head = replace(h.tel, seq=msg.seq, ts=msg.ts)
        else:
            head = _with_top(h.tel, msg)
        out: fast.Telemetry | Pending
        if quiet and self.lazy and not fast.may_hold_big_int(payload):
            # Nothing to check a u64 against without the rows is the common case: a payload
            # with no 20-digit run holds no integer above 2**64-1 (check_u64).
            out = Pending(head, h.gpus, msg.g, h.ports, msg.p)
        else:
            out = replace(head,
                          gpus=_rows(fast.GpuSample, h.gpus, _present_of(gvals, GPU_COLUMNS)),
                          ib_ports=_rows(fast.IbPortSample, h.ports,
                                         _present_of(pvals, PORT_COLUMNS)))
            check_u64(out, payload)
        self.basis = (msg.bdSeq, msg.kf, quiet)
        return out


def _with_top(tel: fast.Telemetry, msg: TelemetryV2) -> fast.Telemetry:
    """``tel`` with the delta's ``seq`` and ``ts`` and the top-level fields it carries (those
    that differ from its keyframe): one ``replace``."""
    kw: dict[str, Any] = {"seq": msg.seq, "ts": msg.ts}
    if msg.interval_s is not UNSET:
        kw["interval_s"] = msg.interval_s
    if msg.agent is not UNSET:
        kw["agent"] = msg.agent
    if msg.job is not UNSET:
        kw["job"] = msg.job
    if msg.host is not UNSET:
        kw["host"] = msg.host
    return replace(tel, **kw)


def _delta_values(cols: msgspec.Struct | UnsetType, spec: tuple[Column, ...], n: int,
                  where: str) -> _Values:
    """A delta's columns as a tuple in ``spec`` order (UNSET where absent), each present one
    checked to hold one value per row of its keyframe (``n``).

    A tuple, not a list of the present columns: a column is then one index away
    (``_column``), and which loud columns it moves is picked in C (``Reassembler``); building
    the present list and a mask of ~45 flags cost ~4 µs a delta (docs/performance.md, "Branch
    `replay100`")."""
    if cols is UNSET:
        return _ABSENT[id(spec)]
    values = astuple(cols)
    _check_rows(values, spec, n, where)
    return values


def _present_of(values: _Values, spec: tuple[Column, ...]) -> _Present:
    """The present columns of a column tuple (UNSET where absent), with their values: most of
    the ~40 columns are absent from a delta, selected without a Python loop."""
    return list(compress(zip(spec, values, strict=True), map(is_not, values, repeat(UNSET))))


def _picker(indices: tuple[int, ...]) -> Callable[[_Values], tuple[Any, ...]]:
    """The values at ``indices`` of a column tuple, always as a tuple (itemgetter gives a
    single value for one index)."""
    if len(indices) >= 2:
        return itemgetter(*indices)
    if indices:
        i = indices[0]
        return lambda values: (values[i],)
    return lambda values: ()


# --- the agent's side ---------------------------------------------------------------------------

_GPU_FIELDS = tuple(f.name for f in msgspec.structs.fields(fast.GpuSample))
_PORT_FIELDS = tuple(f.name for f in msgspec.structs.fields(fast.IbPortSample))
_GPU_NESTED = tuple((i, name) for i, name in enumerate(_GPU_FIELDS) if name in _NESTED)
_PORT_NESTED = tuple((i, name) for i, name in enumerate(_PORT_FIELDS) if name in _NESTED)
"""Where a row's nested Structs are (position, field): the columns expanded in their place."""


_Nested = dict[str, tuple[tuple[Any, ...], list[tuple[Any, ...]]]]
"""Per nested field: its column of Structs and that column expanded (``ecc.dbe_vol``, …)."""


Columns = list[tuple[Any, ...]]
"""A sample's rows of one kind (GPUs, IB ports) as columns: one tuple per field of the row
Struct, in its field order (:data:`GPU_FIELDS`, :data:`PORT_FIELDS`), a nested field as a
column of its Structs; no rows is ``[]``. What :meth:`TelemetryEncoder.encode_columns` takes
from a source that makes its columns itself (the simulator, agents/sim/node.py)."""

GPU_FIELDS = _GPU_FIELDS
PORT_FIELDS = _PORT_FIELDS
"""The row Structs' field names in order: the columns of :data:`Columns`."""


def columns_of(rows: Sequence[msgspec.Struct]) -> Columns:
    """Rows as :data:`Columns`, transposed in C (``zip``)."""
    return list(zip(*map(astuple, rows), strict=True)) if rows else []


_PADS: dict[tuple[type[Any], int, int], Columns] = {}


def default_columns(cls: type[msgspec.Struct], start: int, n: int) -> Columns:
    """The :data:`Columns` of ``cls``'s fields from position ``start`` on, each at its default
    on ``n`` rows: what a source that makes only the leading fields appends. Shared: never
    change one in place, nor what a column holds (a field whose default is a factory, a
    port's ``errors_1h`` dict, has one dict on every row of every node here, where rows built
    as Structs have one each)."""
    pad = _PADS.get((cls, start, n))
    if pad is None:
        pad = _PADS[cls, start, n] = list(astuple(_empty(cls, n).top)[start:])
    return pad


def rows_from(cls: type[msgspec.Struct], cols: Columns) -> tuple[Any, ...]:
    """:data:`Columns` back as rows of ``cls`` (positionally, as :func:`_merge`)."""
    return tuple(map(cls, *cols)) if cols else ()


def _table(rows: Sequence[msgspec.Struct], nested_at: tuple[tuple[int, str], ...],
           known: _Nested | None = None) -> tuple[list[tuple[Any, ...]], _Nested]:
    """Column tuples in :data:`GPU_COLUMNS`/:data:`PORT_COLUMNS` order of ``rows``
    (:func:`_expand`)."""
    return _expand(columns_of(rows), nested_at, known)


def _expand(cols: Columns, nested_at: tuple[tuple[int, str], ...],
            known: _Nested | None = None) -> tuple[list[tuple[Any, ...]], _Nested]:
    """Column tuples in :data:`GPU_COLUMNS`/:data:`PORT_COLUMNS` order (nested ones expanded:
    ``nested_at``, :data:`_GPU_NESTED`).

    ``known``: the keyframe's nested columns; an equal one (ECC, row remap and NVLink rarely
    move) is not expanded again. The columns come transposed in C (``zip``: :func:`columns_of`,
    or the simulator's own) and only the nested fields are looked at one by one: a Python loop
    over every field made them in ~12 µs a sample, this in ~9.6 (docs/performance.md,
    "Simulator capacity")."""
    nested: _Nested = {}
    if not cols or not nested_at:
        return cols, nested
    out: list[tuple[Any, ...]] = []
    start = 0
    for at, name in nested_at:
        col = cols[at]
        seen = known.get(name) if known else None
        expanded = (seen[1] if seen is not None and seen[0] == col
                    else list(zip(*map(astuple, col), strict=True)))
        nested[name] = (col, expanded)
        out += cols[start:at]
        out += expanded
        start = at + 1
    out += cols[start:]
    return out, nested


@dataclass(slots=True)
class _Sent:
    seq: int
    bd_seq: int
    at: float
    gpus: list[tuple[Any, ...]]
    ports: list[tuple[Any, ...]]
    gpus_nested: _Nested
    ports_nested: _Nested
    interval_s: float
    agent: fast.AgentInfo
    job: fast.JobOnNode | None
    host: fast.HostSample


class TelemetryEncoder:
    """Telemetry to bytes, as v1 or v2 (``wire``). One per agent process (its seq and keyframe).

    A keyframe goes out first, every ``keyframe_every_s``, after :meth:`request_keyframe`, on a
    new session (``bdSeq``) and when the number of GPUs or ports changes; deltas in between."""

    def __init__(self, keyframe_every_s: float = KEYFRAME_EVERY_S, wire: int = WIRE_MAJOR) -> None:
        if wire not in (1, 2):
            raise ValueError(f"telemetry wire format {wire}: 1 or 2")
        self.keyframe_every_s = keyframe_every_s
        self.wire = wire
        self.keyframes = 0
        self.deltas = 0
        self._kf: _Sent | None = None
        self._want = False
        self._enc = msgspec.json.Encoder()
        self._defaults: dict[tuple[int, int], tuple[list[tuple[Any, ...]], ...]] = {}

    def request_keyframe(self) -> None:
        """The next :meth:`encode` sends a keyframe (a console asked: op ``keyframe``)."""
        self._want = True

    def encode(self, tel: fast.Telemetry, now: float) -> bytes:
        if self.wire == 1:
            return self._enc.encode(tel)
        return self.encode_columns(tel, columns_of(tel.gpus), columns_of(tel.ib_ports), now)

    def encode_columns(self, tel: fast.Telemetry, gpus: Columns, ports: Columns,
                       now: float) -> bytes:
        """:meth:`encode` of ``tel`` with its GPU and port rows given as :data:`Columns`
        (``tel``'s own rows are not read): the same bytes, without a row Struct per GPU and
        port that would be turned back into columns here (docs/performance.md, "Simulator
        capacity")."""
        if self.wire == 1:
            return self._enc.encode(replace(tel, gpus=rows_from(fast.GpuSample, gpus),
                                            ib_ports=rows_from(fast.IbPortSample, ports)))
        kf = self._kf
        n_gpus, n_ports = _n(gpus), _n(ports)
        gpus, gnest = _expand(gpus, _GPU_NESTED, kf.gpus_nested if kf else None)
        ports, pnest = _expand(ports, _PORT_NESTED, kf.ports_nested if kf else None)
        if (kf is None or self._want or now - kf.at >= self.keyframe_every_s
                or tel.bdSeq != kf.bd_seq or n_gpus != _n(kf.gpus)
                or n_ports != _n(kf.ports)):
            sent = _Sent(tel.seq, tel.bdSeq, now, gpus, ports, gnest, pnest, tel.interval_s,
                         tel.agent, tel.job, tel.host)
            out = self._keyframe(tel, gpus, ports, n_gpus, n_ports)
            # Held only once encoded: columns of another width raise in ``_keyframe``, and a
            # keyframe held from them made every later sample raise until the next one (a
            # review).
            self._kf = sent
            return out
        self.deltas += 1
        body: dict[str, Any] = {"v": 2, "node": tel.node, "seq": tel.seq, "bdSeq": tel.bdSeq,
                                "ts": tel.ts, "kf": kf.seq}
        if tel.interval_s != kf.interval_s:
            body["interval_s"] = tel.interval_s
        if tel.agent != kf.agent:
            body["agent"] = tel.agent
        if tel.job != kf.job:
            body["job"] = tel.job
        if tel.host != kf.host:
            body["host"] = tel.host
        if gpus and (g := {c.wire: v for c, v, k in zip(GPU_COLUMNS, gpus, kf.gpus, strict=True)
                           if v != k}):
            body["g"] = g
        if ports and (p := {c.wire: v for c, v, k in zip(PORT_COLUMNS, ports, kf.ports,
                                                         strict=True) if v != k}):
            body["p"] = p
        return self._enc.encode(body)

    def _keyframe(self, tel: fast.Telemetry, gpus: list[tuple[Any, ...]],
                  ports: list[tuple[Any, ...]], n_gpus: int, n_ports: int) -> bytes:
        dg, dp = self._default_columns(n_gpus, n_ports)
        body: dict[str, Any] = {"v": 2, "node": tel.node, "seq": tel.seq, "bdSeq": tel.bdSeq,
                                "ts": tel.ts, "kf": tel.seq, "interval_s": tel.interval_s,
                                "agent": tel.agent, "host": tel.host}
        if tel.job is not None:
            body["job"] = tel.job
        # A column left out of a keyframe holds the default on every row: most are None.
        if gpus:
            body["g"] = {c.wire: v for c, v, d in zip(GPU_COLUMNS, gpus, dg, strict=True)
                         if c.required or v != d}
        if ports:
            body["p"] = {c.wire: v for c, v, d in zip(PORT_COLUMNS, ports, dp, strict=True)
                         if c.required or v != d}
        out = self._enc.encode(body)
        self._want = False
        self.keyframes += 1
        return out

    def _default_columns(self, n_gpus: int,
                         n_ports: int) -> tuple[list[tuple[Any, ...]], ...]:
        key = (n_gpus, n_ports)
        if key not in self._defaults:
            self._defaults[key] = ([(c.default,) * n_gpus for c in GPU_COLUMNS],
                                   [(c.default,) * n_ports for c in PORT_COLUMNS])
        return self._defaults[key]


def _n(table: list[tuple[Any, ...]]) -> int:
    return len(table[0]) if table else 0
