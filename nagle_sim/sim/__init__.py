"""The simulated executor: a scenario run on the model, as a trace.

- `driver`: simulated time (simpy and the driver's own agenda), the link, the two
  applications' scripts, and the trace they make (`run_sim`);
- `link`: the link's scripted faults (``[link] drop`` / ``hold``).

Reached only through `nagle_sim.runners` (import-linter holds it). Imports the model, the
scenario and the trace hubs and simpy; must not import realnet, textual or rich.
"""
