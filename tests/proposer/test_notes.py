"""A person's notes reach the reflection model in every proposer mode: agent, text, rule, and
the external command's folder and environment."""

from __future__ import annotations

import json
import random
from pathlib import Path

import respx

from proposer import PersonNote
from proposer.agent import agent_messages
from proposer.agent_folder import AgentFolder
from proposer.brief import brief_for_merge, brief_for_proposal
from proposer.client import ModelClient, UsageMeter
from proposer.prompts import NOTES_HEADING, notes_section
from proposer.rulemode import rule_messages
from proposer.textmode import run_text, text_messages
from proposer.types import MergeRequest
from tests.proposer.fakes import banking_request, config, parent_view
from tests.proposer.test_external import agent, external

NOTES = (
    PersonNote("Refund questions are about money coming back, never about a card."),
    PersonNote("Keep the label list as it is.", candidate_id="parent0001"),
)


def _user(messages: list[dict[str, str]]) -> str:
    return messages[-1]["content"]


def test_the_section_lists_each_note_and_says_they_outrank_the_failures() -> None:
    assert notes_section(()) == ""
    text = notes_section(NOTES)
    assert text.startswith(f"# {NOTES_HEADING}\n")
    assert "where a note and the failures disagree, the note wins" in text
    assert "- Refund questions are about money coming back, never about a card.\n" in text
    assert "- Keep the label list as it is. (about candidate parent0001 and the candidates " in text
    assert notes_section(NOTES, heading="##").startswith(f"## {NOTES_HEADING}")


def test_text_rule_and_agent_requests_show_the_notes_before_the_task() -> None:
    brief = brief_for_proposal(banking_request(notes=NOTES))
    plain = brief_for_proposal(banking_request())
    rng = random.Random(0)
    for render in (
        lambda b: _user(text_messages(b, config(), rng)),
        lambda b: _user(rule_messages(b, rng)),
        lambda b: _user(agent_messages(b, config())),
    ):
        shown, without = render(brief), render(plain)
        assert NOTES_HEADING in shown and NOTES[0].text in shown and NOTES[1].text in shown
        assert NOTES_HEADING not in without
    text = _user(text_messages(brief, config(), rng))
    assert text.index(NOTES_HEADING) < text.index("# Your task")


def test_a_merge_request_shows_the_notes_too() -> None:
    a, b = parent_view(), parent_view("Answer with the intent, politely.", "other0001")
    brief = brief_for_merge(MergeRequest("desc", (), a, b, notes=NOTES[:1]))
    assert NOTES[0].text in _user(text_messages(brief, config(), random.Random(0)))
    assert NOTES[0].text in _user(agent_messages(brief, config()))


async def test_a_text_that_takes_a_rule_from_a_note_is_an_edit_not_an_echo(
    api: respx.MockRouter,
) -> None:
    # The model writes the note's rule into the prompt, word for word: what the person asked.
    note = PersonNote(
        "Refund questions are about money coming back.\nNever answer card_arrival for them.\n"
        "A refund that is late is still request_refund."
    )
    brief = brief_for_proposal(banking_request(notes=(note,)))
    new = f"{brief.base['system_prompt']}\n{note.text}"
    reply = f"<<<COMPONENT system_prompt\n{new}\n>>>\nRATIONALE: the person's rule"
    api.post("/chat/completions").respond(
        json={
            "choices": [{"message": {"role": "assistant", "content": reply},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10},
        }
    )  # fmt: skip
    client = ModelClient(config())
    try:
        changed, _ = await run_text(UsageMeter(client), brief, config(), random.Random(0))
    finally:
        await client.aclose()
    assert changed["system_prompt"] == new


async def test_the_external_command_gets_the_notes_in_its_folder_and_environment(
    tmp_path: Path,
) -> None:
    seen = tmp_path / "seen.json"
    script = f"""
import json, os, pathlib
notes = os.environ.get("GEPA_NOTES_FILE")
pathlib.Path({str(seen)!r}).write_text(json.dumps({{
    "env": notes,
    "file": pathlib.Path(notes).read_text() if notes else None,
    "task": pathlib.Path("TASK.md").read_text(),
}}))
f = pathlib.Path(os.environ["GEPA_COMPONENT_FILES"].split()[0])
f.write_text(f.read_text() + "\\nRefunds: request_refund.\\n")
"""
    proposer = external(tmp_path, agent(tmp_path, script))
    await proposer.propose(banking_request(notes=NOTES))
    got = json.loads(seen.read_text())
    assert got["env"] == "NOTES.md"
    assert NOTES[0].text in got["file"] and NOTES[1].text in got["file"]
    assert f"## {NOTES_HEADING}" in got["task"] and "`NOTES.md`" in got["task"]

    await proposer.propose(banking_request())
    again = json.loads(seen.read_text())
    assert again["env"] is None and NOTES_HEADING not in again["task"]


def test_the_folder_writes_notes_only_when_there_are_some(tmp_path: Path) -> None:
    with_notes = brief_for_proposal(banking_request(notes=NOTES))
    folder = AgentFolder.write(tmp_path / "a", with_notes, cap=6000, rng=random.Random(0))
    assert (folder.path / "NOTES.md").read_text().startswith(f"# {NOTES_HEADING}")
    bare = AgentFolder.write(
        tmp_path / "b", brief_for_proposal(banking_request()), cap=6000, rng=random.Random(0)
    )
    assert not (bare.path / "NOTES.md").exists()
