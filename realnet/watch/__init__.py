"""watch: the kernel's own small-packet decisions for a live process, read from BPF.

Owns: the BPF program's build (`build`) and its records' layout (`raw`), loading and
attaching it through libbpf (`loader`, `libbpf`), the decision engine that turns the
kernel's events into the model's reasons and names stalls (`decide`), a session's loop
(`session`), watched connections as traces (`trace`), the kernel recorder a real run
attaches (`record`), the self-test (`check`) and the ``python -m realnet.watch`` front end.
Imports the model's vocabulary, the trace hub and the error root; must not import rich,
textual, simpy or nagle_sim's simulator (``nagle-sim watch`` reaches it through
`nagle_sim.runners`).
"""
