"""The sans-I/O TCP model (docs/model.md): each socket's state and the kernel's rules for
sending, ACKing and its timers, the stack profiles and socket options, and the events with
their reasons (the vocabulary every trace and explain speak). Time comes in as an
argument and timers go out as requests: no clock, no I/O.

Imports the standard library only: must not import simpy, asyncio, textual, rich or any
other package of nagle_sim (lint-imports holds it)."""

from .config import PROFILES, AckStyle, NagleStyle, SocketOptions, StackProfile
from .endpoint import Endpoint, ModelError, SocketError, SockOpt, State, TcpInfo
from .events import Kind, Micros, Reason, Segment, Side, TcpFlag, Timer, TraceEvent, ms

__all__ = ["PROFILES", "AckStyle", "Endpoint", "Kind", "Micros", "ModelError", "NagleStyle",
           "Reason", "Segment", "Side", "SockOpt", "SocketError", "SocketOptions", "StackProfile",
           "State",
           "TcpFlag", "TcpInfo", "Timer", "TraceEvent", "ms"]
