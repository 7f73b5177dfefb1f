"""``frontier.svg``: reward against cost, latency and prompt length, the frontier marked (pure).

Three panels side by side, one per measured objective: every candidate is a dot at (its mean
of the objective, its train mean reward); the candidates on that panel's frontier are filled
and joined by a line, the baseline is a square and the winner a ring. A panel whose
objective no rollout reported (an unpriced student's cost) says so instead of plotting.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from optimizer.runtime.accounts.objectives import MEASURED
from optimizer.runtime.results.objectives import dollars

__all__ = ["frontier_svg"]

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 300, 230, 52, 14, 30, 42
FRONT, DOT, BASE, WIN = "#2563eb", "#94a3b8", "#0f172a", "#dc2626"


def _scale(lo: float, hi: float, a: float, b: float) -> Any:
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def _tick(name: str, value: float) -> str:
    if name == "cost_usd":
        return dollars(value)
    return f"{value:.3g}"


def _panel(name: str, candidates: Sequence[Mapping[str, Any]], x0: int) -> list[str]:
    info = MEASURED[name]
    title = f"reward vs {info.label} ({info.unit})"
    out = [f'<g transform="translate({x0},0)" data-objective="{name}">']
    out.append(f'<text x="{W / 2}" y="16" text-anchor="middle" class="t">{escape(title)}</text>')
    placed = [c for c in candidates if c.get(name) is not None]
    if not placed:
        out.append(
            f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle" class="n">'
            f"{escape(info.label)} unknown for every candidate</text></g>"
        )
        return out
    xs = [float(c[name]) for c in placed]
    ys = [float(c["reward"]) for c in placed]
    sx = _scale(min(xs), max(xs), PAD_L, W - PAD_R)
    sy = _scale(min(ys), max(ys), H - PAD_B, PAD_T)
    out.append(
        f'<line x1="{PAD_L}" y1="{H - PAD_B}" x2="{W - PAD_R}" y2="{H - PAD_B}" class="a"/>'
        f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{H - PAD_B}" class="a"/>'
    )
    for value, anchor, x in ((min(xs), "start", PAD_L), (max(xs), "end", W - PAD_R)):
        out.append(
            f'<text x="{x}" y="{H - PAD_B + 14}" text-anchor="{anchor}">{_tick(name, value)}</text>'
        )
    for value in (min(ys), max(ys)):
        out.append(
            f'<text x="{PAD_L - 4}" y="{sy(value) + 4:.1f}" text-anchor="end">{value:.3f}</text>'
        )
    out.append(
        f'<text x="{W / 2}" y="{H - 6}" text-anchor="middle">{escape(info.label)}, lower is better</text>'
    )
    front = sorted((c for c in placed if c["on_frontier"].get(name)), key=lambda c: float(c[name]))
    if len(front) > 1:
        path = " ".join(f"{sx(float(c[name])):.1f},{sy(float(c['reward'])):.1f}" for c in front)
        out.append(f'<polyline points="{path}" class="f"/>')
    for c in placed:
        out.append(_mark(c, name, sx(float(c[name])), sy(float(c["reward"]))))
    out.append("</g>")
    return out


def _mark(c: Mapping[str, Any], name: str, x: float, y: float) -> str:
    on = bool(c["on_frontier"].get(name))
    fill = FRONT if on else DOT
    label = escape(
        f"{c['candidate_id']}: reward {c['reward']:.3f}, {name} {_tick(name, float(c[name]))}"
    )
    attrs = f'data-candidate="{escape(c["candidate_id"])}" data-frontier="{str(on).lower()}"'
    if c.get("baseline"):
        shape = f'<rect x="{x - 5:.1f}" y="{y - 5:.1f}" width="10" height="10" fill="{fill}" stroke="{BASE}" {attrs}>'
    else:
        shape = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{fill}" {attrs}>'
    ring = (
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="9" fill="none" stroke="{WIN}" stroke-width="2"/>'
        if c.get("winner")
        else ""
    )
    tag = "rect" if c.get("baseline") else "circle"
    return f"{shape}<title>{label}</title></{tag}>{ring}"


def frontier_svg(section: Mapping[str, Any]) -> str:
    """The chart of a packet's ``objectives`` section as an SVG document."""
    candidates = section.get("candidates", [])
    names = list(MEASURED)
    body: list[str] = []
    for i, name in enumerate(names):
        body += _panel(name, candidates, i * W)
    legend = (
        f'<g transform="translate(8,{H + 14})" class="l">'
        f'<circle cx="6" cy="-4" r="5" fill="{FRONT}"/><text x="16" y="0">on the frontier</text>'
        f'<circle cx="126" cy="-4" r="5" fill="{DOT}"/><text x="136" y="0">dominated</text>'
        f'<rect x="220" y="-9" width="10" height="10" fill="none" stroke="{BASE}"/><text x="236" y="0">baseline</text>'
        f'<circle cx="310" cy="-4" r="8" fill="none" stroke="{WIN}" stroke-width="2"/>'
        f'<text x="324" y="0">winner ({escape(str(section.get("select", "best")))})</text></g>'
    )
    width, height = W * len(names), H + 24
    style = (
        "<style>text{font:11px sans-serif;fill:#334155}.t{font-weight:600}.n{fill:#64748b}"
        ".a{stroke:#cbd5e1}.f{fill:none;stroke:#2563eb;stroke-width:1.5;stroke-dasharray:4 2}</style>"
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="reward against cost, latency '
        f'and prompt length, the frontier marked">{style}{"".join(body)}{legend}</svg>\n'
    )
