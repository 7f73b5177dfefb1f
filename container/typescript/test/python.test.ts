import assert from "node:assert/strict";
import { test } from "node:test";

import { compareCodePoints, PyFloat, pyDumps, pyFloatRepr, pyRepr, pySplitLines, pyStr, pyStrip } from "../src/python.js";

// Expected texts are what CPython 3.11 prints for the same values (checked against Python
// itself, value by value, in tests/conformance/test_parity.py).

test("json.dumps with sort_keys and compact separators, as the fingerprint hashes", () => {
  const value = { b: [1, 2.5, null, true], a: { "é": "x\ny", z: "😀" }, c: -0.0001 };
  assert.equal(
    pyDumps(value, { sortKeys: true, separators: [",", ":"] }),
    '{"a":{"z":"\\ud83d\\ude00","\\u00e9":"x\\ny"},"b":[1,2.5,null,true],"c":-0.0001}',
  );
});

test("json.dumps default separators and ensure_ascii=False keep non-ASCII text", () => {
  assert.equal(pyDumps({ k: "é\u0001" }, { ensureAscii: false }), '{"k": "é\\u0001"}');
  assert.equal(pyDumps([]), "[]");
});

test("json.dumps indent=1, as Python writes the demos component", () => {
  assert.equal(pyDumps([{ input: "x", output: "y" }, [], {}], { indent: 1 }), '[\n {\n  "input": "x",\n  "output": "y"\n },\n [],\n {}\n]');
});

test("floats are written as Python's repr", () => {
  const cases: [number, string][] = [
    [1e-7, "1e-07"],
    [1e16, "1e+16"],
    [0.1, "0.1"],
    [1.5e300, "1.5e+300"],
    [123456789012345678, "1.2345678901234568e+17"],
    [5e-324, "5e-324"],
    [100, "100.0"],
    [2.5, "2.5"],
    [0.0001, "0.0001"],
    [-1234.5, "-1234.5"],
  ];
  for (const [value, text] of cases) assert.equal(pyFloatRepr(value), text, String(value));
  assert.equal(pyDumps([new PyFloat(0), new PyFloat(1e-6), 3]), "[0.0, 1e-06, 3]");
});

test("str and repr of JSON-like values", () => {
  assert.equal(pyStr(true), "True");
  assert.equal(pyStr(null), "None");
  assert.equal(pyStr(12), "12");
  assert.equal(pyRepr("it's"), '"it\'s"');
  assert.equal(pyRepr(["a", 1, { k: false }]), "['a', 1, {'k': False}]");
});

test("strings sort by code point, not by UTF-16 unit", () => {
  assert.ok(compareCodePoints("\uffff", "😀") < 0);
  assert.ok("\uffff" > "😀"); // what JavaScript's default order would say
});

test("splitlines and strip know Python's line breaks and white space", () => {
  assert.deepEqual(pySplitLines("a\r\nb\u2028c\x1cd\n\n"), ["a", "b", "c", "d", ""]);
  assert.equal(pyStrip("\x1f\u3000 x \x85"), "x");
});
