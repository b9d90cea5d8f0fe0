"""The record classes whose ``__init__`` is written out by hand for the compiled build
(setup.py: mypyc runs a dataclass's generated ``__init__`` as interpreted code) must take
exactly their dataclass fields, in order, with the same defaults: a field added to the
class and forgotten in ``__init__`` fails here, not as a silently missing attribute.

Reads Python signatures, so it runs on the pure (editable) build only."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from nagle_sim.model.bbr import RateSample
from nagle_sim.model.events import Segment, TraceEvent
from nagle_sim.model.state import Skb
from nagle_sim.trace import EventRecord, OpRecord, SegmentRecord

CLASSES = [Segment, TraceEvent, Skb, RateSample, SegmentRecord, OpRecord, EventRecord]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_the_written_out_init_takes_the_dataclass_fields(cls: type) -> None:
    params = list(inspect.signature(cls).parameters.values())     # __init__, less self
    fields = [f for f in dataclasses.fields(cls) if f.init]
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields, strict=True):
        if f.default is not dataclasses.MISSING:
            assert p.default == f.default, f.name
        elif f.default_factory is not dataclasses.MISSING:
            # a factory field takes None and builds a fresh value per instance
            assert p.default is None, f.name
        else:
            assert p.default is inspect.Parameter.empty, f.name


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_field_is_set(cls: type) -> None:
    """Built with its required fields only, an instance has every field set, to the
    field's default where it has one."""
    # any value will do for a required field (nothing is checked at run time): a distinct
    # object each, so a field set from the wrong argument shows
    required = {f.name: object() for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    obj = cls(**required)
    for f in dataclasses.fields(cls):
        value = getattr(obj, f.name)
        if f.name in required:
            assert value is required[f.name]
        elif f.default is not dataclasses.MISSING:
            assert value == f.default
        else:
            assert value == f.default_factory()   # type: ignore[operator]

