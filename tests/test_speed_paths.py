"""Shortcuts taken for speed (docs/speed.md) give exactly what the plain way gives.

The golden traces guard the simulation as a whole; these tests pin the pieces whose
equivalence rests on an argument (number formatting, cached words) over inputs the
goldens do not reach."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from nagle_sim import trace
from nagle_sim.trace import codec
from nagle_sim.trace.units import ms


@given(st.one_of(st.integers(min_value=-(10**17), max_value=10**17),
                 st.integers(min_value=0, max_value=2_000_000),
                 st.integers(min_value=10**15 - 2_000, max_value=10**15 + 2_000)))
def test_a_time_is_written_as_json_writes_its_ms(us: int) -> None:
    assert codec._ms(us) == json.dumps(ms(us))


def test_every_remainder_of_a_ms_is_written_as_json_writes_it() -> None:
    for us in range(0, 3_000_000, 7):
        assert codec._ms(us) == json.dumps(ms(us)), us
    assert codec._ms(None) == "null"


@given(st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.booleans()),
                       max_size=4))
def test_event_data_is_written_as_json_writes_it(data: dict[str, int]) -> None:
    assert codec._data_text(data) == json.dumps(data, ensure_ascii=False)


def test_an_event_text_cached_under_a_clashing_key_is_not_reused() -> None:
    """The writer finds an event's side..timer text by its fields' identities XORed: two
    events may clash on that key; the second must get its own text, not the first's."""
    from nagle_sim.model.events import Side
    from nagle_sim.trace import EventRecord
    from nagle_sim.trace.codec import _RecordWriter

    first = EventRecord(t=1, side=Side.CLIENT, kind="hold", code="A", reason="a")
    second = EventRecord(t=1, side=Side.SERVER, kind="mode", code="B", reason="b",
                         detail="d", timer="delack")
    writer = _RecordWriter({"A": "a"})
    first_text = writer.event(first)
    (entry,) = writer.middles.values()
    key = (id(second.kind) ^ id(second.code) ^ id(second.reason) ^ id(second.detail)
           ^ id(second.timer) ^ False)
    writer.middles[key] = entry                       # a clash, as if by chance
    assert writer.event(second) == json.dumps(second.to_json({"A": "a"}), ensure_ascii=False)
    assert writer.event(first) == first_text == json.dumps(first.to_json({"A": "a"}))


def test_event_records_never_share_a_bool_as_a_whole_number() -> None:
    """``True == 1``: a ``data`` holding a bool keeps its own dict (both builds)."""
    from nagle_sim.model.events import Kind, Reason, Side, TraceEvent
    one = TraceEvent(at=0, side=Side.CLIENT, kind=Kind.MODE, reason=Reason.CWND_GROW,
                     data={"flag": 1})
    yes = TraceEvent(at=0, side=Side.CLIENT, kind=Kind.MODE, reason=Reason.CWND_GROW,
                     data={"flag": True})    # type: ignore[dict-item]
    records = trace.event_records([one, yes])
    assert [json.dumps(r.data) for r in records] == ['{"flag": 1}', '{"flag": true}']


def test_equal_event_data_share_one_dict_and_different_data_do_not() -> None:
    from nagle_sim.model.events import Kind, Reason, Side, TraceEvent

    def event(data: dict[str, int]) -> TraceEvent:
        return TraceEvent(at=0, side=Side.CLIENT, kind=Kind.MODE, reason=Reason.CWND_GROW,
                          data=data)
    a, b, c, d = trace.event_records([event({"cwnd": 10, "ssthresh": 7}),
                                      event({"cwnd": 10, "ssthresh": 7}),
                                      event({"cwnd": 11, "ssthresh": 7}), event({})])
    assert a.data is b.data and a.data == {"cwnd": 10, "ssthresh": 7}
    assert c.data is not a.data and c.data == {"cwnd": 11, "ssthresh": 7}
    assert d.data == {}
    e, f, g = trace.event_records([event({"length": 5000}), event({"length": 5000}),
                                   event({"length": 5001})])
    assert e.data is f.data and e.data == {"length": 5000}
    assert g.data is not e.data and g.data == {"length": 5001}
    assert (a.code, a.reason, a.kind) == ("CWND_GROW", Reason.CWND_GROW.value, "mode")


@given(st.integers(min_value=0, max_value=10_000), st.booleans(),
       st.integers(min_value=0, max_value=10_000_000))
def test_delayed_ack_words_are_the_plain_f_string(ato_ms: int, pingpong: bool,
                                                  fires_in_us: int) -> None:
    from nagle_sim.model.recv import _delack_detail
    mode = "ping-pong" if pingpong else "no quick ACKs left"
    plain = f"ato {ato_ms} ms, {mode}; fires in {fires_in_us / 1000:.1f} ms"
    assert _delack_detail(ato_ms, pingpong, fires_in_us) == plain
    assert _delack_detail(ato_ms, pingpong, fires_in_us) == plain     # from the cache


def test_setsockopt_words_name_the_option_and_its_value() -> None:
    from nagle_sim.model.endpoint import _SETSOCKOPT_WORDS
    from nagle_sim.model.state import SockOpt
    for opt in SockOpt:
        for on in (False, True):
            assert _SETSOCKOPT_WORDS[opt][int(on)] == f"TCP_{opt.name} = {int(on)}"


def test_module_constants_of_compiled_modules_are_final() -> None:
    """Compiled (setup.py, mypyc), a module-level name that is not ``Final`` is looked up
    in the module's globals dict at every use; a ``Final`` one is inlined or a C static.
    Reads the sources of every module setup.py compiles: every UPPER_CASE module-level
    assignment is annotated Final."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    setup = ast.parse((root / "setup.py").read_text(encoding="utf-8"))
    compiled = next(node.value for node in setup.body if isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "COMPILED"
                            for t in node.targets))
    sources = [root / path for path in ast.literal_eval(compiled)]
    assert len(sources) > 20 and all(path.is_file() for path in sources)
    plain = []
    for path in sources:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                names += [e.id for t in node.targets if isinstance(t, ast.Tuple)
                          for e in t.elts if isinstance(e, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                ann = ast.unparse(node.annotation)
                names = [] if ann.startswith("Final") else [node.target.id]
            else:
                continue
            plain += [f"{path.name}:{node.lineno} {n}" for n in names
                      if n.lstrip("_").isupper() and n.lstrip("_")[:1].isalpha()]
    assert plain == []
