"""Hypothesis properties of the simulator and the scenario loader."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nagle_sim import scenario
from nagle_sim.model import Side
from nagle_sim.scenario import ScenarioError
from nagle_sim.sim.driver import run_sim

op = st.one_of(
    st.tuples(st.just("write"), st.integers(1, 4000)),
    st.tuples(st.just("write_more"), st.integers(1, 3000)),
    st.tuples(st.just("writev"), st.lists(st.integers(1, 500), min_size=1, max_size=4)),
    st.tuples(st.just("sleep"), st.integers(0, 300)),
    st.tuples(st.just("set"), st.sampled_from(["nodelay", "cork", "quickack"]), st.booleans()),
)


def render(ops: list) -> tuple[str, int]:
    lines, total = [], 0
    for o in ops:
        if o[0] == "write":
            lines.append(f"write {o[1]}")
            total += o[1]
        elif o[0] == "write_more":
            lines.append(f"write {o[1]} more")
            total += o[1]
        elif o[0] == "writev":
            lines.append("writev " + " ".join(map(str, o[1])))
            total += sum(o[1])
        elif o[0] == "sleep":
            lines.append(f"sleep {o[1]}ms")
        else:
            lines.append(f"set {o[1]} {'on' if o[2] else 'off'}")
    return "\n".join(lines), total


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(client_ops=st.lists(op, min_size=1, max_size=12),
       server_ops=st.lists(op, min_size=0, max_size=6),
       delay=st.sampled_from([0, 0.3, 7, 60]), mss=st.sampled_from([536, 1000, 1448]),
       profile=st.sampled_from(["linux", "linux-5.4"]),
       nodelay=st.booleans(), read_chunk=st.integers(1, 5000))
def test_every_byte_is_delivered_exactly_once_in_order_and_runs_end(
        client_ops: list, server_ops: list, delay: float, mss: int, profile: str,
        nodelay: bool, read_chunk: int) -> None:
    c_script, c_total = render(client_ops)
    s_script, s_total = render(server_ops)
    full, rest = divmod(c_total, read_chunk)
    reads = [f"read {read_chunk}"] * full + ([f"read {rest}"] if rest else [])
    creads = f"read {s_total}" if s_total else ""
    text = (f'[link]\ndelay_ms = {delay}\nmss = {mss}\n'
            f'[client]\nprofile = "{profile}"\nnodelay = {str(nodelay).lower()}\n'
            f'script = """\n{c_script}\n{creads}\nsleep 1s\n"""\n'
            f'[server]\nprofile = "{profile}"\n'
            f'script = """\n{s_script}\n' + "\n".join(reads) + '\nsleep 1s\n"""\n')
    trace = run_sim(scenario.loads(text, "prop.toml"))
    assert trace.outcome == "ok", trace.message
    for side, total in ((Side.CLIENT, c_total), (Side.SERVER, s_total)):
        data = sorted((s.seq, s.length) for s in trace.segments if s.src is side and s.length)
        expected = 1
        for seq, length in data:      # contiguous cover from 1, no overlap (no loss here)
            assert seq == expected, (side, data)
            expected += length
        assert expected - 1 == total
    reads_done = sum(int(o.arg) for o in trace.ops if o.side is Side.SERVER and o.op == "read")
    assert reads_done == c_total


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_raises_anything_but_scenario_error(text: str) -> None:
    try:
        scenario.loads(text, "fuzz.toml")
    except ScenarioError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("fuzz.toml")


script_chars = st.sampled_from(list("writeadvsl0123456789 {};#\nmsuorpkcqfn-.x"))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=script_chars, max_size=80))
def test_arbitrary_scripts_never_raise_anything_but_scenario_error(script: str) -> None:
    text = f'[client]\nscript = """{script.replace(chr(34), "")}"""\n'
    try:
        scenario.loads(text, "fuzz.toml")
    except ScenarioError as exc:
        assert "\n" not in str(exc)
