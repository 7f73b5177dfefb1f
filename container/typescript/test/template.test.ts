import assert from "node:assert/strict";
import { test } from "node:test";

import { TemplateError } from "../src/errors.js";
import { demosFromText, PromptTemplate } from "../src/template.js";

test("render: system, each demo as a user/assistant pair, then the task", () => {
  const template = new PromptTemplate({
    systemPrompt: "Solve it.",
    userTemplate: "Q: {question} ({unit}) {{literal}}",
    demos: [{ input: { question: "1+1", unit: "apples" }, output: "2" }],
  });
  assert.deepEqual(template.render({ question: "2+2", unit: 3 }), [
    { role: "system", content: "Solve it." },
    { role: "user", content: "Q: 1+1 (apples) {literal}" },
    { role: "assistant", content: "2" },
    { role: "user", content: "Q: 2+2 (3) {literal}" },
  ]);
  assert.deepEqual(new PromptTemplate({ systemPrompt: "s" }).render("plain"), [
    { role: "system", content: "s" },
    { role: "user", content: "plain" },
  ]);
});

test("a missing field names the template, the fields needed and the fields present", () => {
  const template = new PromptTemplate({ systemPrompt: "s", userTemplate: "Q: {question}" });
  assert.throws(
    () => template.render({ query: "x" }),
    (err: unknown) =>
      err instanceof TemplateError &&
      err.message === "user_template 'Q: {question}' needs field(s) question but the input has: query; change the template's placeholders or the input's fields",
  );
});

test("bad templates are refused when declared", () => {
  assert.throws(() => new PromptTemplate({ systemPrompt: "s", userTemplate: "no fields" }), /needs at least one \{placeholder\}/);
  assert.throws(() => new PromptTemplate({ systemPrompt: "s", userTemplate: "{x:>5}" }), /must be a plain field name/);
  assert.throws(() => new PromptTemplate({ systemPrompt: "s", userTemplate: "{x} }" }), /Single '\}' encountered/);
  assert.throws(() => new PromptTemplate({ systemPrompt: "s", userTemplate: "{x" }), /expected '\}' before end of string/);
});

test("the demos component round-trips as Python's JSON text and is checked when parsed", () => {
  const template = new PromptTemplate({ systemPrompt: "s", demos: [{ input: "é", output: "y" }] });
  assert.deepEqual(template.toComponents(), { system_prompt: "s", demos: '[\n {\n  "input": "é",\n  "output": "y"\n }\n]' });
  assert.deepEqual(template.withComponents({ system_prompt: "t", demos: "[]" }).demos, []);
  assert.throws(() => demosFromText("{"), /component 'demos' is not valid JSON/);
  assert.throws(() => demosFromText('{"input": 1}'), /must be a JSON list of \{"input", "output"\} objects, got object/);
  assert.throws(() => demosFromText('[{"input": 1}]'), /component 'demos' item 0: output: Field required; each item is/);
  const fields = new PromptTemplate({ systemPrompt: "s", userTemplate: "{question}" }).withComponents({ demos: '[{"input": {"q": 1}, "output": "x"}]' });
  assert.throws(() => fields.checkDemos(), /component 'demos' item 0: user_template '\{question\}' needs field\(s\) question/);
});
