"""Reusable widgets of the TUI (each keeps its own DEFAULT_CSS). No simpy, no realnet."""
