"""Real-kernel validation infrastructure for nagle-sim.

Owns: link emulation in network namespaces (`realnet.netns`), the delay relay
process (`realnet.relay`), packet capture (`realnet.capture`) and stale-resource
cleanup (`realnet.cleanup`).

Must not import: textual, rich, simpy, or anything from `nagle_sim` -- this package
only talks to the kernel and must stay importable in a bare, root-only CI job.
"""
