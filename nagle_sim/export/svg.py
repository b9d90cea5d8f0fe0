"""SVG writer: a `Scene` as a standalone SVG document (standard library only).

Owns: turning scene primitives into SVG elements with proper XML escaping (via
xml.etree.ElementTree). Must not import textual, simpy, asyncio or PIL.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from .scene import (
    FONT_FAMILY,
    MONO_FAMILY,
    Line,
    Polyline,
    Rect,
    Scene,
    Text,
    arrowhead,
    shortened,
)

SVG_NS = "http://www.w3.org/2000/svg"


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".") if v != int(v) else str(int(v))


def _points(points: tuple[tuple[float, float], ...]) -> str:
    return " ".join(f"{_num(x)},{_num(y)}" for x, y in points)


def _line(parent: ET.Element, item: Line) -> None:
    x2, y2 = shortened(item, 8.0) if item.arrow else (item.x2, item.y2)
    attrs = {"x1": _num(item.x1), "y1": _num(item.y1), "x2": _num(x2), "y2": _num(y2),
             "stroke": item.color, "stroke-width": _num(item.width)}
    if item.dash:
        attrs["stroke-dasharray"] = f"{_num(item.dash[0])} {_num(item.dash[1])}"
    ET.SubElement(parent, "line", attrs)
    if item.arrow:
        ET.SubElement(parent, "polygon", {"points": _points(arrowhead(item)),
                                          "fill": item.color})


def _rect(parent: ET.Element, item: Rect) -> None:
    attrs = {"x": _num(item.x), "y": _num(item.y), "width": _num(item.w),
             "height": _num(item.h), "fill": item.fill or "none"}
    if item.fill and item.opacity < 1:
        attrs["fill-opacity"] = f"{item.opacity:.2f}"
    if item.stroke:
        attrs["stroke"] = item.stroke
        attrs["stroke-width"] = _num(item.width)
    ET.SubElement(parent, "rect", attrs)


_XML_ILLEGAL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
"""Characters XML 1.0 cannot hold: a picture of text from anywhere stays well-formed."""


def _text(parent: ET.Element, item: Text) -> None:
    attrs = {"x": _num(item.x), "y": _num(item.y), "font-size": _num(item.size),
             "fill": item.color}
    if item.anchor != "start":
        attrs["text-anchor"] = item.anchor
    if item.bold:
        attrs["font-weight"] = "bold"
    if item.italic:
        attrs["font-style"] = "italic"
    if item.mono:
        attrs["font-family"] = MONO_FAMILY
    if item.halo:
        attrs.update({"stroke": "#ffffff", "stroke-width": "5", "stroke-linejoin": "round",
                      "paint-order": "stroke"})
    ET.SubElement(parent, "text", attrs).text = _XML_ILLEGAL.sub("\ufffd", item.text)


def _polyline(parent: ET.Element, item: Polyline) -> None:
    attrs = {"points": _points(item.points), "fill": "none", "stroke": item.color,
             "stroke-width": _num(item.width), "stroke-linejoin": "round"}
    if item.dash:
        attrs["stroke-dasharray"] = f"{_num(item.dash[0])} {_num(item.dash[1])}"
    ET.SubElement(parent, "polyline", attrs)


def to_svg(scene: Scene) -> str:
    """The whole SVG document for ``scene`` (UTF-8 text with an XML declaration)."""
    root = ET.Element("svg", {"xmlns": SVG_NS, "width": str(scene.width),
                              "height": str(scene.height),
                              "viewBox": f"0 0 {scene.width} {scene.height}",
                              "font-family": FONT_FAMILY})
    if scene.title:
        ET.SubElement(root, "title").text = scene.title
    ET.SubElement(root, "rect", {"width": "100%", "height": "100%", "fill": scene.background})
    for item in scene.items:
        if isinstance(item, Line):
            _line(root, item)
        elif isinstance(item, Rect):
            _rect(root, item)
        elif isinstance(item, Text):
            _text(root, item)
        else:
            _polyline(root, item)
    ET.indent(root, space=" ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
