"""Real-kernel executor and validation infrastructure for nagle-sim.

Owns: running scenarios over real sockets (`realnet.runner`, `realnet.remote`), socket
options (`realnet.sockopts`), link emulation in network namespaces (`realnet.netns`), the
delay relay process (`realnet.relay`), packet capture (`realnet.capture`) and stale-resource
cleanup (`realnet.cleanup`).

Must not import textual, rich or simpy; from nagle_sim only the shared data layer:
`nagle_sim.scenario`, `nagle_sim.trace` and `nagle_sim.model.events`. The infrastructure
modules (netns, relay, capture, cleanup) import nothing from nagle_sim at all.
"""
