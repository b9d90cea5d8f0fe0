"""nagle-sim: a teaching simulator for TCP small-packet behaviour, checked against real kernels."""

__version__ = "0.1.0"
