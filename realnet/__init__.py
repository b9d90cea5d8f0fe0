"""Real-kernel executor and validation infrastructure for nagle-sim.

Owns: running scenarios over real sockets. `realnet.runner` is the entry point of every
real run (`run_real`) and the local run (loopback, or an emulated link between two
network namespaces); `realnet.remote` runs the server side on another host (a package:
protocol, server, client, clock, merge). What both share, one concern per module:

- `side` (the parent's handle on a side's process) and `child` (the program that process
  runs: the script as system calls, under a bounded real-time duty cycle);
- `records` (a side's records, streamed and read back, checked: they may come off the net);
- `supervise` (time limits, deadlock and error detection, how a run ended);
- `host` (what this host can do: Linux, capture rights, namespaces, real-time priority;
  `RealnetError`);
- `assemble` (captured packets and the sides' records made one `Trace`);
- `sockopts` (socket options, TCP_INFO), `hostfacts` (the facts a trace records about its
  hosts).

The infrastructure modules — link emulation in network namespaces (`netns`), the delay
relay process (`relay`), packet capture (`capture`) and stale-resource cleanup
(`cleanup`) — import nothing from nagle_sim at all.

Must not import textual, rich or simpy; from nagle_sim only the shared data layer:
`nagle_sim.scenario`, `nagle_sim.trace`, `nagle_sim.model.events` and the error root. Only
`nagle_sim.runners` imports realnet (lint-imports holds it).
"""
