// `append_events` with more events than one message may carry, sent in consecutive parts.
//
// The daemon refuses a message over LIMITS.maxMessageBytes bytes or holding more than
// LIMITS.maxMessageValues JSON values (and closes the connection), and an append_events
// of more than LIMITS.maxAppendEvents events. A call within all three is sent as it is; a
// larger one is cut, in order, into the fewest parts that each fit, sent one after the
// other. Each part is atomic; the whole is not. With a requestId each part gets its own
// (`<requestId>:part<k>of<n>`), so retrying the whole call appends no part twice; with an
// expectedSeq each later part expects the seq the one before it ended on. The Python
// client (maka.append_parts) does the same.

import { MakaError, RemoteError } from "./errors.js";
import { LIMITS, TooLargeError } from "./generated.js";

export const APPEND_METHOD = "append_events";
/** The request's envelope beyond its params: "jsonrpc", "method", "id", framing, a part's requestId suffix. */
const ENVELOPE_SLACK_BYTES = 160;
/**
 * The JSON values `value` holds once encoded, as the daemon counts them (makad.rpc.value_cap):
 * each array element and object member one, an empty array or object one (a scalar: none).
 * Members JSON.stringify leaves out (undefined, functions) are not counted.
 */
export function countValues(value: unknown): number {
  if (value === null || typeof value !== "object") return 0;
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") {
    return countValues(JSON.parse(JSON.stringify(value) ?? "null"));
  }
  let members = 0;
  let nested = 0;
  if (Array.isArray(value)) {
    members = value.length;
    for (const child of value) nested += countValues(child);
  } else {
    for (const child of Object.values(value)) {
      if (child === undefined || typeof child === "function" || typeof child === "symbol") continue;
      members++;
      nested += countValues(child);
    }
  }
  return Math.max(members, 1) + nested;
}

/**
 * At least the bytes `value` takes as JSON, without encoding it: a string's UTF-16 units
 * at 6 bytes each (`\u0000`), a number at 24 (the longest a double prints).
 */
function byteBound(value: unknown): number {
  switch (typeof value) {
    case "string":
      return 2 + 6 * value.length;
    case "number":
      return 24;
    case "boolean":
      return 5;
    case "object":
      break;
    default:
      return 4; // null in an array, or left out
  }
  if (value === null) return 4;
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") return Buffer.byteLength(JSON.stringify(value) ?? "null");
  let total = 2;
  if (Array.isArray(value)) for (const child of value) total += byteBound(child) + 1;
  else for (const [key, child] of Object.entries(value)) total += byteBound(key) + byteBound(child) + 2;
  return total;
}

/** The `[start, end)` slices of `params.events` to send, in order; throws TooLargeError for an event no message can carry. */
export function planAppend(params: Record<string, unknown>): Array<[number, number]> {
  const events = params["events"];
  if (!Array.isArray(events) || events.length === 0) return [[0, Array.isArray(events) ? events.length : 0]];
  // The envelope's own values: 4 members ("jsonrpc", "method", "id", "params").
  if (events.length <= LIMITS.maxAppendEvents && 4 + countValues(params) <= LIMITS.maxMessageValues) {
    // Most calls are far below the byte cap: a bound tells so without encoding them (the
    // others are measured event by event below, and still sent whole when they fit).
    if (byteBound(params) <= LIMITS.maxMessageBytes - ENVELOPE_SLACK_BYTES) return [[0, events.length]];
  }
  const bare = { ...params, events: [] };
  const roomBytes = LIMITS.maxMessageBytes - Buffer.byteLength(JSON.stringify(bare)) - ENVELOPE_SLACK_BYTES;
  const roomValues = LIMITS.maxMessageValues - (4 + countValues(bare) - 1); // the empty array's one
  const parts: Array<[number, number]> = [];
  let start = 0;
  let usedBytes = 0;
  let usedValues = 0;
  events.forEach((event: unknown, index: number) => {
    const encoded = Buffer.byteLength(JSON.stringify(event) ?? "null");
    const size = encoded + 1; // its comma
    const values = 1 + countValues(event);
    checkAlone(index, eventBytes(event, encoded), size, values, roomBytes, roomValues);
    const count = index - start;
    if (count > 0 && (count === LIMITS.maxAppendEvents || usedBytes + size > roomBytes || usedValues + values > roomValues)) {
      parts.push([start, index]);
      start = index;
      usedBytes = 0;
      usedValues = 0;
    }
    usedBytes += size;
    usedValues += values;
  });
  parts.push([start, events.length]);
  return parts;
}

// The daemon measures an event as JSON with every field present (an absent one as null).
const EVENT_FIELDS = ["type", "text", "ts", "toolCallId", "toolName", "meta", "tokens"] as const;

/** The bytes of `event` (`encoded` bytes as sent) as the daemon measures it against maxEventBytes. */
function eventBytes(event: unknown, encoded: number): number {
  if (typeof event !== "object" || event === null || Array.isArray(event)) return encoded;
  const fields = event as Record<string, unknown>;
  return EVENT_FIELDS.reduce((total, name) => (fields[name] === undefined ? total + `,"${name}":null`.length : total), encoded);
}

function checkAlone(index: number, measured: number, size: number, values: number, roomBytes: number, roomValues: number): void {
  if (values > roomValues) {
    refuse(index, `holds ${values} JSON values; a message holds at most ${LIMITS.maxMessageValues}`, LIMITS.maxMessageValues, values);
  }
  if (measured > LIMITS.maxEventBytes) {
    refuse(index, `is ${measured} bytes as JSON (its absent fields as null); an event is at most ${LIMITS.maxEventBytes}`, LIMITS.maxEventBytes, measured);
  }
  if (size > roomBytes) {
    const encoded = size - 1;
    refuse(index, `is ${encoded} bytes as JSON; a message is at most ${LIMITS.maxMessageBytes}`, LIMITS.maxMessageBytes, encoded);
  }
}

function refuse(index: number, what: string, limit: number, actual: number): never {
  throw new TooLargeError(
    -32006,
    `event ${index} ${what}: nothing was sent`,
    { kind: "too_large", index, limit, actual, clientSide: true },
    APPEND_METHOD,
  );
}

interface AppendResult {
  firstSeq: number;
  lastSeq: number;
  redactions?: number;
}

/**
 * An append_events sent in parts of which the first `appended` events landed (seqs
 * `firstSeq`..`lastSeq`) and the next part failed with `cause`: refused whole, or, when
 * `failedPartUnknown` (the connection was lost, a timeout, an abort), perhaps landed.
 * With a requestId, calling again with the same params appends no part twice; without
 * one, send `events.slice(appended)` (after checking the session when `failedPartUnknown`).
 */
export class AppendPartlyDoneError extends MakaError {
  override name = "AppendPartlyDoneError";

  constructor(
    readonly appended: number,
    readonly total: number,
    readonly firstSeq: number,
    readonly lastSeq: number,
    readonly failedPartUnknown: boolean,
    readonly requestId: string | undefined,
    readonly error: Error,
  ) {
    const outcome = failedPartUnknown ? "may have landed" : "did not land";
    const retry = requestId !== undefined
      ? "calling again with the same requestId appends no part twice"
      : `send events.slice(${appended}) again`;
    super(
      `append_events in parts: the first ${appended} of ${total} events were appended (seq ${firstSeq}-${lastSeq}); ` +
        `the next part failed and ${outcome} (${error.message}); ${retry}`,
      { cause: error },
    );
  }
}

/** append_events through `call`, in parts when one message cannot carry it. */
export async function appendInParts(
  call: (params: Record<string, unknown>) => Promise<unknown>,
  params: Record<string, unknown>,
): Promise<unknown> {
  const parts = planAppend(params);
  if (parts.length === 1) return call(params);
  const events = params["events"] as unknown[];
  const requestId = typeof params["requestId"] === "string" ? params["requestId"] : undefined;
  const chained = params["expectedSeq"] !== undefined && params["expectedSeq"] !== null;
  const results: AppendResult[] = [];
  for (const [k, [start, end]] of parts.entries()) {
    const part: Record<string, unknown> = { ...params, events: events.slice(start, end) };
    if (requestId !== undefined) part["requestId"] = `${requestId}:part${k + 1}of${parts.length}`;
    const previous = results.at(-1);
    if (chained && previous !== undefined) part["expectedSeq"] = previous.lastSeq;
    try {
      results.push((await call(part)) as AppendResult);
    } catch (error) {
      const first = results[0];
      if (first === undefined || previous === undefined) throw error;
      const cause = error instanceof Error ? error : new MakaError(String(error));
      if (error instanceof RemoteError && typeof error.data["index"] === "number") {
        error.data["index"] += start; // the event's place in the whole list, not in the part
      }
      throw new AppendPartlyDoneError(start, events.length, first.firstSeq, previous.lastSeq, !(error instanceof RemoteError), requestId, cause);
    }
  }
  const first = results[0] as AppendResult;
  const last = results.at(-1) as AppendResult;
  return {
    firstSeq: first.firstSeq,
    lastSeq: last.lastSeq,
    redactions: results.reduce((sum, r) => sum + (r.redactions ?? 0), 0),
  };
}
