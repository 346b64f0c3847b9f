#!/usr/bin/env node
// Generates src/generated.ts from protocol/openrpc.json (no dependencies).
//
//   node scripts/gen-types.mjs            write src/generated.ts
//   node scripts/gen-types.mjs --check    exit 1 if src/generated.ts differs from the document
//
// The conversion is generic over JSON Schema as msgspec emits it (and the usual hand-written
// forms), so new methods and schemas need no change here: only a re-run.

import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
export const PACKAGE_DIR = join(HERE, "..");
export const DOCUMENT_PATH = join(PACKAGE_DIR, "..", "..", "protocol", "openrpc.json");
export const OUTPUT_PATH = join(PACKAGE_DIR, "src", "generated.ts");

// Protocol-level kinds are not in the OpenRPC document (they belong to JSON-RPC itself);
// PROTOCOL.md lists them with their codes.
export const PROTOCOL_ERRORS = [
  ["parse_error", -32700],
  ["too_deep", -32700],
  ["invalid_request", -32600],
  ["too_large", -32600],
  ["bad_frame", -32600],
  ["method_not_found", -32601],
  ["invalid_params", -32602],
  ["internal", -32603],
];

// Names the generated module exports itself: a schema with one of these names is suffixed.
const RESERVED = new Set([
  "RemoteError", "RemoteErrorData", "RemoteErrorClass", "ERROR_CLASSES", "Methods", "MethodName", "ParamsOf", "ResultOf", "ErrorKind", "DomainErrorKind",
  "Notifications", "NotificationName", "NOTIFICATION_NAMES",
  "METHOD_NAMES", "ERROR_KINDS", "DOMAIN_ERROR_CODES", "PROTOCOL_ERROR_CODES", "PROTOCOL_VERSION",
  "Record", "Array", "Partial", "Error", "Object", "String", "Number", "Boolean", "Promise",
]);

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** TypeScript name of a component schema. */
export function typeName(name) {
  let out = String(name).replace(/[^A-Za-z0-9_$]/g, "_");
  if (!IDENTIFIER.test(out)) out = `_${out}`;
  if (RESERVED.has(out)) out = `${out}Schema`;
  return out;
}

function refName(ref) {
  const prefix = "#/components/schemas/";
  if (typeof ref !== "string" || !ref.startsWith(prefix)) return null;
  return typeName(decodeURIComponent(ref.slice(prefix.length)).replace(/~1/g, "/").replace(/~0/g, "~"));
}

function propertyKey(key) {
  return IDENTIFIER.test(key) ? key : JSON.stringify(key);
}

function literal(value) {
  return JSON.stringify(value);
}

function needsParens(type) {
  return !/^[\w$.]+$/.test(type) && !/^"[^"]*"$/.test(type);
}

function arrayOf(type) {
  return needsParens(type) ? `Array<${type}>` : `${type}[]`;
}

function union(types) {
  const unique = [...new Set(types)];
  if (unique.includes("unknown")) return "unknown";
  if (unique.length === 0) return "never";
  return unique.join(" | ");
}

function pad(depth) {
  return "  ".repeat(depth);
}

/**
 * The document's descriptions come from Python docstrings, where code is ``x`` (reST);
 * TSDoc and the editors showing it read Markdown, where that is `x`.
 */
export function markdownCode(text) {
  return text.replace(/(?<!`)``([^`\n]+?)``(?!`)/g, "`$1`");
}

/** A JSDoc block (or nothing) for a schema, a parameter or a method. */
function docComment(parts, depth) {
  const lines = [];
  for (const part of parts) {
    if (part === undefined || part === null || part === "") continue;
    for (const line of markdownCode(String(part)).split("\n")) lines.push(line.replace(/\*\//g, "*\\/"));
  }
  if (lines.length === 0) return "";
  if (lines.length === 1) return `${pad(depth)}/** ${lines[0]} */\n`;
  return `${pad(depth)}/**\n${lines.map((l) => `${pad(depth)} *${l ? ` ${l}` : ""}`).join("\n")}\n${pad(depth)} */\n`;
}

function schemaDocs(schema) {
  if (!schema || typeof schema !== "object") return [];
  const parts = [];
  if (schema.description) parts.push(schema.description);
  if (schema.format) parts.push(`@format ${schema.format}`);
  if (Object.prototype.hasOwnProperty.call(schema, "default")) parts.push(`@default ${JSON.stringify(schema.default)}`);
  if (schema.deprecated) parts.push("@deprecated");
  return parts;
}

function objectBody(properties, required, depth) {
  const lines = [];
  for (const [key, sub] of Object.entries(properties)) {
    const optional = required.has(key) ? "" : "?";
    lines.push(`${docComment(schemaDocs(sub), depth + 1)}${pad(depth + 1)}${propertyKey(key)}${optional}: ${schemaToTs(sub, depth + 1)};`);
  }
  return lines;
}

function objectType(schema, depth) {
  const properties = schema.properties && typeof schema.properties === "object" ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const extra = schema.additionalProperties;
  const hasProps = Object.keys(properties).length > 0;
  const extraType = extra === false ? null
    : extra === undefined || extra === true ? "unknown"
    : schemaToTs(extra, depth);
  if (!hasProps) {
    if (extraType === null) return "Record<string, never>";
    return `Record<string, ${extraType}>`;
  }
  const body = `{\n${objectBody(properties, required, depth).join("\n")}\n${pad(depth)}}`;
  // Without additionalProperties the schema allows more keys, but results are read by
  // name: an index signature would only weaken the property types. A typed map is kept.
  if (extra && typeof extra === "object" && extraType !== "unknown") return `${body} & Record<string, ${extraType}>`;
  return body;
}

function singleType(type, schema, depth) {
  switch (type) {
    case "string": return "string";
    case "integer":
    case "number": return "number";
    case "boolean": return "boolean";
    case "null": return "null";
    case "array": {
      if (Array.isArray(schema.prefixItems)) {
        const items = schema.prefixItems.map((s) => schemaToTs(s, depth));
        const rest = schema.items === false || schema.items === undefined ? [] : [`...${arrayOf(schemaToTs(schema.items, depth))}`];
        return `[${[...items, ...rest].join(", ")}]`;
      }
      if (schema.items === undefined || schema.items === true) return "unknown[]";
      if (schema.items === false) return "[]";
      return arrayOf(schemaToTs(schema.items, depth));
    }
    case "object": return objectType(schema, depth);
    default: return "unknown";
  }
}

/** The TypeScript type of a JSON Schema (as text). */
export function schemaToTs(schema, depth = 0) {
  if (schema === true || schema === undefined) return "unknown";
  if (schema === false) return "never";
  if (typeof schema !== "object" || schema === null) return "unknown";
  if (schema.$ref !== undefined) {
    return refName(schema.$ref) ?? "unknown";
  }
  if (Object.prototype.hasOwnProperty.call(schema, "const")) return literal(schema.const);
  if (Array.isArray(schema.enum)) return union(schema.enum.map(literal));
  const variants = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(variants)) {
    return union(variants.map((s) => schemaToTs(s, depth)));
  }
  if (Array.isArray(schema.allOf)) {
    const parts = schema.allOf.map((s) => schemaToTs(s, depth)).filter((t) => t !== "unknown");
    if (parts.length === 0) return "unknown";
    return parts.map((t) => (t.includes(" | ") ? `(${t})` : t)).join(" & ");
  }
  if (Array.isArray(schema.type)) return union(schema.type.map((t) => singleType(t, schema, depth)));
  if (typeof schema.type === "string") return singleType(schema.type, schema, depth);
  if (schema.properties) return objectType(schema, depth);
  return "unknown";
}

/** `not_found` → `NotFoundError`, `io_error` → `IoError`. */
export function errorClassName(kind) {
  return `${pascal(kind.replace(/_error$/, "")) || "Remote"}Error`;
}

function pascal(name) {
  return name.split(/[^A-Za-z0-9]+/).filter(Boolean).map((w) => w[0].toUpperCase() + w.slice(1)).join("");
}

function paramsType(method, depth) {
  const params = Array.isArray(method.params) ? method.params : [];
  if (params.length === 0) return "Record<string, never>";
  const lines = params.map((p) => {
    const optional = p.required ? "" : "?";
    const docs = [p.summary, p.description, ...schemaDocs(p.schema)];
    if (p.deprecated) docs.push("@deprecated");
    return `${docComment(docs, depth + 1)}${pad(depth + 1)}${propertyKey(p.name)}${optional}: ${schemaToTs(p.schema, depth + 1)};`;
  });
  return `{\n${lines.join("\n")}\n${pad(depth)}}`;
}

function errorKinds(method) {
  const kinds = (method.errors ?? []).map((e) => e?.data?.kind ?? e?.message).filter((k) => typeof k === "string");
  return union(kinds.map(literal).sort());
}

function declaration(name, schema) {
  const docs = docComment([schema?.description, ...schemaDocs(schema).slice(schema?.description ? 1 : 0)], 0);
  const type = schemaToTs(schema, 0);
  if (type.startsWith("{\n") && !type.includes("\n} &")) return `${docs}export interface ${name} ${type}\n`;
  return `${docs}export type ${name} = ${type};\n`;
}

/** The whole src/generated.ts for an OpenRPC document. */
export function generate(doc) {
  const out = [];
  out.push("// Generated by scripts/gen-types.mjs from protocol/openrpc.json: do not edit by hand.");
  out.push("// Regenerate with `npm run gen`; `npm test` fails when this file drifts from the document.");
  out.push("/* eslint-disable */");
  out.push("");
  out.push('import { RemoteError, type RemoteErrorData } from "./errors.js";');
  out.push("");
  out.push(`/** Version of the OpenRPC document (the daemon's version) these types were generated from. */`);
  out.push(`export const PROTOCOL_VERSION = ${literal(String(doc.info?.version ?? "0.0.0"))};`);
  out.push("");

  const schemas = doc.components?.schemas ?? {};
  const seen = new Map();
  for (const [rawName, schema] of Object.entries(schemas)) {
    const name = typeName(rawName);
    if (seen.has(name)) throw new Error(`schemas ${seen.get(name)} and ${rawName} both map to the type name ${name}`);
    seen.set(name, rawName);
    out.push(declaration(name, schema));
  }

  const methods = Array.isArray(doc.methods) ? doc.methods : [];
  out.push("/** Every method of the daemon: by-name params, result and the domain errors it declares. */");
  out.push("export interface Methods {");
  for (const method of methods) {
    out.push(docComment([method.summary, method.description, method.deprecated ? "@deprecated" : undefined], 1).trimEnd());
    out.push(`  ${propertyKey(method.name)}: {`);
    out.push(`    params: ${paramsType(method, 2)};`);
    out.push(`    result: ${schemaToTs(method.result?.schema, 2)};`);
    out.push(`    errors: ${errorKinds(method)};`);
    out.push("  };");
  }
  out.push("}");
  out.push("");
  out.push("export type MethodName = keyof Methods;");
  out.push("export type ParamsOf<M extends MethodName> = Methods[M][\"params\"];");
  out.push("export type ResultOf<M extends MethodName> = Methods[M][\"result\"];");
  out.push("");
  out.push("/** Method names in document order. */");
  out.push(`export const METHOD_NAMES = [${methods.map((m) => literal(m.name)).join(", ")}] as const satisfies readonly MethodName[];`);
  out.push("");

  const notifications = Array.isArray(doc["x-notifications"]) ? doc["x-notifications"] : [];
  out.push("/** Every notification the daemon sends (x-notifications; no id, no reply): its params. */");
  out.push("export interface Notifications {");
  for (const note of notifications) {
    out.push(docComment([note.summary], 1).trimEnd());
    out.push(`  ${propertyKey(note.name)}: ${schemaToTs(note.params, 1)};`);
  }
  out.push("}");
  out.push("");
  out.push("export type NotificationName = keyof Notifications;");
  out.push(`export const NOTIFICATION_NAMES = [${notifications.map((n) => literal(n.name)).join(", ")}] as const satisfies readonly NotificationName[];`);
  out.push("");

  out.push("/** The caps on one message and on append_events (x-limits; maxMessageBytes is the default of the daemon's --max-message-bytes). */");
  out.push("export const LIMITS = {");
  for (const [key, value] of Object.entries(doc["x-limits"] ?? {})) out.push(`  ${propertyKey(key)}: ${Number(value)},`);
  out.push("} as const;");
  out.push("");

  const domain = Object.entries(doc.components?.errors ?? {}).map(([key, e]) => [e?.data?.kind ?? key, e?.code]);
  out.push("/** Domain error kinds and their codes (components.errors). */");
  out.push("export const DOMAIN_ERROR_CODES = {");
  for (const [kind, code] of domain) out.push(`  ${propertyKey(kind)}: ${Number(code)},`);
  out.push("} as const;");
  out.push("export type DomainErrorKind = keyof typeof DOMAIN_ERROR_CODES;");
  out.push("");
  out.push("/** Protocol error kinds (JSON-RPC faults, see PROTOCOL.md) and their codes. */");
  out.push("export const PROTOCOL_ERROR_CODES = {");
  for (const [kind, code] of PROTOCOL_ERRORS) out.push(`  ${propertyKey(kind)}: ${code},`);
  out.push("} as const;");
  out.push("");
  const kinds = [...new Set([...PROTOCOL_ERRORS.map(([k]) => k), ...domain.map(([k]) => k)])];
  out.push("/** Every `error.data.kind` the daemon may send. */");
  out.push(`export const ERROR_KINDS = [${kinds.map(literal).join(", ")}] as const;`);
  out.push("export type ErrorKind = (typeof ERROR_KINDS)[number];");
  out.push("");
  const codes = new Map();
  for (const [kind, code] of [...PROTOCOL_ERRORS, ...domain]) codes.set(kind, [...(codes.get(kind) ?? []), code]);
  const dataFields = new Map(
    Object.entries(doc.components?.errors ?? {}).map(([key, e]) => [e?.data?.kind ?? key, e?.["x-dataFields"]]),
  );
  const classes = [];
  for (const kind of kinds) {
    const name = errorClassName(kind);
    if (seen.has(name) || RESERVED.has(name)) throw new Error(`error class ${name} (kind ${kind}) clashes with another name`);
    seen.set(name, kind);
    classes.push([kind, name]);
    const fields = dataFields.get(kind);
    const dataName = `${name}Data`;
    if (fields) {
      if (seen.has(dataName) || RESERVED.has(dataName)) throw new Error(`error data ${dataName} (kind ${kind}) clashes with another name`);
      seen.set(dataName, kind);
      out.push(`/** \`error.data\` of \`${kind}\`: every key but \`kind\` is present only where it applies. */`);
      out.push(`export interface ${dataName} extends RemoteErrorData {`);
      out.push(`  kind: ${literal(kind)};`);
      for (const [key, schema] of Object.entries(fields)) {
        out.push(`${docComment(schemaDocs(schema), 1)}  ${propertyKey(key)}?: ${schemaToTs(schema, 1)};`);
      }
      out.push("}");
    }
    const shown = [...new Set(codes.get(kind))].join(", ");
    out.push(`/** \`${kind}\` (code ${shown}). */`);
    out.push(`export class ${name} extends RemoteError<${literal(kind)}> {`);
    out.push(`  static readonly kind = ${literal(kind)};`);
    out.push(`  override name = ${literal(name)};`);
    if (fields) out.push(`  declare readonly data: ${dataName};`);
    out.push("}");
  }
  out.push("");
  out.push("export type RemoteErrorClass<K extends string = string> = (new (");
  out.push("  code: number, message: string, data: RemoteErrorData, method?: string,");
  out.push(") => RemoteError<K>) & { readonly kind: K };");
  out.push("");
  out.push("/** The error class for each kind. */");
  out.push("export const ERROR_CLASSES: { readonly [K in ErrorKind]: RemoteErrorClass<K> } = {");
  for (const [kind, name] of classes) out.push(`  ${propertyKey(kind)}: ${name},`);
  out.push("};");
  return `${out.join("\n")}\n`;
}

export function readDocument(path = DOCUMENT_PATH) {
  return JSON.parse(readFileSync(path, "utf8"));
}

function main(argv) {
  const check = argv.includes("--check");
  const text = generate(readDocument());
  const shown = relative(process.cwd(), OUTPUT_PATH) || OUTPUT_PATH;
  if (check) {
    let current = "";
    try {
      current = readFileSync(OUTPUT_PATH, "utf8");
    } catch {
      // a missing file is drift too
    }
    if (current !== text) {
      process.stderr.write(`${shown} is out of date with protocol/openrpc.json: run \`npm run gen\` in clients/node\n`);
      process.exit(1);
    }
    return;
  }
  writeFileSync(OUTPUT_PATH, text);
  const count = readDocument().methods?.length ?? 0;
  process.stdout.write(`wrote ${shown} (${count} methods)\n`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) main(process.argv.slice(2));
