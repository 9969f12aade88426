// Parses an AsyncAPI document with the AsyncAPI Initiative's parser and prints what it found
// as one JSON line: the diagnostics (severity 0 is an error) and, when the document parsed,
// its channels, operations and component schemas. Exits 1 when the document is invalid.
//   node validate.mjs docs/asyncapi.yaml
import { readFileSync } from "node:fs";
import { Parser } from "@asyncapi/parser";

const text = readFileSync(process.argv[2], "utf8");
const { document, diagnostics } = await new Parser().parse(text);
const errors = diagnostics.filter((d) => d.severity === 0);
const found = document && {
  version: document.version(),
  channels: document.channels().all().map((c) => c.id()),
  operations: document.operations().all().map((o) => o.id()),
  schemas: document.components().schemas().all().map((s) => s.id()),
};
const report = {
  valid: document !== undefined && errors.length === 0,
  diagnostics: diagnostics.map((d) => ({
    severity: d.severity,
    code: d.code,
    message: d.message,
    path: d.path,
  })),
  document: found ?? null,
};
process.stdout.write(JSON.stringify(report) + "\n");
process.exit(report.valid ? 0 : 1);
