"""SVG / PNG ladder and the time-sequence plot: valid, labelled, the expected size."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nagle_sim.export import export_cli, ladder_scene, tseq_scene
from nagle_sim.export.ladder import _seg_label
from nagle_sim.export.svg import to_svg
from nagle_sim.model.events import Side
from nagle_sim.trace import Trace

NS = "{http://www.w3.org/2000/svg}"


def _texts(svg_text: str) -> list[str]:
    root = ET.fromstring(svg_text.encode("utf-8"))
    assert root.tag == f"{NS}svg"
    return [el.text or "" for el in root.iter(f"{NS}text")]


def test_svg_ladder_parses_and_labels_every_segment(s1: Trace, tmp_path: Path) -> None:
    [out] = export_cli(s1, svg=tmp_path / "s1.svg")
    texts = _texts(out.read_text("utf-8"))
    for seg in s1.segments:
        assert seg.label() in " ".join(texts)
        assert _seg_label(seg) in texts
    joined = "\n".join(texts)
    assert s1.title in texts
    assert "client" in texts and "server" in texts
    assert "write 6" in joined and "read 13" in joined                  # app-call notes
    assert "Nagle holds 7 B for" in joined                              # hold bar label
    assert "delayed ACK" in joined                                      # timer bar label
    assert "later (gap compressed)" in joined                           # compressed gap
    assert "data held back" in joined and "delayed-ACK timer" in joined  # legend


def test_compressed_gap_is_labelled_with_its_duration(s1: Trace) -> None:
    stall = next(b for b, a in zip(s1.segments, s1.segments[1:], strict=False)
                 if a.t - b.t > 10_000)
    nxt = s1.segments[s1.segments.index(stall) + 1]
    texts = _texts(to_svg(ladder_scene(s1, until_ms=nxt.t / 1000)))
    gap = [t for t in texts if "later (gap compressed)" in t]
    assert gap and f"{(nxt.t - stall.t) / 1000:.1f} ms" in gap[0]


def test_linear_ladder_is_taller_than_compressed(s1: Trace) -> None:
    compressed = ladder_scene(s1, until_ms=50)
    linear = ladder_scene(s1, until_ms=50, linear=True)
    assert linear.height > compressed.height
    assert not any("gap compressed" in t for t in _texts(to_svg(linear)))


def test_overlay_draws_both_traces(s1: Trace, real: Trace) -> None:
    svg_text = to_svg(ladder_scene(s1, real))
    texts = _texts(svg_text)
    for seg in s1.segments + real.segments:
        assert _seg_label(seg) in texts
    assert "dashed: kernel (overlay)" in texts and "client data (model)" in texts
    assert 'stroke-dasharray="10 6"' in svg_text and "#e06000" in svg_text


def test_an_overlay_is_orange_only_when_it_is_the_kernel(s1: Trace, real: Trace) -> None:
    """31.7: the legend called explain's model overlay "dashed orange: overlay", where
    orange means the kernel everywhere else; a real overlay's subtitle was cut at its
    length cap ("dashed orange: real ker…")."""
    from dataclasses import replace

    from nagle_sim.trace import Source
    kernel = _texts(to_svg(ladder_scene(s1, real, until_ms=50)))
    assert not any(t.endswith("…") for t in kernel), [t for t in kernel if "…" in t]
    assert any(t.endswith("dashed orange: kernel") for t in kernel), kernel[:3]
    model = replace(s1, source=Source.MODEL)
    svg_text = to_svg(ladder_scene(replace(real, source=Source.REALNET), model))
    texts = _texts(svg_text)
    assert "dashed: model (overlay)" in texts and "client data (kernel)" in texts
    assert any(t.endswith("dashed grey: model") for t in texts)
    assert "#e06000" not in svg_text and "#6b6b6b" in svg_text


def test_text_is_escaped(s1: Trace) -> None:
    from dataclasses import replace
    odd = replace(s1, title='<a & "b">')
    svg_text = to_svg(ladder_scene(odd, until_ms=1))
    assert '<a & "b">' in _texts(svg_text)
    assert "&lt;a &amp;" in svg_text


def test_until_crops_the_picture(s1: Trace) -> None:
    texts = _texts(to_svg(ladder_scene(s1, until_ms=0.02)))
    assert "P. 1:7(6) ack 1" in texts and not any("14:20" in t for t in texts)


def test_png_ladder_renders_at_the_scene_size(s1: Trace, tmp_path: Path) -> None:
    image_mod = pytest.importorskip("PIL.Image")
    scene = ladder_scene(s1, until_ms=50)
    [out] = export_cli(s1, png=tmp_path / "s1.png", until_ms=50)
    assert out.stat().st_size > 10_000
    with image_mod.open(out) as img:
        assert img.format == "PNG"
        assert img.size == (scene.width, scene.height)
        colors = img.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colors is not None and len(colors) > 50        # not blank
        # the hold bar's red appears somewhere
        assert any(abs(r - 0xC0) < 20 and g < 60 and b < 80 for _, (r, g, b) in colors)


def test_png_scale(s1: Trace, tmp_path: Path) -> None:
    image_mod = pytest.importorskip("PIL.Image")
    scene = ladder_scene(s1, until_ms=1)
    [out] = export_cli(s1, png=tmp_path / "half.png", until_ms=1, png_scale=0.5)
    with image_mod.open(out) as img:
        assert img.size == (round(scene.width * 0.5), round(scene.height * 0.5))


def test_tseq_svg_has_axes_ibeams_acks_and_stalls(s1: Trace, tmp_path: Path) -> None:
    [out] = export_cli(s1, tseq=tmp_path / "tseq.svg")
    text = out.read_text("utf-8")
    root = ET.fromstring(text.encode("utf-8"))
    texts = [el.text or "" for el in root.iter(f"{NS}text")]
    assert "time (ms)" in texts and "seq (bytes)" in texts
    assert any(t.endswith("client → server data") for t in texts)
    data = [s for s in s1.segments if s.src is Side.CLIENT and s.length]
    beams = [el for el in root.iter(f"{NS}line") if el.get("stroke") == "#1549b8"
             and el.get("stroke-width") == "3"]
    assert len(beams) >= len(data)
    assert len(list(root.iter(f"{NS}polyline"))) >= 1                  # the ACK line
    stalls = [t for t in texts if t.endswith(" ms") and t[0].isdigit()]
    assert len(stalls) >= 5                                             # stall shading labels


def test_tseq_png_and_server_direction(s1: Trace, real: Trace, tmp_path: Path) -> None:
    image_mod = pytest.importorskip("PIL.Image")
    scene = tseq_scene(s1, real, sender=Side.SERVER)
    assert any(getattr(i, "text", "").endswith("server → client data") for i in scene.items)
    [out] = export_cli(s1, tseq=tmp_path / "tseq.png", overlay=real, sender=Side.SERVER)
    with image_mod.open(out) as img:
        assert img.size == (scene.width, scene.height)


def test_png_renders_without_dejavu(s1: Trace, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("PIL.Image")
    from nagle_sim.export import png
    monkeypatch.setattr(png, "_FONT_DIRS", ())
    png._font.cache_clear()
    try:
        scene = ladder_scene(s1, until_ms=1)
        assert png.render(scene).size == (scene.width, scene.height)
    finally:
        png._font.cache_clear()
