"""An event as the reader keeps it: its fields and the args keys it keeps, in Kineto's own spellings.

With msgspec installed, :class:`RawEvent` and :class:`Args` are structs that
msgspec fills and type-checks in C (of ``args``, only the keys in
:data:`ARG_FIELDS` are kept; every other key is skipped unparsed). Without it,
or for a batch msgspec refuses, :class:`PlainEvent` and :class:`PlainArgs`
hold the same attributes, built from the ``json`` module's dicts.
:class:`RangeArgs` also keeps a range-profiler event's counters. Nothing here
reads text: :mod:`.json_decode` decodes a batch, :mod:`.json_events` walks
the document.
"""

from __future__ import annotations

import math
from operator import attrgetter
from typing import Any, Union

#: The args keys the reader keeps: what the facts read (launch resources, bytes,
#: links), what the memory events carry, and the two that link a backward op to
#: its forward op. Every other key is skipped unparsed.
ARG_FIELDS = {
    "correlation": "correlation",
    "external_id": "External id",
    "registers_per_thread": "registers per thread",
    "shared_memory": "shared memory",
    "block": "block",
    "grid": "grid",
    "blocks_per_sm": "blocks per SM",
    "warps_per_sm": "warps per SM",
    "occupancy": "est. achieved occupancy %",
    "bytes": "bytes",
    "size": "size",
    "device": "device",
    "stream": "stream",
    "context": "context",
    "name": "name",
    "device_id": "Device Id",
    "device_type": "Device Type",
    "alloc_bytes": "Bytes",
    "total_allocated": "Total Allocated",
    "total_reserved": "Total Reserved",
    "sequence": "Sequence number",
    "fwd_thread": "Fwd thread id",
}
_ARG_ITEMS = tuple(ARG_FIELDS.items())
#: A CPU op's recorded shapes (record_shapes=True): kept as their JSON text, undecoded, for the roofline and the
#: rules that size an op by its shapes (helpers.facts.op_shapes), so that nothing reads the file a second time.
SHAPE_FIELDS = {"dims": "Input Dims", "types": "Input type", "concrete": "Concrete Inputs"}
LIMIT = 1e300  # larger timestamps and durations are not finite numbers of microseconds
CORR_LIMIT = 1 << 63  # correlation ids from there on do not fit the column: read as none


class _Unset:
    """A field the JSON did not have."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


try:
    import msgspec

    UNSET: Any = msgspec.UNSET
    _UnsetType: Any = msgspec.UnsetType
except ImportError:  # pragma: no cover - the fallback test loads this module without msgspec
    msgspec = None  # type: ignore[assignment]
    UNSET = _Unset()
    _UnsetType = _Unset


class PlainArgs:
    """The kept args of one event, as the json module's path builds them."""

    __slots__ = tuple(ARG_FIELDS) + tuple(SHAPE_FIELDS)

    def __init__(self, d: dict | None = None) -> None:
        for attr, key in _ARG_ITEMS:
            setattr(self, attr, d.get(key, UNSET) if d else UNSET)
        for attr, key in SHAPE_FIELDS.items():
            setattr(self, attr, d.get(key, UNSET) if d else UNSET)


class PlainEvent:
    """One event as the json module's path builds it: the same attributes as :class:`RawEvent`, unchecked."""

    __slots__ = ("ph", "name", "cat", "pid", "tid", "ts", "dur", "args")

    def __init__(self, d: dict) -> None:
        self.ph = d.get("ph", UNSET)
        self.name = d.get("name", UNSET)
        self.cat = d.get("cat", "")
        self.pid = d.get("pid")
        self.tid = d.get("tid")
        self.ts = d.get("ts", UNSET)
        self.dur = d.get("dur", 0)
        a = d.get("args", UNSET)
        self.args = _NO_ARGS if a is UNSET or a is None else PlainArgs(a) if a.__class__ is dict else a


_NO_ARGS_PLAIN = PlainArgs()


class RangeArgs(PlainArgs):
    """A CUPTI range-profiler event's args: the kept ones, and its counters (every other finite number).

    The range profiler writes one event per kernel it replayed, with the
    hardware counters it collected as args (``smsp__...sum``: names the user
    chose, so no fixed list of keys can keep them).
    """

    __slots__ = ("counters",)

    def __init__(self, base: Any, args: dict) -> None:
        for attr in ARG_FIELDS:
            setattr(self, attr, getattr(base, attr))
        for attr in SHAPE_FIELDS:
            setattr(self, attr, UNSET)
        if self.correlation is UNSET:  # as msgspec's Args holds it: the column-at-a-time path reads an int
            self.correlation = -1
        self.counters: dict[str, int | float] = {
            k: v for k, v in args.items()
            if (v.__class__ is int or (v.__class__ is float and math.isfinite(v))) and k not in _KEPT_KEYS}


_KEPT_KEYS = frozenset(ARG_FIELDS.values())

if msgspec is not None:
    from typing import Annotated

    # msgspec checks these types and ranges in C; whatever fails them goes to the json module's
    # path, which says what is wrong (or, for a correlation id that fits no column, reads none).
    _Correlation = Annotated[int, msgspec.Meta(ge=0, le=CORR_LIMIT - 1)]
    _Start = Annotated[float, msgspec.Meta(gt=-LIMIT, lt=LIMIT)]
    _Duration = Annotated[float, msgspec.Meta(ge=0, lt=LIMIT)]
    Args = msgspec.defstruct(
        "Args", [("correlation", _Correlation, msgspec.field(default=-1, name="correlation"))]
        + [(attr, Any, msgspec.field(default=UNSET, name=key)) for attr, key in _ARG_ITEMS if attr != "correlation"]
        # the shapes as undecoded text (a view of the batch's bytes, copied out for CPU ops only): empty when absent
        + [(attr, msgspec.Raw, msgspec.field(default=msgspec.Raw(), name=key)) for attr, key in SHAPE_FIELDS.items()],
        gc=False, omit_defaults=True, module=__name__)

    class RawEvent(msgspec.Struct, gc=False):
        """One event as msgspec decodes it: the reader's fields, their JSON types and ranges checked."""

        ph: str
        name: Union[str, _UnsetType] = UNSET
        cat: str = ""
        pid: Any = None
        tid: Any = None
        ts: Union[_Start, _UnsetType] = UNSET
        dur: _Duration = 0.0
        args: Args = msgspec.field(default_factory=Args)  # type: ignore[valid-type]

    _NO_ARGS: Any = Args()
    PARSER = "msgspec"
else:  # pragma: no cover
    Args = PlainArgs
    RawEvent = PlainEvent  # type: ignore[misc]
    _NO_ARGS = _NO_ARGS_PLAIN
    PARSER = "json"

ARG_CLASSES = (Args, PlainArgs, RangeArgs)
SEP = b"\x00"  # between an op's three shape texts (no JSON text holds a NUL byte)


def shape_text(a: Any) -> bytes | None:
    """An op's Input Dims, Input type and Concrete Inputs as one bytes object (JSON texts joined by NUL, an absent
    one empty), or None when it has no Input Dims."""
    dims = getattr(a, "dims", UNSET)
    if dims is UNSET or dims is None:
        return None
    if msgspec is not None and dims.__class__ is msgspec.Raw:
        if not len(dims):
            return None
        return SEP.join((dims, a.types, a.concrete))  # (Raw lends its bytes: no copy before the join)
    import json

    return SEP.join(b"" if v is UNSET else json.dumps(v, separators=(",", ":")).encode()
                    for v in (dims, a.types, a.concrete))
get_correlation = attrgetter("args.correlation")


def args_dict(a: Any) -> dict:
    """The kept args of an event as a dict with the JSON's own keys (absent keys left out)."""
    if a.__class__ is Args and msgspec is not None and not len(a.dims):
        try:
            return msgspec.to_builtins(a)  # the same dict, built in C
        except TypeError:  # a shape field holding Raw text (to_builtins refuses it): the loop below skips them
            pass
    out = {}
    for attr, key in _ARG_ITEMS:  # (the shapes are not args the facts read as a dict: see shape_text)
        v = getattr(a, attr)
        if v is not UNSET:
            out[key] = v
    if a.__class__ in (RangeArgs, Args) and out.get("correlation") == -1:  # -1 stands for none, as in Args
        del out["correlation"]
    return out
