"""Prompt files (text, JSON, the YAML subset) and prompt-registry URIs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from schemas import UserError
from schemas.prompt_file import (
    COMPONENTS_JSON,
    FORMAT_TAG,
    RegistryRef,
    components_from_registry,
    parse_registry_uri,
    prompt_file_text,
    read_prompt_file,
    registry_text,
    write_prompt_file,
)
from schemas.prompt_yaml import dump_components, parse_components

TEXTS = [
    "Classify the intent.\nReturn one label.",
    "ends with a newline\n",
    "ends with two\n\n",
    "  starts indented\nthen not",
    "\n\nstarts with blank lines",
    "a tab\there, trailing spaces   \nand unicode ✓",
    "",
    "   ",
    "a control char \x01 inside",
    "no: problem with: colons # and a hash",
]


@pytest.mark.parametrize("text", TEXTS)
def test_yaml_we_write_is_yaml_and_reads_back_as_written(text: str) -> None:
    components = {"system_prompt": text, "odd name!": "x"}
    written = dump_components(components)
    assert yaml.safe_load(written) == components  # real YAML, not a look-alike
    assert parse_components(written) == components


def test_a_multiline_text_is_a_literal_block_a_reviewer_can_read() -> None:
    written = dump_components({"system_prompt": "Line one.\nLine two.\n"})
    assert written == "system_prompt: |\n  Line one.\n  Line two.\n"


def test_yaml_written_by_hand_reads_as_yaml_reads_it() -> None:
    text = (
        "---\n# the support prompts\nsystem_prompt: |\n  Be brief.\n  Cite the policy.   # kept\n"
        "\nrouter: route by topic  # a comment\nquoted: \"a\\nb\"\nsingle: 'it''s'\n"
    )
    assert parse_components(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    ("text", "fix"),
    [
        ("a: >\n  folded\n", "use | instead"),
        ("a:\n  b: nested\n", "must be text"),
        ("a: [1, 2]\n", "must be text"),
        ("a: x\na: y\n", "given twice"),
        ("a: |\n    x\n  y\n", "line 3"),
        ("a: plain\n  continued\n", "use `|` instead"),
        ("  a: indented\n", "at the start of the line"),
        ("# only a comment\n", "holds no component"),
    ],
)
def test_yaml_outside_the_subset_is_refused_naming_the_line_and_the_fix(
    text: str, fix: str
) -> None:
    with pytest.raises(UserError, match="prompts.yaml") as caught:
        parse_components(text, "prompts.yaml")
    assert fix in str(caught.value)


@pytest.mark.parametrize("suffix", [".txt", ".md", ".prompt", ".json", ".yaml", ".yml"])
def test_a_prompt_file_round_trips_in_each_format(tmp_path: Path, suffix: str) -> None:
    components = {"system_prompt": "Answer with a label.\n\nBe brief."}
    path = write_prompt_file(tmp_path / f"p{suffix}", components)
    assert read_prompt_file(path) == components


def test_a_text_file_ends_with_a_line_break_that_is_not_part_of_the_text(tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    write_prompt_file(path, {"system_prompt": "Hello"})
    assert path.read_text() == "Hello\n"
    # An editor's final newline (or none at all) gives the same text, a text's own kept.
    for content, text in [
        ("Hello\n", "Hello"),
        ("Hello", "Hello"),
        ("Hello\r\n", "Hello"),
        ("Hello\n\n", "Hello\n"),
    ]:
        path.write_bytes(content.encode())
        assert read_prompt_file(path, component="instructions") == {"instructions": text}


def test_several_components_need_a_mapping_format(tmp_path: Path) -> None:
    components = {"system_prompt": "a", "router": "b"}
    with pytest.raises(
        UserError, match=r"2 components \(system_prompt, router\): name a .json or .yaml"
    ):
        prompt_file_text(tmp_path / "p.txt", components)
    assert json.loads(prompt_file_text(tmp_path / "p.json", components)) == components


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1]", "JSON object of component name -> text"),
        ('{"a": 1}', "must be text; not: a"),
        ("{", "not valid JSON"),
    ],
)
def test_a_bad_json_prompt_file_is_a_user_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        read_prompt_file(path)


def test_a_missing_prompt_file_names_itself(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"cannot read the prompt file .*nope.txt"):
        read_prompt_file(tmp_path / "nope.txt")


def test_registry_uris_by_alias_and_by_version() -> None:
    assert parse_registry_uri("prompts:/support@production") == RegistryRef(
        "support", alias="production"
    )
    assert parse_registry_uri("prompts:/support/3") == RegistryRef("support", version=3)
    assert RegistryRef("support", version=3).uri == "prompts:/support/3"
    for bad in ("prompts:/", "prompts:/a@", "prompts:/a/b", "prompt:/a@b", "prompts:/a@b/1"):
        with pytest.raises(UserError, match="prompts:/NAME@ALIAS"):
            parse_registry_uri(bad)


def test_a_registry_version_holds_one_text_or_the_json_of_several() -> None:
    assert registry_text({"system_prompt": "Hi"}) == ("Hi", {})
    text, tags = registry_text({"a": "x", "b": "y"})
    assert tags == {FORMAT_TAG: COMPONENTS_JSON}
    assert components_from_registry(text, tags, "v") == {"a": "x", "b": "y"}
    assert components_from_registry("Hi", {}, "v", component="instructions") == {
        "instructions": "Hi"
    }
