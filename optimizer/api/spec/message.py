"""The spec's ``Message``: one chat message that reads both ways, ``.content`` and ``["content"]``.

The spec's ``score_fn`` reads ``trajectory.messages[-1].content``; the OpenAI client, the
trace and the rollout cache deal in plain ``{"role": ..., "content": ...}`` dicts. A
``Message`` is such a dict with attributes on top, so it is sent, stored, compared and
serialized as the dict it is, and read as the spec's type.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["Message", "messages_of"]


class Message(dict[str, Any]):
    """A chat message: ``message.content == message["content"]``, and equal to its plain dict.

    ``Message(role="user", content="Hi")`` or ``Message({"role": "user", "content": "Hi"})``;
    keys it lacks read as ``None`` (``tool_calls`` as ``[]``) through the attributes.
    """

    @property
    def role(self) -> str:
        """``system``, ``user``, ``assistant`` or ``tool``."""
        return str(self.get("role") or "")

    @property
    def content(self) -> Any:
        """The text (``None`` on an assistant turn that only calls tools)."""
        return self.get("content")

    @property
    def tool_calls(self) -> list[Any]:
        """The tool calls of an assistant turn, as the OpenAI API gives them."""
        return list(self.get("tool_calls") or [])

    @property
    def tool_call_id(self) -> str | None:
        """On a ``tool`` turn: the call it answers."""
        return self.get("tool_call_id")

    @property
    def name(self) -> str | None:
        """The optional ``name`` of the speaker."""
        return self.get("name")


def messages_of(messages: Iterable[Mapping[str, Any]]) -> tuple[Message, ...]:
    """Each message as a ``Message`` (already one: kept)."""
    return tuple(m if isinstance(m, Message) else Message(m) for m in messages)
