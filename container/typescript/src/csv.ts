/**
 * CSV rows as Python's `csv.DictReader` reads them (the default `excel` dialect, not strict),
 * so both SDKs see the same rows, names and values: records end at `\r\n`, `\n` or `\r`;
 * quoted fields may hold separators, new lines and doubled quotes; a stray quote inside an
 * unquoted field is kept; blank lines are skipped; a short row gets `null` for its missing
 * columns, and a long row is reported by the caller.
 */

const EOL = Symbol("end of line");
type State = "startRecord" | "startField" | "inField" | "inQuoted" | "quoteInQuoted" | "eatCrnl";

/** One parsed row: its fields, whether it had more values than the header, its last line. */
export interface CsvRow {
  values: Record<string, string | null>;
  extra: boolean;
  /** The line the row ends on, counting from 1 (Python's `reader.line_num`). */
  line: number;
}

/** The header-keyed rows of a CSV text, blank lines skipped (as `csv.DictReader`). */
export function parseCsvRows(text: string): CsvRow[] {
  const records = parseRecords(text);
  if (records.length === 0) return [];
  const header = records[0]!.fields;
  return records.slice(1).filter((r) => r.fields.length > 0).map(({ fields, line }) => {
    const values: Record<string, string | null> = {};
    header.forEach((column, i) => {
      values[column] = i < fields.length ? fields[i]! : null;
    });
    return { values, extra: fields.length > header.length, line };
  });
}

/** Every record of a CSV text as a list of fields; a blank line is an empty record. */
export function parseCsv(text: string): string[][] {
  return parseRecords(text).map((r) => r.fields);
}

function parseRecords(text: string): { fields: string[]; line: number }[] {
  const reader = new Reader();
  const records: { fields: string[]; line: number }[] = [];
  let line = 0;
  for (const chunk of splitLines(text)) {
    line += 1;
    for (const ch of chunk) reader.step(ch);
    reader.step(EOL);
    if (reader.state === "startRecord") records.push({ fields: reader.take(), line });
  }
  if (reader.field !== "" || reader.state === "inQuoted") {
    reader.saveField(); // the data ended inside a quoted field: keep what was read
    records.push({ fields: reader.take(), line });
  }
  return records;
}

/** Lines with their terminators, split at `\r\n`, `\n` or `\r` (Python's `newline=""`). */
function splitLines(text: string): string[] {
  return text.match(/[^\r\n]*(?:\r\n|\n|\r)|[^\r\n]+$/g) ?? [];
}

class Reader {
  state: State = "startRecord";
  field = "";
  fields: string[] = [];

  take(): string[] {
    const fields = this.fields;
    this.fields = [];
    return fields;
  }

  saveField(): void {
    this.fields.push(this.field);
    this.field = "";
  }

  step(c: string | typeof EOL): void {
    const newline = c === "\n" || c === "\r";
    switch (this.state) {
      case "startRecord":
        if (c === EOL) return;
        if (newline) {
          this.state = "eatCrnl";
          return;
        }
        this.state = "startField";
        this.startField(c);
        return;
      case "startField":
        this.startField(c);
        return;
      case "inField":
        if (newline || c === EOL) this.endRecord(c);
        else if (c === ",") {
          this.saveField();
          this.state = "startField";
        } else this.field += c;
        return;
      case "inQuoted":
        if (c === EOL) return;
        if (c === '"') this.state = "quoteInQuoted";
        else this.field += c;
        return;
      case "quoteInQuoted":
        if (c === '"') {
          this.field += c;
          this.state = "inQuoted";
        } else if (c === ",") {
          this.saveField();
          this.state = "startField";
        } else if (newline || c === EOL) this.endRecord(c);
        else {
          this.field += c;
          this.state = "inField";
        }
        return;
      case "eatCrnl":
        if (c === EOL) this.state = "startRecord";
        return;
    }
  }

  private startField(c: string | typeof EOL): void {
    if (c === "\n" || c === "\r" || c === EOL) this.endRecord(c);
    else if (c === '"') this.state = "inQuoted";
    else if (c === ",") this.saveField();
    else {
      this.field += c;
      this.state = "inField";
    }
  }

  private endRecord(c: string | typeof EOL): void {
    this.saveField();
    this.state = c === EOL ? "startRecord" : "eatCrnl";
  }
}
