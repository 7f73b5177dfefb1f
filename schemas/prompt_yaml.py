"""The YAML of a prompt file: a mapping of component name to text, in a small, fixed subset.

Both SDKs read prompt files (the Python one here, the TypeScript one in
``container/typescript/src/promptyaml.ts``, the same rules), so the subset is what a person
writes by hand and what ``dump_components`` writes, and nothing else:

- one ``name: value`` per component at the start of a line (a name may be double-quoted);
- a value is a literal block (``|``, ``|-`` or ``|+``, an indentation digit allowed), a
  double-quoted string on one line (JSON's escapes), a single-quoted string on one line, or a
  plain scalar on one line (taken as text as written, after a `` #`` comment is cut);
- blank lines, ``#`` comment lines and a leading ``---`` are skipped.

Folded blocks (``>``), flow collections, anchors and nested mappings are refused with a
message that names the line and the fix: a prompt's text belongs in a literal block.
"""

from __future__ import annotations

import json
import re

from schemas.exceptions import UserError

__all__ = ["dump_components", "parse_components"]

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_ENTRY = re.compile(r'^("(?:[^"\\]|\\.)*"|[^\s#"\'][^:#]*?)\s*:(?:\s+(.*))?$')
_BLOCK = re.compile(r"^[|]([1-9]?)([-+]?)([1-9]?)\s*(?:#.*)?$")
# Characters a literal block cannot hold as written: such a text is written double-quoted.
_NOT_IN_BLOCK = re.compile("[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029\ufeff]")


def dump_components(components: dict[str, str]) -> str:
    """The YAML text of ``components``, each text as a literal block where it can be one."""
    lines: list[str] = []
    for name, text in components.items():
        key = name if _PLAIN_KEY.match(name) else json.dumps(name, ensure_ascii=False)
        lines.extend(_entry(key, text))
    return "\n".join(lines) + "\n"


def _entry(key: str, text: str) -> list[str]:
    body = text.rstrip("\n")
    if not body.strip() or _NOT_IN_BLOCK.search(text):
        return [f"{key}: {json.dumps(text, ensure_ascii=False)}"]
    trailing = len(text) - len(body)
    chomp = {0: "-", 1: ""}.get(trailing, "+")
    indent = "2" if body.lstrip("\n").startswith((" ", "\t")) else ""
    out = [f"{key}: |{indent}{chomp}"]
    out.extend(f"  {line}" if line else "" for line in body.split("\n"))
    out.extend("" for _ in range(trailing - 1))
    return out


def parse_components(text: str, where: str = "the YAML file") -> dict[str, str]:
    """The components of a prompt file's YAML; ``UserError`` naming the line for anything
    outside the subset (``where`` names the file in messages)."""
    lines = text.replace("\r\n", "\n").split("\n")
    if lines[-1] == "":  # the file's last line break ends a line; it does not start one
        lines.pop()
    out: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#") or (i == 0 and line.rstrip() == "---"):
            i += 1
            continue
        match = _ENTRY.match(line)
        if line[0] in " \t" or match is None:
            raise _error(where, i, line, "expected `name: text` at the start of the line")
        key = _key(match.group(1), where, i)
        if key in out:
            raise _error(where, i, line, f"component {key!r} is given twice")
        value, i = _value(match.group(2) or "", lines, i, where)
        out[key] = value
    if not out:
        raise UserError(f"{where} holds no component: write `system_prompt: |` and the text")
    return out


def _key(raw: str, where: str, i: int) -> str:
    if raw.startswith('"'):
        return str(_quoted(raw, where, i))
    return raw.strip()


def _value(raw: str, lines: list[str], i: int, where: str) -> tuple[str, int]:
    """The text of the entry on line ``i`` and the index of the line after it."""
    raw = raw.strip()
    block = _BLOCK.match(raw)
    if block:
        return _literal(block, lines, i, where)
    if raw.startswith(">"):
        raise _error(where, i, lines[i], "folded blocks (>) change the text: use | instead")
    if raw == "" or raw.startswith(("[", "{", "&", "*", "!", "- ")):
        raise _error(where, i, lines[i], "a component's value must be text: use `|` and the text")
    if raw.startswith('"'):
        return _quoted(raw, where, i), i + 1
    if raw.startswith("'"):
        if len(raw) < 2 or not raw.endswith("'"):
            raise _error(where, i, lines[i], "a single-quoted text must end on its line")
        return raw[1:-1].replace("''", "'"), i + 1
    nxt = i + 1
    if nxt < len(lines) and lines[nxt][:1] in (" ", "\t") and lines[nxt].strip():
        raise _error(where, nxt, lines[nxt], "a plain text on several lines: use `|` instead")
    return re.split(r"\s+#", raw, maxsplit=1)[0], nxt


def _quoted(raw: str, where: str, i: int) -> str:
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, str):
        raise _error(
            where, i, raw, 'a double-quoted text must be one line with JSON escapes ("\\n")'
        )
    return value


def _literal(block: re.Match[str], lines: list[str], i: int, where: str) -> tuple[str, int]:
    """A literal block scalar starting after line ``i`` (YAML's ``|`` rules, top level)."""
    digit, chomp = block.group(1) or block.group(3), block.group(2)
    j = i + 1
    while j < len(lines) and (not lines[j].strip() or lines[j][:1] in (" ", "\t")):
        j += 1
    body = lines[i + 1 : j]
    first = next((b for b in body if b.strip()), None)
    if first is None:
        return "", j
    indent = int(digit) if digit else len(first) - len(first.lstrip(" "))
    content: list[str] = []
    for k, line in enumerate(body):
        if line.strip() and (indent == 0 or line[:indent] != " " * indent):
            raise _error(where, i + 1 + k, line, "indent every line of a block by the same spaces")
        content.append(line[indent:])
    last = max(k for k, line in enumerate(content) if line.strip())
    text = "\n".join(content[: last + 1])
    if chomp == "-":
        return text, j
    return text + "\n" * (1 + (len(content) - last - 1 if chomp == "+" else 0)), j


def _error(where: str, i: int, line: str, why: str) -> UserError:
    shown = line if len(line) <= 60 else line[:57] + "..."
    return UserError(f"{where}, line {i + 1} ({shown!r}): {why}")
