// `append_events` with more events than one message may carry, sent in consecutive parts.
//
// The daemon refuses a message over LIMITS.maxMessageBytes bytes or holding more than
// LIMITS.maxMessageValues JSON values (and closes the connection), and an append_events
// of more than LIMITS.maxAppendEvents events. A call within all three is sent as it is; a
// larger one is cut, in order, into the fewest parts that each fit, sent one after the
// other. Each part is atomic; the whole is not. With a requestId each part gets its own
// (`<requestId>:part<k>of<n>`), so retrying the whole call appends no part twice; with an
// expectedSeq each later part expects the seq the one before it ended on. An error about
// one event names it by its place in the whole list (data.index, data.path, the message).
// The Python client (maka.append_parts) does the same.
//
// A daemon started with a smaller --max-message-bytes refuses a part over its cap
// (too_large with data.cap "maxMessageBytes" and data.limit its cap; the request did not
// run). The client then keeps that cap for its later calls (until one holds an event over
// it: the daemon may have been restarted with the default since, so that call is sent at
// the defaults and the cap learned again if it still holds) and cuts what is left again,
// once: each part planned with the default caps is cut into pieces that fit the daemon's
// cap, named `<part's requestId>:part<j>of<m>` when there is more than one. The names
// depend only on the events and the two caps, so a retry against the same daemon (by this
// client, or a new one that learns the cap the same way) appends no piece twice.

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

/** The caps a client plans with: the generated defaults, or the daemon's once learned. */
export type Limits = { -readonly [K in keyof typeof LIMITS]: number };

/** The `[start, end)` slices of `params.events` to send, in order; throws TooLargeError for an event no message can carry. */
export function planAppend(params: Record<string, unknown>, limits: Limits = LIMITS): Array<[number, number]> {
  const events = params["events"];
  if (!Array.isArray(events) || events.length === 0) return [[0, Array.isArray(events) ? events.length : 0]];
  // The envelope's own values: 4 members ("jsonrpc", "method", "id", "params").
  if (events.length <= limits.maxAppendEvents && 4 + countValues(params) <= limits.maxMessageValues) {
    // Most calls are far below the byte cap: a bound tells so without encoding them (the
    // others are measured event by event below, and still sent whole when they fit).
    if (byteBound(params) <= limits.maxMessageBytes - ENVELOPE_SLACK_BYTES) return [[0, events.length]];
  }
  const bare = { ...params, events: [] };
  const roomBytes = limits.maxMessageBytes - Buffer.byteLength(JSON.stringify(bare)) - ENVELOPE_SLACK_BYTES;
  const roomValues = limits.maxMessageValues - (4 + countValues(bare) - 1); // the empty array's one
  const parts: Array<[number, number]> = [];
  let start = 0;
  let usedBytes = 0;
  let usedValues = 0;
  events.forEach((event: unknown, index: number) => {
    const encoded = Buffer.byteLength(JSON.stringify(event) ?? "null");
    const size = encoded + 1; // its comma
    const values = 1 + countValues(event);
    checkAlone(limits, index, eventBytes(event, encoded), size, values, roomBytes, roomValues);
    const count = index - start;
    if (count > 0 && (count === limits.maxAppendEvents || usedBytes + size > roomBytes || usedValues + values > roomValues)) {
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

function checkAlone(limits: Limits, index: number, measured: number, size: number, values: number, roomBytes: number, roomValues: number): void {
  if (values > roomValues) {
    refuse(index, `holds ${values} JSON values; a message holds at most ${limits.maxMessageValues}`, limits.maxMessageValues, values);
  }
  if (measured > limits.maxEventBytes) {
    refuse(index, `is ${measured} bytes as JSON (its absent fields as null); an event is at most ${limits.maxEventBytes} bytes`, limits.maxEventBytes, measured);
  }
  if (size > roomBytes) {
    const encoded = size - 1;
    refuse(index, `is ${encoded} bytes as JSON; a message is at most ${limits.maxMessageBytes} bytes`, limits.maxMessageBytes, encoded);
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

/**
 * Name the event `error` is about by its place in the whole list, not in the part that
 * began at `start`: in data.index, data.path and the message alike.
 */
function countFrom(error: RemoteError, start: number): void {
  const index = error.data["index"];
  if (typeof index === "number") {
    error.data["index"] = index + start;
    const named = new RegExp(`\\bevent ${index}\\b`);
    const rebased = `event ${index + start}`;
    (error as { remoteMessage: string }).remoteMessage = error.remoteMessage.replace(named, rebased);
    error.message = error.message.replace(named, rebased);
  }
  const path = error.data["path"];
  if (typeof path === "string") {
    error.data["path"] = path.replace(/^\$\.events\[(\d+)\]/, (_, n: string) => `$.events[${Number(n) + start}]`);
  }
}

/** A piece to send: its events' `[start, end)` and its requestId (undefined without one). */
type Piece = [number, number, string | undefined];

function sameAsDefaults(limits: Limits): boolean {
  return (Object.keys(LIMITS) as Array<keyof Limits>).every((key) => limits[key] === LIMITS[key]);
}

/**
 * What to send, in order: the parts planned with the default caps, each cut again when
 * `limits` (the daemon's, once known) is smaller. A piece's requestId depends on nothing
 * else, so that retrying the call appends no piece twice.
 */
export function appendPieces(params: Record<string, unknown>, limits: Limits = LIMITS): Piece[] {
  const outer = planAppend(params);
  const events = params["events"];
  const requestId = typeof params["requestId"] === "string" ? params["requestId"] : undefined;
  const out: Piece[] = [];
  for (const [k, [start, end]] of outer.entries()) {
    const name = requestId === undefined ? undefined : outer.length === 1 ? requestId : `${requestId}:part${k + 1}of${outer.length}`;
    if (sameAsDefaults(limits) || !Array.isArray(events)) {
      out.push([start, end, name]);
      continue;
    }
    const part: Record<string, unknown> = { ...params, events: events.slice(start, end) };
    if (name !== undefined) part["requestId"] = name;
    let inner: Array<[number, number]>;
    try {
      inner = planAppend(part, limits);
    } catch (error) {
      if (error instanceof TooLargeError) countFrom(error, start);
      throw error;
    }
    for (const [j, [a, b]] of inner.entries()) {
      const pieceName = name === undefined || inner.length === 1 ? name : `${name}:part${j + 1}of${inner.length}`;
      out.push([start + a, start + b, pieceName]);
    }
  }
  return out;
}

/** The daemon's byte cap when `error` is its refusal of a message over a cap smaller than `limits` says; else undefined. */
function learnedCap(error: unknown, limits: Limits): number | undefined {
  if (!(error instanceof TooLargeError) || error.data["clientSide"]) return undefined;
  const limit = error.data["limit"];
  if (error.data["cap"] !== "maxMessageBytes" || typeof limit !== "number") return undefined;
  return limit < limits.maxMessageBytes ? limit : undefined;
}

/**
 * The pieces at the caps the client knows; at the defaults when an event is over a cap it
 * learned but within the defaults: the daemon that cap came from may have been restarted
 * with larger ones since, so it is asked (and, when the cap still holds, refuses the
 * message and the client learns it again).
 */
function firstPieces(params: Record<string, unknown>, limits: Limits): Piece[] {
  try {
    return appendPieces(params, limits);
  } catch (error) {
    if (!(error instanceof TooLargeError) || sameAsDefaults(limits)) throw error;
  }
  const first = appendPieces(params, LIMITS); // throws when the defaults refuse it too
  Object.assign(limits, LIMITS);
  return first;
}

/**
 * append_events through `call`, in parts when one message cannot carry it. `limits`: the
 * daemon's caps as this client knows them (its byte cap is lowered when the daemon refuses
 * a part over a smaller one; what is left is then cut again, once).
 */
export async function appendInParts(
  call: (params: Record<string, unknown>) => Promise<unknown>,
  params: Record<string, unknown>,
  limits: Limits = { ...LIMITS },
): Promise<unknown> {
  let todo = firstPieces(params, limits);
  // One piece is the call as it is (its requestId too): sent unchanged.
  let whole = todo.length === 1;
  let resplit = false;
  const events = (Array.isArray(params["events"]) ? params["events"] : []) as unknown[];
  const requestId = typeof params["requestId"] === "string" ? params["requestId"] : undefined;
  const chained = params["expectedSeq"] !== undefined && params["expectedSeq"] !== null;
  const results: AppendResult[] = [];
  const fail = (start: number, error: unknown): never => {
    const first = results[0];
    const previous = results.at(-1);
    if (first === undefined || previous === undefined) throw error;
    const cause = error instanceof Error ? error : new MakaError(String(error));
    if (error instanceof RemoteError && !error.data["clientSide"]) countFrom(error, start);
    throw new AppendPartlyDoneError(start, events.length, first.firstSeq, previous.lastSeq, !(error instanceof RemoteError), requestId, cause);
  };
  while (todo.length > 0) {
    const [start, end, name] = todo[0] as Piece;
    let request = params;
    if (!whole) {
      request = { ...params, events: events.slice(start, end) };
      if (name !== undefined) request["requestId"] = name;
      const previous = results.at(-1);
      if (chained && previous !== undefined) request["expectedSeq"] = previous.lastSeq;
    }
    try {
      results.push((await call(request)) as AppendResult);
      todo.shift();
    } catch (error) {
      const cap = resplit ? undefined : learnedCap(error, limits);
      if (cap === undefined) return fail(start, error);
      resplit = true;
      limits.maxMessageBytes = cap;
      let left: Piece[];
      try {
        left = appendPieces(params, limits).filter((piece) => piece[0] >= start);
      } catch (refused) {
        return fail(start, refused);
      }
      if (left[0]?.[0] !== start) return fail(start, error);
      todo = left;
      whole = false;
    }
  }
  if (results.length === 1) return results[0];
  const first = results[0] as AppendResult;
  const last = results.at(-1) as AppendResult;
  return {
    firstSeq: first.firstSeq,
    lastSeq: last.lastSeq,
    redactions: results.reduce((sum, r) => sum + (r.redactions ?? 0), 0),
  };
}
