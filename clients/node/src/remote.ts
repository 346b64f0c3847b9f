// Turning a JSON-RPC error object into the right RemoteError subclass.

import { RemoteError, type RemoteErrorData } from "./errors.js";
import { DOMAIN_ERROR_CODES, ERROR_CLASSES, PROTOCOL_ERROR_CODES, type RemoteErrorClass } from "./generated.js";

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The kind for a code, for error replies that lack `data.kind` (makad always sends it). */
function kindForCode(code: number): string | undefined {
  for (const table of [DOMAIN_ERROR_CODES, PROTOCOL_ERROR_CODES] as const) {
    for (const [kind, value] of Object.entries(table)) if (value === code) return kind;
  }
  return undefined;
}

/** The typed error for a reply's `error` member (`method` is the call it answers). */
export function remoteErrorFrom(error: unknown, method?: string): RemoteError {
  const record = isRecord(error) ? error : {};
  const code = typeof record["code"] === "number" ? record["code"] : -32603;
  const message = typeof record["message"] === "string" ? record["message"] : "malformed error reply";
  const rawData = isRecord(record["data"]) ? record["data"] : {};
  const kind = typeof rawData["kind"] === "string" ? rawData["kind"] : (kindForCode(code) ?? "unknown");
  const data: RemoteErrorData = { ...rawData, kind };
  const cls: RemoteErrorClass | undefined = Object.prototype.hasOwnProperty.call(ERROR_CLASSES, kind)
    ? (ERROR_CLASSES as Record<string, RemoteErrorClass>)[kind]
    : undefined;
  return cls ? new cls(code, message, data, method) : new RemoteError(code, message, data, method);
}
