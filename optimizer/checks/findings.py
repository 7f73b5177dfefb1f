"""What a dry-run found: one ``Finding`` per check, rendered as aligned lines with a verdict."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Finding", "render_findings"]


@dataclass(frozen=True)
class Finding:
    """One check: passed (``ok``), a warning, or a problem with its fix."""

    check: str
    ok: bool
    message: str
    fix: str = ""
    warning: bool = False


def render_findings(findings: list[Finding]) -> str:
    """The findings as aligned lines, problems followed by their fix, and a verdict."""
    lines = []
    for f in findings:
        tag = "ok  " if f.ok and not f.warning else ("warn" if f.ok else "FAIL")
        lines.append(f"  {tag}  {f.check}: {f.message}")
        if f.fix:
            lines.append(f"        fix: {f.fix}")
    problems = sum(1 for f in findings if not f.ok)
    lines.append(
        "all checks passed: the run can start"
        if not problems
        else f"{problems} problem{'s' if problems > 1 else ''}: fix {'them' if problems > 1 else 'it'} and run the dry-run again"
    )
    return "\n".join(lines)
