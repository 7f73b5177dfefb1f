"""Prompt templates: rendering, JSON round trip, components, and template targets in the SDK."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from container import AgentResult, Candidate, Task, build_served_program, create_app, optimize
from container.target import Registry
from schemas import Demo, PromptTemplate, TemplateError, UserError, render_messages

TEMPLATE = PromptTemplate(
    system_prompt="Solve the problem. Answer with a number.",
    user_template="Problem: {question}\nUnit: {unit}",
    demos=(
        Demo(input={"question": "2 apples + 3 apples?", "unit": "apples"}, output="5"),
        Demo(input={"question": "10 km - 4 km?", "unit": "km"}, output="6"),
    ),
)


def test_render_is_system_then_demo_pairs_then_the_task() -> None:
    messages = render_messages(TEMPLATE, {"question": "7 * 6?", "unit": "none"})
    assert messages == [
        {"role": "system", "content": "Solve the problem. Answer with a number."},
        {"role": "user", "content": "Problem: 2 apples + 3 apples?\nUnit: apples"},
        {"role": "assistant", "content": "5"},
        {"role": "user", "content": "Problem: 10 km - 4 km?\nUnit: km"},
        {"role": "assistant", "content": "6"},
        {"role": "user", "content": "Problem: 7 * 6?\nUnit: none"},
    ]


def test_a_plain_input_fills_the_input_placeholder_and_braces_can_be_literal() -> None:
    template = PromptTemplate(system_prompt="s", user_template="Q: {input} {{json}}")
    assert template.render("hello")[-1] == {"role": "user", "content": "Q: hello {json}"}
    assert template.render({"input": "hi"})[-1]["content"] == "Q: hi {json}"


def test_render_names_the_missing_field_and_what_the_task_has() -> None:
    with pytest.raises(TemplateError, match=r"needs field\(s\) unit but the input has: question"):
        TEMPLATE.render({"question": "1 + 1?"})


@pytest.mark.parametrize(
    ("user_template", "message"),
    [
        ("no placeholder", "at least one {placeholder}"),
        ("{}", "plain field name"),
        ("{a.b}", "plain field name"),
        ("{oops", "not a valid format string"),
    ],
)
def test_bad_user_templates_are_refused_with_the_fix(user_template: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PromptTemplate(system_prompt="s", user_template=user_template)


def test_json_round_trip_keeps_order_and_field_values(tmp_path: Path) -> None:
    path = TEMPLATE.save(tmp_path / "t.json")
    loaded = PromptTemplate.load(path)
    assert loaded == TEMPLATE
    assert [d.output for d in loaded.demos] == ["5", "6"]
    assert json.loads(path.read_text())["user_template"] == TEMPLATE.user_template


def test_load_errors_name_the_file_and_the_field(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="does not exist"):
        PromptTemplate.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"system_prompt": "s", "demos": [{"input": "x"}]}))
    with pytest.raises(TemplateError, match=r"bad.json: demos.0.output: Field required"):
        PromptTemplate.load(bad)


def test_components_round_trip_and_bad_demos_text_is_explained() -> None:
    components = TEMPLATE.to_components()
    assert set(components) == {"system_prompt", "demos"}
    assert TEMPLATE.model_copy(update={"demos": ()}).with_components(components) == TEMPLATE
    with pytest.raises(TemplateError, match="not valid JSON"):
        TEMPLATE.with_components({"demos": "[{"})
    with pytest.raises(TemplateError, match="must be a JSON list"):
        TEMPLATE.with_components({"demos": '{"input": 1}'})
    with pytest.raises(TemplateError, match="item 1: output"):
        TEMPLATE.with_components({"demos": '[{"input": 1, "output": "a"}, {"input": 2}]'})
    assert TEMPLATE.with_components({"demos": "  "}).demos == ()


def _template_target(registry: Registry) -> object:
    @optimize(
        id="tmpl",
        baseline=PromptTemplate(system_prompt="Say the label.", user_template="Item: {input}"),
        registry=registry,
    )
    def run(task: Task, candidate: Candidate) -> AgentResult:
        messages = candidate.template.render(task.input)
        named = " ".join(m["content"] for m in messages[:-1])
        return AgentResult(output=task.expected if str(task.expected) in named else "unknown")

    return run.__gepa_target__  # type: ignore[attr-defined]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "d.jsonl"
    rows = [{"name": f"r{i}", "input": f"thing {i}", "expected": f"lab{i % 2}"} for i in range(8)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


async def test_template_target_serves_components_metadata_and_renders_candidates(
    dataset: Path,
) -> None:
    app = create_app(_template_target(Registry()), dataset=dataset)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
        program = (await client.get("/program")).json()
        assert [c["name"] for c in program["components"]] == ["system_prompt", "demos"]
        assert program["components"][1]["text"] == "[]"
        assert "JSON list" in program["components"][1]["description"]
        assert program["metadata"]["template"] == {
            "user_template": "Item: {input}",
            "instruction_component": "system_prompt",
            "demos_component": "demos",
        }
        seed = program["seeds"]["train"][0]
        expected = "lab" + str(int(seed[1:]) % 2)

        async def roll(demos: str) -> dict[str, object]:
            body = {"candidate": {"system_prompt": "Say the label.", "demos": demos}, "seed": seed}
            response = await client.post("/rollout", json=body)
            assert response.status_code == 200
            return response.json()  # type: ignore[no-any-return]

        zero = await roll("[]")
        helped = await roll(json.dumps([{"input": "other", "output": expected}]))
        broken = await roll("[{not json")
        # A demo whose input lacks the template's field (as a proposer may write it).
        misfit = await roll(json.dumps([{"input": {"text": "x"}, "output": expected}]))
    assert (zero["reward"], helped["reward"]) == (0.0, 1.0)
    assert helped["trace"]["events"][0] == {
        "type": "task",
        "seed": seed,
        "input": {"input": f"thing {seed[1:]}"},
        "expected": expected,
    }
    assert broken["reward"] == 0.0 and "not valid JSON" in str(broken["feedback"])
    assert misfit["reward"] == 0.0
    assert "'demos' item 0: user_template 'Item: {input}' needs field(s) input" in str(
        misfit["feedback"]
    )


def test_user_template_is_part_of_the_fingerprint(dataset: Path) -> None:
    def fingerprint(user_template: str) -> str:
        @optimize(
            id="fp",
            baseline=PromptTemplate(system_prompt="s", user_template=user_template),
            registry=Registry(),
        )
        def run(task: Task, candidate: Candidate) -> str:
            return "x"

        target = run.__gepa_target__  # type: ignore[attr-defined]
        return build_served_program(target, dataset=dataset).program.fingerprint

    assert fingerprint("A: {input}") != fingerprint("B: {input}")
    assert fingerprint("A: {input}") == fingerprint("A: {input}")


def test_candidate_template_needs_a_template_target() -> None:
    with pytest.raises(UserError, match=r"baseline=PromptTemplate"):
        _ = Candidate(components={"system_prompt": "x"}).template
