import assert from "node:assert/strict";
import { test } from "node:test";

import { parseCsv, parseCsvRows } from "../src/csv.js";

test("quoted fields keep separators, new lines and doubled quotes", () => {
  assert.deepEqual(parseCsv('a,b\n"x, y","say ""hi""\nthere"\n'), [["a", "b"], ["x, y", 'say "hi"\nthere']]);
});

test("records end at CRLF, LF or CR, and the last line needs no terminator", () => {
  assert.deepEqual(parseCsv("a\r\nb\rc\nd"), [["a"], ["b"], ["c"], ["d"]]);
});

test("a stray quote inside a field is kept; text after a closing quote is appended", () => {
  assert.deepEqual(parseCsv('a"b,"c"d\n'), [['a"b', "cd"]]);
});

test("blank lines are skipped and short rows get null for their missing columns", () => {
  const rows = parseCsvRows("text,label,extra\n\nhello,greet\n,,\n");
  assert.deepEqual(
    rows.map((r) => r.values),
    [
      { text: "hello", label: "greet", extra: null },
      { text: "", label: "", extra: "" },
    ],
  );
  assert.equal(parseCsvRows("a\n1,2\n")[0]!.extra, true);
});

test("a quoted field left open at the end of the data keeps what was read", () => {
  assert.deepEqual(parseCsv('a\n"open\nrest'), [["a"], ["open\nrest"]]);
});
