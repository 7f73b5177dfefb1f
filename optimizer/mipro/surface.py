"""Where MIPRO puts an instruction and a demo set in a program's components.

A template program (``GET /program`` metadata ``template``, served by the container SDK for
``@optimize(baseline=PromptTemplate(...))``) has an instruction component and a demos
component holding a JSON list. Any other program gets its demos written into the
instruction component as text, after the instruction, so MIPRO works on plain prompts too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from schemas import Demo, Program, UserError, demos_to_text, task_fields
from schemas.template import SYSTEM_COMPONENT, placeholders

__all__ = ["Surface", "surface_for"]


@dataclass(frozen=True)
class Surface:
    """The instruction component, the demos component (None: inline) and the user template."""

    instruction: str
    demos: str | None = None
    user_template: str = "{input}"

    def compose(
        self, base: Mapping[str, str], instruction: str, demos: Sequence[Demo]
    ) -> dict[str, str]:
        """``base`` with this instruction and demo set in place."""
        components = dict(base)
        if self.demos is not None:
            components[self.instruction] = instruction
            components[self.demos] = demos_to_text(tuple(demos))
        else:
            components[self.instruction] = instruction + self.inline(demos)
        return components

    def inline(self, demos: Sequence[Demo]) -> str:
        """Demos as text appended to an instruction (programs without a demos component)."""
        if not demos:
            return ""
        blocks = []
        for demo in demos:
            fields = task_fields(demo.input)
            if all(name in fields for name in placeholders(self.user_template)):
                shown = self.user_template.format_map(fields)
            else:
                shown = str(demo.input)
            blocks.append(f"Input: {shown}\nOutput: {demo.output}")
        return "\n\nExamples:\n\n" + "\n\n".join(blocks)


def surface_for(program: Program) -> Surface:
    """The program's surface from its template metadata, else its prompt component."""
    names = [c.name for c in program.components]
    template = program.metadata.get("template")
    if isinstance(template, Mapping):
        instruction = str(template.get("instruction_component", SYSTEM_COMPONENT))
        demos = template.get("demos_component")
        missing = [n for n in (instruction, demos) if n is not None and n not in names]
        if missing:
            raise UserError(
                f"program {program.program_id!r} metadata.template names component(s) "
                f"{', '.join(map(str, missing))} that it does not have ({', '.join(names)})"
            )
        return Surface(
            instruction,
            str(demos) if demos else None,
            str(template.get("user_template") or "{input}"),
        )
    prompts = [c.name for c in program.components if c.kind == "prompt"]
    instruction = SYSTEM_COMPONENT if SYSTEM_COMPONENT in names else (prompts or names)[0]
    return Surface(instruction)
