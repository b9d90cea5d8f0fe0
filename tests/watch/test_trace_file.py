"""The trace file ``nagle-sim watch -o`` writes, from recorded raw records (no root).

It is what ``explain --kernel`` reads (docs/watch.md): the kernel's decisions marked
``by="kernel"`` must survive writing and reading — through the compiled records and
codec too (.ci/run runs this file against the mypyc wheel) — and the meta the join needs
(`meta.connection`, `meta.watched`, `meta.stalls`, `meta.watch_counters`) must be there.
"""

from __future__ import annotations

import io
from pathlib import Path

from nagle_sim.explain import load_watch
from nagle_sim.model.events import Side
from nagle_sim.trace import Trace
from realnet.watch import raw
from realnet.watch.decide import Engine
from realnet.watch.trace import connection_traces

FIXTURES = Path(__file__).with_name("fixtures")


def watch_trace(name: str) -> Trace:
    host, records = raw.read_fixture(FIXTURES / f"{name}.jsonl")
    engine = Engine(hz=int(host.get("hz", 250)), wire=True, keep=True)
    for record in records:
        engine.feed(record)
    traces = connection_traces(engine, host=host, stalls=engine.stalls(),
                               counters={"emitted": len(records), "lost": 0,
                                         "rate_limited": 0})
    assert len(traces) == 1
    return traces[0]


def test_the_kernels_decisions_survive_the_file(tmp_path: Path) -> None:
    trace = watch_trace("wwr")
    out = io.StringIO()
    trace.write_json(out)
    text = out.getvalue()
    back = Trace.loads(text, "watch.json")
    assert back.dumps() == text == trace.dumps()
    assert back.events and all(e.by == "kernel" for e in back.events)
    holds = [e for e in back.events if e.kind == "hold"]
    assert holds and {e.code for e in holds} == {"NAGLE_HOLD"}
    assert all(e.side is Side.CLIENT and e.data["queued"] == 7 for e in holds)
    assert {s.code for s in back.segments if s.code} >= {"ACK_RELEASE", "DELACK_FIRED"}
    # what explain --kernel reads from it
    path = tmp_path / "watch.json"
    path.write_text(text, "utf-8")
    join = load_watch(str(path))
    assert join.watched == {Side.CLIENT, Side.SERVER} and join.complete
    assert len(join.stalls) == len(trace.meta["stalls"]) >= 3
    assert all(s.cause == "nagle+delayed_ack" and s.side is Side.CLIENT
               for s in join.stalls)
    assert join.client[0] == join.server[0] == "127.0.0.1"


def test_ipv6_names_its_ends_in_brackets(tmp_path: Path) -> None:
    trace = watch_trace("wwr_v6")
    path = tmp_path / "v6.json"
    path.write_text(trace.dumps(), "utf-8")
    join = load_watch(str(path))
    assert join.client[0] == join.server[0] == "::1"
    assert join.describe().startswith("[::1]:")
