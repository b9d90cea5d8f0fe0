"""Running a comparison: the real run, then the model set up and aligned for it.

Owns: `run_both` (the real run first, then the model with the profiles the real hosts
call for), `model_against` (the model's run for a saved or just-made real trace),
`model_scenario` (each side's profile, `ProfileChoice`: ``--profile auto`` takes each
host's kernel version profile; a remote run's path, measured from its captures, and
offloads), the host-timed model run whose decisions are judged (`Both.decided`: each call
as late as the real host made it), and why a scenario is not comparable on this machine
or a remote pair (`not_comparable`). Both executors arrive as runners.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from functools import partial
from typing import Any

from ..errors import UserError
from ..model.config import PROFILES
from ..model.events import Micros, Side
from ..scenario import Scenario, SideSpec, real_run_caveats
from ..trace import ModelRunner, Runner, Trace
from .align import aligned_model_run
from .hosts import profiles_of, version_profile
from .layers import host_delays, two_layers
from .verdict import Comparison, compare


class ProfileChoice(StrEnum):
    """``--profile``'s choices besides naming a profile (which then runs on both sides)."""

    AUTO = "auto"
    """Each side whose profile is the default ``linux`` takes the version profile of its
    host's kernel (``linux-6.1`` on a 6.1 host) where the model has one."""
    SCENARIO = "scenario"
    """The scenario's profiles as written."""


Profile = ProfileChoice | str
"""What a comparison runs the model with: a `ProfileChoice` or a profile's name."""


def profile_choice(text: str | None) -> Profile:
    """``--profile TEXT`` checked: a `ProfileChoice` (None is `ProfileChoice.AUTO`) or one
    of the model's profile names; anything else is a `UserError` naming them."""
    if text is None or text in ProfileChoice.__members__.values():
        return ProfileChoice(text or ProfileChoice.AUTO)
    if text not in PROFILES:
        raise UserError(f"--profile {text!r}: use auto, scenario or one of "
                        + ", ".join(sorted(PROFILES)))
    return text


@dataclass(slots=True)
class Both:
    """A model run and a real run of one scenario, and how the model was set up."""

    sim: Trace
    real: Trace
    scenario: Scenario
    """The scenario the model ran (profiles chosen for the real hosts)."""
    notes: list[str]
    decided: Trace | None = None
    """The host-timed model run (`nagle_sim.compare.layers.host_delays`): each call as late
    as the real host made it; None when no call was late. Its decisions are the ones
    judged."""

    def compare(self) -> Comparison:
        """The comparison of the two runs, with its verdict in two layers (`two_layers`):
        decisions judged against the host-timed run when there is one."""
        profiles = profiles_of(self.scenario)
        cmp = compare(self.sim, self.real, profiles=profiles)
        cmp.notes[:0] = self.notes
        decided = None
        if self.decided is not None:
            decided = (compare(self.decided, self.real, profiles=profiles), self.decided)
        cmp.layers = two_layers(cmp, self.sim, self.real, decided)
        return cmp


def run_both(scenario: Scenario, *, run_real: Runner, run_sim: ModelRunner,
             profile: Profile = ProfileChoice.AUTO) -> Both:
    """The real run first (``run_real``: this host, or the server side on a remote serve),
    then the model with the profiles the real hosts call for (`model_scenario`) at the real
    run's measured jiffy phase."""
    real = run_real(scenario)
    return model_against(scenario, real, run_sim, profile)

def model_against(scenario: Scenario, real: Trace, run_sim: ModelRunner,
                  profile: Profile = ProfileChoice.AUTO) -> Both:
    """The model's run of ``scenario`` set up and aligned for the real trace ``real``, and,
    when a real host was late to a call or a read, the host-timed run beside it
    (`Both.decided`, the driver's ``host_delays``/``read_lags``)."""
    modelled, notes = model_scenario(scenario, real, profile)
    sim = aligned_model_run(modelled, real, run_sim)
    starts, lags = host_delays(real, sim)
    decided = (aligned_model_run(modelled, real, partial(run_sim, host_delays=starts,
                                                         read_lags=lags))
               if (starts or lags) and real.segments else None)
    return Both(sim, real, modelled, notes, decided)

def model_scenario(scenario: Scenario, real: Trace, profile: Profile = ProfileChoice.AUTO
                   ) -> tuple[Scenario, list[str]]:
    """The scenario as the model should run it against ``real``.

    ``profile`` (`profile_choice`): `ProfileChoice.AUTO` gives each side whose profile is
    the default ``linux`` the version profile of its host's kernel (``linux-6.1`` on a 6.1
    host) when the model has one; `ProfileChoice.SCENARIO` keeps the scenario's profiles;
    a profile's name is used on both sides (its ``tune`` settings stay). A remote run's
    link also takes the hosts' segmentation offload (TSO/GSO) as its ``gso``. Returns
    (that scenario, what was chosen, one line each)."""
    choice = profile_choice(profile)
    raw = real.meta.get("host_facts")
    facts: dict[str, Any] = raw if isinstance(raw, dict) else {}
    notes: list[str] = []
    sides: dict[Side, SideSpec] = {}
    for side in Side:
        spec = scenario.side(side)
        name = spec.profile.name
        if choice is ProfileChoice.AUTO and name == "linux":
            kernel = (facts.get(side.value) or {}).get("kernel")
            name, note = version_profile(kernel)
            notes.append(f"{side.value}: {note}")
        elif not isinstance(choice, ProfileChoice):
            name = choice
        if name != spec.profile.name:
            base = PROFILES[name]
            tuned = base.with_overrides(**spec.tune) if spec.tune else base
            sides[side] = replace(spec, profile=tuned)
    out = scenario if not sides else replace(
        scenario, client=sides.get(Side.CLIENT, scenario.client),
        server=sides.get(Side.SERVER, scenario.server))
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

def _path_delays(scenario: Scenario, real: Trace, notes: list[str]) -> Scenario:
    """A remote run crosses a real path, so the model's link is that path: its one-way
    delays are the captures' minimum one-way delays (``meta.path``, realnet.remote.clock:
    never the handshake, which holds the remote host's turnaround) and its rate the one
    measured from packet pairs, or none when the path was too fast to measure or no pair
    was captured (the scenario's rate is then not the path's either, and its serialization
    would be a difference of the model's own making). One note says what the model took."""
    path = real.meta.get("path")
    if not isinstance(path, dict):
        return scenario
    to_server, to_client = path.get("to_server_us"), path.get("to_client_us")
    if not (isinstance(to_server, int | float) and isinstance(to_client, int | float)
            and 0 <= to_server < 60e6 and 0 <= to_client < 60e6):
        return scenario
    link = scenario.link
    rate = path.get("rate_bps")
    rate = rate if type(rate) is int and 0 <= rate < 1 << 40 else 0
    said = (f"{rate / 1e6:g} Mbit/s (measured from packet pairs)" if rate else
            "no rate limit (" + (str(path.get("rate_note") or "not measured")) + ")")
    notes.append(f"the model's link is the path's: {to_server / 1000:g} ms to the server, "
                 f"{to_client / 1000:g} ms to the client ({path.get('from') or 'measured'}), "
                 f"{said}; the scenario says {link.to_server_delay / 1000:g} / "
                 f"{link.to_client_delay / 1000:g} ms"
                 + (f" at {link.rate_bps / 1e6:g} Mbit/s" if link.rate_bps else ""))
    return replace(scenario, link=replace(link, to_server_delay=Micros(round(to_server)),
                                          to_client_delay=Micros(round(to_client)),
                                          rate_bps=rate))


def not_comparable(scenario: Scenario, remote: bool = False) -> str:
    """Why this machine's kernel (``remote``: and a serve's, over a real path) cannot run
    ``scenario`` as the model does ("" if it can)."""
    caveats = real_run_caveats(scenario, remote=remote)
    return caveats[0] if caveats else ""
