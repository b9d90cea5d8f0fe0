"""PNG writer: a `Scene` rasterised with Pillow (the same drawing the SVG writer emits).

Owns: drawing scene primitives with Pillow (anti-aliased by supersampling), font lookup
(DejaVu when installed, else Pillow's bundled scalable font) and the output pixel size
(``scene.width * scale`` × ``scene.height * scale``). Must not import textual, simpy or
asyncio. Pillow is imported lazily so the rest of the export package works without it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .scene import Line, Polyline, Rect, Scene, SceneTooBig, Text, arrowhead, shortened

if TYPE_CHECKING:
    from PIL import ImageDraw, ImageFont

SUPERSAMPLE = 2
"""Draw at this multiple of the output size, then downsample (smooth slanted arrows)."""
SUPERSAMPLE_MAX_PIXELS = 4_000_000
"""Bigger pictures are drawn at their output size (no supersampling), to bound memory."""
MAX_PIXELS = 20_000_000
"""Largest PNG (output pixels, e.g. 1300 × 15,000): a bigger one is refused with a hint
to crop or scale down. With `SUPERSAMPLE_MAX_PIXELS` this bounds rendering to ~10 bytes
a pixel, about 200 MB."""
MAX_SIDE = 65_000
"""Largest PNG width or height in pixels (the PNG viewers' common limit)."""

_FONT_DIRS = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/dejavu",
              "/usr/local/share/fonts", "/Library/Fonts", "C:/Windows/Fonts")
_FONT_FILES = {
    (False, False, False): "DejaVuSans.ttf", (False, True, False): "DejaVuSans-Bold.ttf",
    (False, False, True): "DejaVuSans-Oblique.ttf", (False, True, True): "DejaVuSans-Bold.ttf",
    (True, False, False): "DejaVuSansMono.ttf", (True, True, False): "DejaVuSansMono-Bold.ttf",
    (True, False, True): "DejaVuSansMono.ttf", (True, True, True): "DejaVuSansMono-Bold.ttf",
}
# Pillow's bundled font lacks these glyphs; spell them in ASCII when DejaVu is missing.
_ASCII = str.maketrans({"→": "->", "≈": "~", "µ": "u", "…": "...", "–": "-", "—": "-",
                        "×": "x", "⋮": ":"})


class PngUnavailable(RuntimeError):
    """Pillow is not installed."""


def _pil() -> Any:
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:  # pragma: no cover - Pillow is a declared dependency
        raise PngUnavailable("PNG export needs Pillow (pip install 'pillow>=10.1')") from None
    return Image, ImageDraw, ImageFont


@cache
def _font(size: int, mono: bool, bold: bool, italic: bool) -> tuple[ImageFont.FreeTypeFont, bool]:
    """(font, is_dejavu) for the given style at ``size`` px."""
    _, _, image_font = _pil()
    name = _FONT_FILES[(mono, bold, italic)]
    for folder in _FONT_DIRS:
        path = Path(folder) / name
        if path.is_file():
            return image_font.truetype(str(path), size), True
    return image_font.load_default(size), False


def _rgba(color: str, opacity: float = 1.0) -> tuple[int, int, int, int]:
    c = color.lstrip("#")
    return int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16), round(255 * opacity)


def _dashed(draw: ImageDraw.ImageDraw, pts: list[tuple[float, float]], dash: tuple[float, float],
            fill: tuple[int, int, int, int], width: int) -> None:
    on, off = dash
    for (x1, y1), (x2, y2) in zip(pts, pts[1:], strict=False):
        length = ((x2 - x1) ** 2 + (y2 - y1) ** 2) ** 0.5
        if length == 0:
            continue
        ux, uy = (x2 - x1) / length, (y2 - y1) / length
        pos = 0.0
        while pos < length:
            end = min(pos + on, length)
            draw.line([(x1 + ux * pos, y1 + uy * pos), (x1 + ux * end, y1 + uy * end)],
                      fill=fill, width=width)
            pos += on + off


def render(scene: Scene, scale: float = 1.0) -> Any:
    """The scene as a Pillow RGB image of ``round(width*scale)`` × ``round(height*scale)``.

    Raises:
        SceneTooBig: the image would pass `MAX_PIXELS` or `MAX_SIDE`.
    """
    size = (max(1, round(scene.width * scale)), max(1, round(scene.height * scale)))
    if size[0] * size[1] > MAX_PIXELS or max(size) > MAX_SIDE:
        raise SceneTooBig(f"the PNG would be {size[0]:,} × {size[1]:,} px (limit "
                          f"{MAX_PIXELS / 1e6:g} Mpx, {MAX_SIDE:,} px a side): draw part of "
                          "the run with --until-ms, lower --png-scale, or export SVG")
    image_mod, draw_mod, _ = _pil()
    sample = SUPERSAMPLE if size[0] * size[1] <= SUPERSAMPLE_MAX_PIXELS else 1
    k = scale * sample
    big = image_mod.new("RGBA", (round(scene.width * k), round(scene.height * k)),
                        _rgba(scene.background))
    draw = draw_mod.Draw(big)

    def pt(x: float, y: float) -> tuple[float, float]:
        return x * k, y * k

    for item in scene.items:
        if isinstance(item, Rect):
            box = [pt(item.x, item.y), pt(item.x + item.w, item.y + item.h)]
            if item.fill and item.opacity < 1:    # blend only the rectangle's pixels
                x0, y0 = (max(0, round(v)) for v in box[0])
                x1, y1 = min(big.width, round(box[1][0])), min(big.height, round(box[1][1]))
                if x1 > x0 and y1 > y0:
                    region = big.crop((x0, y0, x1, y1))
                    region.alpha_composite(image_mod.new("RGBA", region.size,
                                                         _rgba(item.fill, item.opacity)))
                    big.paste(region, (x0, y0))
            elif item.fill:
                draw.rectangle(box, fill=_rgba(item.fill))
            if item.stroke:
                draw.rectangle(box, outline=_rgba(item.stroke), width=max(1, round(item.width * k)))
        elif isinstance(item, Line):
            width = max(1, round(item.width * k))
            end = shortened(item, 8.0) if item.arrow else (item.x2, item.y2)
            pts = [pt(item.x1, item.y1), pt(*end)]
            if item.dash:
                _dashed(draw, pts, (item.dash[0] * k, item.dash[1] * k), _rgba(item.color), width)
            else:
                draw.line(pts, fill=_rgba(item.color), width=width)
            if item.arrow:
                draw.polygon([pt(x, y) for x, y in arrowhead(item)], fill=_rgba(item.color))
        elif isinstance(item, Polyline):
            width = max(1, round(item.width * k))
            pts = [pt(x, y) for x, y in item.points]
            if item.dash:
                _dashed(draw, pts, (item.dash[0] * k, item.dash[1] * k), _rgba(item.color), width)
            else:
                draw.line(pts, fill=_rgba(item.color), width=width, joint="curve")
        elif isinstance(item, Text):
            _text(draw, item, k)
    out = big.convert("RGB")
    del big, draw
    return out if out.size == size else out.resize(size, image_mod.Resampling.LANCZOS)


def _text(draw: ImageDraw.ImageDraw, item: Text, k: float) -> None:
    font, dejavu = _font(max(1, round(item.size * k)), item.mono, item.bold, item.italic)
    text = item.text if dejavu else item.text.translate(_ASCII)
    anchor = {"start": "ls", "middle": "ms", "end": "rs"}[item.anchor]
    xy = (item.x * k, item.y * k)
    if item.halo:
        draw.text(xy, text, font=font, anchor=anchor, fill=(255, 255, 255, 255),
                  stroke_width=round(2.5 * k), stroke_fill=(255, 255, 255, 255))
    draw.text(xy, text, font=font, anchor=anchor, fill=_rgba(item.color))


def write_png(scene: Scene, path: str | Path, scale: float = 1.0) -> None:
    """Render ``scene`` and save it as PNG at ``path`` (OSError propagates)."""
    render(scene, scale).save(str(path), format="PNG", optimize=True)
