"""`nagle-sim drill`: packetdrill scripts played against the model (docs/drill.md).

`parser` reads the script language into `script`'s tree; `runner` plays it with the model
as the local socket; `cli` prints results. Must not import simpy, asyncio or textual.
"""

from .parser import DrillSyntaxError, DrillUnsupported, load, parse
from .runner import DrillResult, Status, run_script

__all__ = ["DrillResult", "DrillSyntaxError", "DrillUnsupported", "Status", "load", "parse",
           "run_script"]
