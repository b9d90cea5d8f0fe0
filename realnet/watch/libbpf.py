"""The few libbpf calls watch needs, through ctypes over the distribution's libbpf.so.1.

Owns: finding and binding libbpf (Debian's ``libbpf1``, 1.1 or later), its log, opening
the shipped CO-RE object from memory, sizing maps and writing the configuration section
before load, attaching programs, the ring buffer and map reads. Every pointer libbpf hands
out is freed by `Object.close` (links first, then the ring buffer, then the object), which
is also what a signal handler calls: the kernel then holds no program, map or link of
ours (no map is ever pinned, so none can outlive the process; a SIGKILLed process's file
descriptors close with it and the kernel frees everything).

Why ctypes and not a binding: PyPI has no maintained libbpf binding (bcc's Python module
needs kernel headers and LLVM at run time, and fails here), and the calls are few and
stable (libbpf's 1.x ABI). Must not import rich, textual or anything of nagle_sim beyond
the model's vocabulary.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable
from typing import Any

from nagle_sim.errors import UserError

_LOG_LIMIT = 200
"""libbpf log lines kept for an error message (a verifier log can run to thousands)."""


class BpfError(UserError):
    """libbpf could not be found, or refused to open, load or attach: one line."""


_PRINT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
RINGBUF_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)


class _Lib:
    """libbpf.so.1 with argument and result types declared for the calls used."""

    def __init__(self) -> None:
        names = ["libbpf.so.1"]
        found = ctypes.util.find_library("bpf")
        if found and found not in names:
            names.append(found)
        last: OSError | None = None
        for name in names:
            try:
                self.so = ctypes.CDLL(name, use_errno=True)
                break
            except OSError as exc:
                last = exc
        else:
            raise BpfError(f"libbpf is not installed (libbpf.so.1: {last}); on Debian or "
                           "Ubuntu: apt-get install libbpf1")
        self.libc = ctypes.CDLL(None, use_errno=True)
        vp, cp, ci, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t
        u32 = ctypes.c_uint32
        sigs: dict[str, tuple[Any, list[Any]]] = {
            "libbpf_set_print": (vp, [_PRINT_FN]),
            "libbpf_major_version": (u32, []),
            "libbpf_minor_version": (u32, []),
            "bpf_object__open_mem": (vp, [vp, sz, vp]),
            "bpf_object__load": (ci, [vp]),
            "bpf_object__close": (None, [vp]),
            "bpf_object__find_map_by_name": (vp, [vp, cp]),
            "bpf_object__find_program_by_name": (vp, [vp, cp]),
            "bpf_object__next_program": (vp, [vp, vp]),
            "bpf_program__name": (cp, [vp]),
            "bpf_program__section_name": (cp, [vp]),
            "bpf_program__set_autoload": (ci, [vp, ctypes.c_bool]),
            "bpf_program__attach": (vp, [vp]),
            "bpf_program__attach_raw_tracepoint": (vp, [vp, cp]),
            "bpf_program__attach_perf_event": (vp, [vp, ci]),
            "bpf_link__destroy": (ci, [vp]),
            "bpf_map__set_max_entries": (ci, [vp, u32]),
            "bpf_map__initial_value": (vp, [vp, ctypes.POINTER(sz)]),
            "bpf_map__fd": (ci, [vp]),
            "bpf_map_lookup_elem": (ci, [ci, vp, vp]),
            "bpf_map_update_elem": (ci, [ci, vp, vp, ctypes.c_uint64]),
            "bpf_map_delete_elem": (ci, [ci, vp]),
            "ring_buffer__new": (vp, [ci, RINGBUF_FN, vp, vp]),
            "ring_buffer__poll": (ci, [vp, ci]),
            "ring_buffer__consume": (ci, [vp]),
            "ring_buffer__free": (None, [vp]),
            "libbpf_num_possible_cpus": (ci, []),
        }
        for name, (res, args) in sigs.items():
            fn = getattr(self.so, name, None)
            if fn is None:
                raise BpfError(f"libbpf is too old: it lacks {name} (libbpf 1.1 or later "
                               "is needed)")
            fn.restype = res
            fn.argtypes = args
        self.libc.vsnprintf.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                        ctypes.c_void_p]
        self.libc.syscall.restype = ctypes.c_long
        self.log: list[str] = []
        self._print = _PRINT_FN(self._on_print)   # kept: libbpf holds the pointer
        self.so.libbpf_set_print(self._print)

    def _on_print(self, level: int, fmt: bytes, args: int) -> int:
        buf = ctypes.create_string_buffer(1 << 16)
        self.libc.vsnprintf(buf, len(buf), fmt, args)
        line = buf.value.decode("utf-8", "replace").rstrip()
        if line:
            self.log.append(line)
            del self.log[:-_LOG_LIMIT]
        return 0

    @property
    def version(self) -> tuple[int, int]:
        return int(self.so.libbpf_major_version()), int(self.so.libbpf_minor_version())

    def last_log(self, lines: int = 3) -> str:
        """The last meaningful libbpf log lines, joined (for a one-line error)."""
        useful = [x for x in self.log if x and not x.startswith("libbpf: prog '") or
                  "error" in x.lower() or "failed" in x.lower()]
        return " | ".join(useful[-lines:])


_LIB: _Lib | None = None


def lib() -> _Lib:
    """The bound libbpf (loaded once per process)."""
    global _LIB
    if _LIB is None:
        _LIB = _Lib()
    return _LIB


def _err(prefix: str) -> BpfError:
    e = ctypes.get_errno()
    detail = lib().last_log()
    msg = f"{prefix}: {os.strerror(e) if e else 'failed'}"
    return BpfError(f"{msg} ({detail})" if detail else msg)


class Object:
    """One opened BPF object and everything attached from it."""

    def __init__(self, data: bytes, name: str = "nagle_watch") -> None:
        self.lib = lib()
        self._data = ctypes.create_string_buffer(data, len(data))  # libbpf copies it
        ctypes.set_errno(0)
        ptr = self.lib.so.bpf_object__open_mem(self._data, len(data), None)
        if not ptr:
            raise _err(f"cannot open the BPF object {name}")
        self.ptr: int | None = ptr
        self.links: list[int] = []
        self.rings: list[int] = []
        self._callbacks: list[Any] = []
        self._pending: BaseException | None = None

    # -- before load --------------------------------------------------------------------
    def map(self, name: str) -> int:
        m = self.lib.so.bpf_object__find_map_by_name(self.ptr, name.encode())
        if not m:
            raise BpfError(f"the BPF object has no map {name!r}")
        return int(m)

    def set_max_entries(self, name: str, n: int) -> None:
        if self.lib.so.bpf_map__set_max_entries(self.map(name), n):
            raise _err(f"cannot size map {name}")

    def write_initial(self, name: str, data: bytes) -> None:
        """Overwrite the start of a data section's initial image (before load)."""
        size = ctypes.c_size_t(0)
        ptr = self.lib.so.bpf_map__initial_value(self.map(name), ctypes.byref(size))
        if not ptr or size.value < len(data):
            raise BpfError(f"section {name} is {size.value} bytes, {len(data)} needed")
        ctypes.memmove(ptr, data, len(data))

    def programs(self) -> list[tuple[str, str, int]]:
        """(name, section, pointer) of every program in the object."""
        out = []
        prog = self.lib.so.bpf_object__next_program(self.ptr, None)
        while prog:
            out.append((self.lib.so.bpf_program__name(prog).decode(),
                        self.lib.so.bpf_program__section_name(prog).decode(), int(prog)))
            prog = self.lib.so.bpf_object__next_program(self.ptr, prog)
        return out

    def set_autoload(self, prog: int, on: bool) -> None:
        self.lib.so.bpf_program__set_autoload(prog, on)

    def load(self) -> None:
        ctypes.set_errno(0)
        if self.lib.so.bpf_object__load(self.ptr):
            raise _err("the kernel refused the BPF programs")

    # -- after load ---------------------------------------------------------------------
    def attach_raw_tracepoint(self, prog: int, tracepoint: str) -> None:
        ctypes.set_errno(0)
        link = self.lib.so.bpf_program__attach_raw_tracepoint(prog, tracepoint.encode())
        if not link:
            raise _err(f"cannot attach to raw tracepoint {tracepoint}")
        self.links.append(int(link))

    def attach_perf_event(self, prog: int, pfd: int, what: str) -> None:
        ctypes.set_errno(0)
        link = self.lib.so.bpf_program__attach_perf_event(prog, pfd)
        if not link:
            os.close(pfd)
            raise _err(f"cannot attach to {what}")
        self.links.append(int(link))   # the link owns pfd and closes it when destroyed

    def map_fd(self, name: str) -> int:
        return int(self.lib.so.bpf_map__fd(self.map(name)))

    def update(self, name: str, key: bytes, value: bytes) -> None:
        k = ctypes.create_string_buffer(key, len(key))
        v = ctypes.create_string_buffer(value, len(value))
        ctypes.set_errno(0)
        if self.lib.so.bpf_map_update_elem(self.map_fd(name), k, v, 0):
            raise _err(f"cannot update map {name}")

    def lookup(self, name: str, key: bytes, value_size: int) -> bytes | None:
        k = ctypes.create_string_buffer(key, len(key))
        v = ctypes.create_string_buffer(value_size)
        if self.lib.so.bpf_map_lookup_elem(self.map_fd(name), k, v):
            return None
        return v.raw

    def ring_buffer(self, name: str, on_record: Callable[[bytes], None]) -> int:
        def cb(_ctx: int, data: int, size: int) -> int:
            # An exception cannot cross the C frames of ring_buffer__poll (ctypes would
            # print and drop it): keep it, stop the poll, and raise it from `poll`.
            try:
                on_record(ctypes.string_at(data, size))
            except BaseException as exc:  # noqa: BLE001 - re-raised by poll()
                self._pending = exc
                return -1
            return 0
        fn = RINGBUF_FN(cb)
        self._callbacks.append(fn)
        ctypes.set_errno(0)
        rb = self.lib.so.ring_buffer__new(self.map_fd(name), fn, None, None)
        if not rb:
            raise _err(f"cannot open ring buffer {name}")
        self.rings.append(int(rb))
        return int(rb)

    def poll(self, rb: int, timeout_ms: int) -> int:
        """Hand every waiting record to the callback; wait up to timeout_ms for one.
        Returns the number handled, or -errno (EINTR when a signal came); an exception
        the callback raised (KeyboardInterrupt too) is raised here."""
        n = int(self.lib.so.ring_buffer__poll(rb, timeout_ms))
        self._raise_pending()
        return n

    def consume(self, rb: int) -> int:
        n = int(self.lib.so.ring_buffer__consume(rb))
        self._raise_pending()
        return n

    def _raise_pending(self) -> None:
        exc, self._pending = self._pending, None
        if exc is not None:
            raise exc

    def close(self) -> None:
        """Detach everything and free the object. Safe to call twice."""
        while self.links:
            self.lib.so.bpf_link__destroy(self.links.pop())
        while self.rings:
            self.lib.so.ring_buffer__free(self.rings.pop())
        if self.ptr:
            ptr, self.ptr = self.ptr, None
            self.lib.so.bpf_object__close(ptr)


def num_possible_cpus() -> int:
    return max(1, int(lib().so.libbpf_num_possible_cpus()))
