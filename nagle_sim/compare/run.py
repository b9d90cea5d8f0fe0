"""Running a comparison: the real run, then the model set up and aligned for it.

Owns: `run_both` (the real run first, then the model with the profiles the real hosts
call for), `model_against` (the model's run for a saved or just-made real trace),
`model_scenario` (each side's profile: ``--profile auto`` takes each host's kernel
version profile; a remote run's path delays and offloads), and why a scenario is not
comparable on this machine (`not_comparable`). Both executors arrive as runners.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..model.config import PROFILES
from ..model.events import Micros, Side
from ..scenario import real_run_caveats
from ..trace import Runner, Trace
from .align import SimRunner, aligned_model_run
from .hosts import profiles_of, version_profile
from .verdict import Comparison, compare


@dataclass(slots=True)
class Both:
    """A model run and a real run of one scenario, and how the model was set up."""

    sim: Trace
    real: Trace
    scenario: Any
    """The scenario the model ran (profiles chosen for the real hosts)."""
    notes: list[str]

    def compare(self) -> Comparison:
        cmp = compare(self.sim, self.real, profiles=profiles_of(self.scenario))
        cmp.notes[:0] = self.notes
        return cmp


def run_both(scenario: Any, *, run_real: Runner, run_sim: SimRunner,
             profile: str = "auto") -> Both:
    """The real run first (``run_real``: this host, or the server side on a remote serve),
    then the model with the profiles the real hosts call for (`model_scenario`) at the real
    run's measured jiffy phase."""
    real = run_real(scenario)
    return model_against(scenario, real, run_sim, profile)

def model_against(scenario: Any, real: Trace, run_sim: SimRunner,
                  profile: str = "auto") -> Both:
    """The model's run of ``scenario`` set up and aligned for the real trace ``real``."""
    modelled, notes = model_scenario(scenario, real, profile)
    return Both(aligned_model_run(modelled, real, run_sim), real, modelled, notes)

def model_scenario(scenario: Any, real: Trace, profile: str = "auto"
                   ) -> tuple[Any, list[str]]:
    """The scenario as the model should run it against ``real``.

    ``profile``: "auto" gives each side whose profile is the default ``linux`` the version
    profile of its host's kernel (``linux-6.1`` on a 6.1 host) when the model has one;
    "scenario" keeps the scenario's profiles; any other name is used on both sides (its
    ``tune`` settings stay). A remote run's link also takes the hosts' segmentation
    offload (TSO/GSO) as its ``gso``. Returns (that scenario, what was chosen, one line
    each)."""


    raw = real.meta.get("host_facts")
    facts: dict[str, Any] = raw if isinstance(raw, dict) else {}
    notes: list[str] = []
    sides = {}
    for side in Side:
        spec = scenario.side(side)
        name = spec.profile.name
        if profile == "auto" and name == "linux":
            kernel = (facts.get(side.value) or {}).get("kernel")
            name, note = version_profile(kernel)
            notes.append(f"{side.value}: {note}")
        elif profile not in ("auto", "scenario"):
            name = profile
        if name != spec.profile.name:
            base = PROFILES[name]
            tuned = base.with_overrides(**spec.tune) if spec.tune else base
            sides[side.value] = replace(spec, profile=tuned)
    out = replace(scenario, **sides) if sides else scenario
    if real.meta.get("link") == "remote":
        out = _path_delays(out, real, notes)
        offl = [(f or {}).get("offloads") or {} for f in facts.values()
                if isinstance(f, dict)]
        # Software GSO is split before the capture tap; only a NIC that segments (TSO)
        # puts multi-MSS bursts where a capture sees them.
        gso = any(o.get("tso") for o in offl if isinstance(o, dict))
        if gso != out.link.gso:
            out = replace(out, link=replace(out.link, gso=gso))
            notes.append(f"the model's link {'sends' if gso else 'does not send'} TSO "
                         "bursts, as the hosts' interfaces (TSO "
                         f"{'on' if gso else 'off'})")
    return out, notes

def _path_delays(scenario: Any, real: Trace, notes: list[str]) -> Any:
    """A remote run crosses a real path: when the scenario's link delays do not add up to
    the round trip measured in the handshake (`nagle_sim.scenario.Link.describes_path`: within
    max(2 ms, 25 %), the rule the clock estimate uses), the model takes the
    path's one-way delays instead, so both executors see the same link."""


    clock = real.meta.get("clock_offset")
    if not isinstance(clock, dict):
        return scenario
    rtt, to_client = clock.get("handshake_rtt_us"), clock.get("one_way_to_client_us")
    if not isinstance(rtt, int | float) or not isinstance(to_client, int | float) or rtt <= 0:
        return scenario
    link = scenario.link
    if link.describes_path(rtt):
        return scenario
    to_client = min(max(0, round(to_client)), round(rtt))
    to_server = max(0, round(rtt) - to_client)
    notes.append(f"the model's link delays are the path's, measured in the handshake: "
                 f"{to_server / 1000:g} ms to the server, {to_client / 1000:g} ms to the "
                 f"client (the scenario says {link.to_server_delay / 1000:g} / "
                 f"{link.to_client_delay / 1000:g} ms)")
    return replace(scenario, link=replace(link, to_server_delay=Micros(to_server),
                                          to_client_delay=Micros(to_client)))

def not_comparable(scenario: Any) -> str:
    """Why this machine's kernel cannot run ``scenario`` as the model does ("" if it can)."""
    caveats = real_run_caveats(scenario)
    return caveats[0] if caveats else ""
