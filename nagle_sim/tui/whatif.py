"""What-if state: the socket options, OS profiles and link delay a user toggled.

Owns turning toggles into scenario ``--set`` overrides, so a what-if re-run goes through
the same loader and validation as the CLI. Must not import textual, simpy or realnet.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from ..model.config import PROFILES
from ..model.events import Side
from ..model.state import SockOpt
from ..scenario import Scenario

DELAYS_MS: tuple[float, ...] = (0, 1, 10, 40, 200)
"""Symmetric link delays offered by the delay toggle (plus the scenario's own)."""


class Knob(Enum):
    """A toggle the user can flip."""

    NODELAY = SockOpt.NODELAY.value
    CORK = SockOpt.CORK.value
    QUICKACK = SockOpt.QUICKACK.value
    PROFILE = "profile"


@dataclass(frozen=True, slots=True, kw_only=True)
class SideChoice:
    nodelay: bool
    cork: bool
    quickack: bool | None
    profile: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WhatIf:
    client: SideChoice
    server: SideChoice
    delay_ms: float | None = None
    """None: the scenario's own link delays."""
    own_delay_ms: float | None = field(default=None, compare=False)
    """The scenario's own one-way delay when both directions share it (None: they differ),
    so the cycle never offers it again as a what-if."""

    @classmethod
    def of(cls, scenario: Scenario) -> WhatIf:
        def side(s: Side) -> SideChoice:
            spec = scenario.side(s)
            return SideChoice(nodelay=spec.options.nodelay, cork=spec.options.cork,
                              quickack=spec.options.quickack, profile=spec.profile.name)
        link = scenario.link
        own = (link.to_server_delay / 1000 if link.to_server_delay == link.to_client_delay
               else None)
        return cls(client=side(Side.CLIENT), server=side(Side.SERVER), own_delay_ms=own)

    def side(self, side: Side) -> SideChoice:
        return self.client if side is Side.CLIENT else self.server

    def flipped(self, side: Side, knob: Knob) -> WhatIf:
        """The next value of one knob (quickack cycles default → 0 → 1)."""
        cur = self.side(side)
        if knob is Knob.NODELAY:
            new = replace(cur, nodelay=not cur.nodelay)
        elif knob is Knob.CORK:
            new = replace(cur, cork=not cur.cork)
        elif knob is Knob.QUICKACK:
            order: list[bool | None] = [None, False, True]
            new = replace(cur, quickack=order[(order.index(cur.quickack) + 1) % 3])
        else:
            names = list(PROFILES)
            i = names.index(cur.profile) if cur.profile in names else -1
            new = replace(cur, profile=names[(i + 1) % len(names)])
        return replace(self, client=new) if side is Side.CLIENT else replace(self, server=new)

    def next_delay(self) -> WhatIf:
        """The next link delay of the cycle (the scenario's own, 0, 1, 10, 40, 200 ms),
        skipping the value the scenario already has: the first `l` on a loopback lesson
        re-ran the same 0 ms."""
        options: list[float | None] = [None, *(d for d in DELAYS_MS if d != self.own_delay_ms)]
        i = options.index(self.delay_ms) if self.delay_ms in options else 0
        return replace(self, delay_ms=options[(i + 1) % len(options)])

    def overrides(self, base: WhatIf) -> list[str]:
        """``--set`` strings that turn ``base`` (the file's values) into this state."""
        out: list[str] = []
        for side in Side:
            mine, theirs = self.side(side), base.side(side)
            if mine.profile != theirs.profile:
                out.append(f'{side.value}.profile="{mine.profile}"')
            for name in ("nodelay", "cork"):
                if getattr(mine, name) != getattr(theirs, name):
                    out.append(f"{side.value}.{name}={str(getattr(mine, name)).lower()}")
            if mine.quickack != theirs.quickack:
                value = "default" if mine.quickack is None else str(mine.quickack).lower()
                out.append(f"{side.value}.quickack={value}")
        if self.delay_ms is not None:
            out += [f"link.to_server_delay_ms={self.delay_ms:g}",
                    f"link.to_client_delay_ms={self.delay_ms:g}"]
        return out


def delay_text(scenario: Scenario) -> str:
    up, down = scenario.link.to_server_delay, scenario.link.to_client_delay
    if up == down:
        return f"{up / 1000:g} ms"
    return f"→{up / 1000:g}/←{down / 1000:g} ms"
