"""The class as a class: what `nagle-sim serve` knows about the room, apart from any
screen or network.

- `state`: who is connected, where each student is, what the teacher leads, and the
  peer-instruction polls (vote → show → discuss → re-vote → reveal) with their ballots;
- `channel`: the messages a student's app and serve exchange over the local channel
  (a socket pair serve creates for each app process), framed and checked;
- `results`: the session's polls as CSV and Markdown.

A package of its own, beside `nagle_sim.tui`, because none of it is about a terminal or a
page: serve (aiohttp) and the app (Textual) both use it, and a class that outgrows one
machine would move exactly this state into a shared store (docs/tui.md). Standard
library only: must not import textual, aiohttp, simpy or realnet.
"""
