"""The sans-I/O TCP model. Standard library only: no simpy, asyncio, textual or rich."""

from .config import PROFILES, AckStyle, NagleStyle, SocketOptions, StackProfile
from .endpoint import Endpoint, ModelError, SocketError, SockOpt, State, TcpInfo
from .events import Kind, Micros, Reason, Segment, Side, TcpFlag, Timer, TraceEvent, ms

__all__ = ["PROFILES", "AckStyle", "Endpoint", "Kind", "Micros", "ModelError", "NagleStyle",
           "Reason", "Segment", "Side", "SockOpt", "SocketError", "SocketOptions", "StackProfile",
           "State",
           "TcpFlag", "TcpInfo", "Timer", "TraceEvent", "ms"]
