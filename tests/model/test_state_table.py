"""The TCP state table (``state.TRANSITIONS``) is complete enough to draw RFC 793's
diagram from, and every state change of a real run is one of its entries."""

from __future__ import annotations

from collections import deque

import pytest

from nagle_sim.model import Kind, Side, State
from nagle_sim.model.events import flag_letters
from nagle_sim.model.state import TRANSITIONS, ConnEvent

from .harness import Harness, connect, ms


def test_every_state_is_reachable_from_closed_or_listen() -> None:
    seen = {State.CLOSED, State.LISTEN}
    todo = deque(seen)
    while todo:
        here = todo.popleft()
        for (state, _event), nxt in TRANSITIONS.items():
            if state is here and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    assert seen == set(State)


def test_a_reset_closes_every_state() -> None:
    assert all(TRANSITIONS[(s, ConnEvent.ABORT)] is State.CLOSED for s in State)


@pytest.mark.parametrize("closer", [Side.CLIENT, Side.SERVER])
def test_a_full_close_walks_the_table(closer: Side) -> None:
    """Both sides close in turn; every STATE event the run traces is a table entry."""
    client, server = Harness(side=Side.CLIENT), Harness(side=Side.SERVER)
    connect(client, 0)
    t = 0
    sides = {Side.CLIENT: client, Side.SERVER: server}
    other = sides[closer.peer]

    def shuttle() -> None:
        """Carry segments both ways until the link is quiet (1 ms each way)."""
        nonlocal t
        for _ in range(20):
            moved = False
            for h in (client, server):
                for sent in h.take():
                    t = max(t, sent.t) + ms(1)
                    peer = sides[h.side.peer]
                    seg = sent.seg
                    peer.peer(t, seq=seg.seq, ack=seg.ack, length=seg.length,
                              flags=flag_letters(seg.flags), window=seg.window)
                    moved = True
            if not moved:
                return

    shuttle()
    assert client.ep.state is server.ep.state is State.ESTABLISHED
    sides[closer].close(t + ms(1))
    shuttle()
    other.close(t + ms(1))
    shuttle()
    for h in (client, server):
        h.advance(t + ms(500))
    shuttle()
    allowed = {(s.value, n.value) for (s, _e), n in TRANSITIONS.items()}
    for h in (client, server):
        steps = [tuple(e.detail.split(" → ")) for e in h.ep.drain_events()
                 if e.kind is Kind.STATE]
        assert steps and all(step in allowed for step in steps), steps
    assert sides[closer].ep.state is State.TIME_WAIT
    assert other.ep.state is State.CLOSED
