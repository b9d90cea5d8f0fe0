"""The classroom's web driver writes each packet to serve whole (nagle_sim.tui.webdriver).

The flaky classroom export (tests/browser: the export tab never loaded) was a screen
update written by the app's loop into the middle of a 64 KB file chunk the input thread
was writing to the same pipe: Textual's driver writes from both threads with a bare
os.write, and a pipe keeps only writes of up to 4 KB whole. Replacing `WholePackets`
below with Textual's own writer, ``functools.partial(os.write, fd)``, fails the first test
(measured: a foreign packet inside a chunk within the first few chunks)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable

from nagle_sim.cli.forktemplate import TemplateDriver
from nagle_sim.tui.serve import WEB_DRIVER, ClassroomServer, ServeOptions
from nagle_sim.tui.webdriver import ClassroomWebDriver, WholePackets

CHUNK = 65_597  # a deliver_chunk packet's payload for a 64 KB chunk, as serve read it


def _packet(kind: bytes, payload: bytes) -> bytes:
    return kind + len(payload).to_bytes(4, "big") + payload


def _read_packets(fd: int, slow: float) -> list[tuple[bytes, bytes]]:
    """serve's side, slowed: 4 KB reads with a pause, so the pipe is full most of the
    time (as it is when serve is busy)."""
    data = bytearray()
    while True:
        time.sleep(slow)
        piece = os.read(fd, 4096)
        if not piece:
            break
        data += piece
    packets, at = [], 0
    while at < len(data):
        kind, size = bytes(data[at:at + 1]), int.from_bytes(data[at + 1:at + 5], "big")
        packets.append((kind, bytes(data[at + 5:at + 5 + size])))
        at += 5 + size
    return packets


def _two_threads(write: Callable[[bytes], object], fd: int) -> None:
    """The app's two writers: the input thread sending chunks, the loop repainting."""
    def chunks() -> None:
        for i in range(12):
            write(_packet(b"P", bytes([ord("a") + i]) * CHUNK))

    def repaints() -> None:
        for _ in range(300):
            write(_packet(b"D", b"\x1b[H" + b"#" * 900))
            time.sleep(0.001)

    threads = [threading.Thread(target=chunks), threading.Thread(target=repaints)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    os.close(fd)


def test_packets_from_two_threads_reach_serve_whole_and_in_their_own_order() -> None:
    read_end, write_end = os.pipe()
    writer = threading.Thread(target=_two_threads, args=(WholePackets(write_end), write_end))
    writer.start()
    try:
        packets = _read_packets(read_end, slow=0.0005)
    finally:
        writer.join()
        os.close(read_end)
    kinds = [kind for kind, _ in packets]
    assert kinds.count(b"P") == 12 and kinds.count(b"D") == 300, kinds[:20]
    chunks = [payload for kind, payload in packets if kind == b"P"]
    for i, payload in enumerate(chunks):
        assert payload == bytes([ord("a") + i]) * CHUNK, f"chunk {i} holds foreign bytes"
    assert all(payload == b"\x1b[H" + b"#" * 900 for kind, payload in packets
               if kind == b"D")


def test_every_app_serve_starts_uses_it() -> None:
    """By exec: serve names the driver in TEXTUAL_DRIVER; by fork: the template's driver
    is built on it and writes through it."""
    server = ClassroomServer(ServeOptions(token="t"))
    assert server.environment["TEXTUAL_DRIVER"] == WEB_DRIVER
    module, _, name = WEB_DRIVER.partition(":")
    assert module == ClassroomWebDriver.__module__ and name == ClassroomWebDriver.__name__
    assert issubclass(TemplateDriver, ClassroomWebDriver)
    async def build() -> TemplateDriver:
        return TemplateDriver(object())  # a driver needs the running loop

    driver = asyncio.run(build())
    assert isinstance(driver._write, WholePackets) and driver._write.fd == 1
