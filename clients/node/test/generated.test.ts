// src/generated.ts must match what the generator makes of protocol/openrpc.json today.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import {
  DOMAIN_ERROR_CODES,
  ERROR_CLASSES,
  ERROR_KINDS,
  METHOD_NAMES,
  NotFoundError,
  RemoteError,
  remoteErrorFrom,
} from "../src/index.js";

// dist/test/test/ -> the package directory
const PACKAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

interface Generator {
  generate(doc: unknown): string;
  markdownCode(text: string): string;
  schemaToTs(schema: unknown): string;
  errorClassName(kind: string): string;
  readDocument(): { methods: Array<{ name: string }>; components: { errors: Record<string, { code: number }> } };
  OUTPUT_PATH: string;
}

const generator = (await import(pathToFileURL(join(PACKAGE_DIR, "scripts", "gen-types.mjs")).href)) as Generator;

describe("drift between protocol/openrpc.json and src/generated.ts", () => {
  it("the checked-in file is exactly what the generator makes of the document", () => {
    const expected = generator.generate(generator.readDocument());
    const actual = readFileSync(generator.OUTPUT_PATH, "utf8");
    assert.ok(actual === expected, "src/generated.ts is stale: run `npm run gen` in clients/node");
  });

  it("doc comments show code the Markdown way, never the docstrings' double backticks", () => {
    const actual = readFileSync(generator.OUTPUT_PATH, "utf8");
    assert.ok(!actual.includes("``"), "a ``x`` in src/generated.ts");
    assert.ok(actual.includes("`trace.path`"));
    assert.equal(generator.markdownCode("``a`` and ``b.c``, not ```fences```"), "`a` and `b.c`, not ```fences```");
  });

  it("the compiled method list matches the document's methods", () => {
    assert.deepEqual([...METHOD_NAMES], generator.readDocument().methods.map((m) => m.name));
  });

  it("every domain error of the document has its code and a class", () => {
    const errors = generator.readDocument().components.errors;
    for (const [kind, entry] of Object.entries(errors)) {
      assert.equal((DOMAIN_ERROR_CODES as Record<string, number>)[kind], entry.code);
      assert.ok((ERROR_KINDS as readonly string[]).includes(kind));
    }
    for (const kind of ERROR_KINDS) assert.equal(ERROR_CLASSES[kind].kind, kind);
  });
});

describe("schema to TypeScript", () => {
  const cases: Array<[unknown, string]> = [
    [{ type: "string" }, "string"],
    [{ type: "integer" }, "number"],
    [{ anyOf: [{ type: "string" }, { type: "null" }] }, "string | null"],
    [{ type: ["string", "null"] }, "string | null"],
    [{ enum: ["a", "b"] }, '"a" | "b"'],
    [{ const: 3 }, "3"],
    [{ $ref: "#/components/schemas/Entry" }, "Entry"],
    [{ type: "array", items: { $ref: "#/components/schemas/Entry" } }, "Entry[]"],
    [{ type: "array", items: { anyOf: [{ type: "integer" }, { type: "null" }] } }, "Array<number | null>"],
    [{ type: "array", prefixItems: [{ type: "integer" }, { type: "string" }], items: false }, "[number, string]"],
    [{ type: "object", additionalProperties: { type: "integer" } }, "Record<string, number>"],
    [{ type: "object" }, "Record<string, unknown>"],
    [{ type: "object", properties: {}, additionalProperties: false }, "Record<string, never>"],
    [{}, "unknown"],
    [{ anyOf: [{ type: "string" }, {}] }, "unknown"],
  ];
  for (const [schema, expected] of cases) {
    it(`${JSON.stringify(schema)} -> ${expected}`, () => {
      assert.equal(generator.schemaToTs(schema), expected);
    });
  }

  it("objects list required keys plainly and the others as optional, quoting odd keys", () => {
    const text = generator.schemaToTs({
      type: "object",
      properties: { a: { type: "string" }, "b-c": { type: "boolean", default: false } },
      required: ["a"],
    });
    assert.match(text, /\n {2}a: string;/);
    assert.match(text, /\/\*\* @default false \*\/\n {2}"b-c"\?: boolean;/);
  });

  it("a new method in the document appears in Methods with its params and errors", () => {
    const doc = generator.readDocument() as unknown as Record<string, unknown> & { methods: unknown[] };
    const extended = {
      ...doc,
      methods: [
        ...doc.methods,
        {
          name: "frobnicate",
          summary: "Test only.",
          params: [{ name: "workspace", required: true, schema: { type: "string" } }],
          result: { name: "result", schema: { type: "integer" } },
          errors: [{ code: -32001, message: "not_found", data: { kind: "not_found" } }],
        },
      ],
    };
    const text = generator.generate(extended);
    assert.match(text, /frobnicate: \{\n {4}params: \{\n {6}workspace: string;\n {4}\};\n {4}result: number;\n {4}errors: "not_found";/);
    assert.match(text, /export const METHOD_NAMES = \[.*"frobnicate"\]/);
  });

  it("error class names come from kinds", () => {
    assert.equal(generator.errorClassName("not_found"), "NotFoundError");
    assert.equal(generator.errorClassName("io_error"), "IoError");
    assert.equal(generator.errorClassName("method_not_found"), "MethodNotFoundError");
  });
});

describe("error replies", () => {
  it("pick the class by data.kind", () => {
    const error = remoteErrorFrom({ code: -32001, message: "no such entry", data: { kind: "not_found", id: "x" } }, "get");
    assert.ok(error instanceof NotFoundError);
    assert.equal(error.name, "NotFoundError");
    assert.equal(error.remoteMessage, "no such entry");
    assert.equal(error.data["id"], "x");
  });

  it("an unknown kind still gives a RemoteError with that kind", () => {
    const error = remoteErrorFrom({ code: -32099, message: "new", data: { kind: "brand_new" } });
    assert.equal(error.constructor, RemoteError);
    assert.equal(error.kind, "brand_new");
  });

  it("a reply without data.kind takes the kind of its code", () => {
    assert.ok(remoteErrorFrom({ code: -32001, message: "gone" }) instanceof NotFoundError);
    assert.equal(remoteErrorFrom("garbage").kind, "internal");
  });
});
