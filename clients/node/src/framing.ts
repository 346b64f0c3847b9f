// Message framing on the socket: NDJSON lines or LSP-style Content-Length headers.
// The daemon picks the framing from the first byte we send and answers in kind.

import { ProtocolError } from "./errors.js";

export type Framing = "ndjson" | "lsp";

const NEWLINE = 0x0a;
const HEADER_END = Buffer.from("\r\n\r\n", "latin1");
const MAX_HEADER_BYTES = 8 * 1024;

/** Bytes on the wire for one JSON-RPC message (or batch). */
export function encodeMessage(message: unknown, framing: Framing): Buffer {
  const body = Buffer.from(JSON.stringify(message), "utf8");
  if (framing === "ndjson") return Buffer.concat([body, Buffer.from("\n")]);
  return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, "latin1"), body]);
}

/**
 * Splits received bytes into parsed JSON messages. Throws ProtocolError on malformed input;
 * its `decoded` holds the messages of the same push that came whole before the fault.
 */
export interface Decoder {
  push(chunk: Buffer): unknown[];
}

export function createDecoder(framing: Framing, maxMessageBytes: number): Decoder {
  return framing === "ndjson" ? new NdjsonDecoder(maxMessageBytes) : new LspDecoder(maxMessageBytes);
}

function parse(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    throw new ProtocolError(`the daemon sent a message that is not JSON (${body.length} bytes)`);
  }
}

/** Chunks held until a whole message is in: joined once, so a long message costs O(n). */
class Chunks {
  private parts: Buffer[] = [];
  length = 0;

  add(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.parts.push(chunk);
    this.length += chunk.length;
  }

  /** The first `n` bytes, removed from the front. */
  take(n: number): Buffer {
    const all = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.length);
    const head = all.subarray(0, n);
    const rest = all.subarray(n);
    this.parts = rest.length > 0 ? [rest] : [];
    this.length = rest.length;
    return head;
  }

  /** Everything held, joined (without removing it). */
  peek(): Buffer {
    if (this.parts.length > 1) this.parts = [Buffer.concat(this.parts, this.length)];
    return this.parts[0] ?? Buffer.alloc(0);
  }
}

/** Runs `decode`, handing the messages decoded before a ProtocolError over with it. */
function pushing(decode: (out: unknown[]) => void): unknown[] {
  const out: unknown[] = [];
  try {
    decode(out);
  } catch (error) {
    if (error instanceof ProtocolError) error.decoded = out;
    throw error;
  }
  return out;
}

class NdjsonDecoder implements Decoder {
  private readonly held = new Chunks();

  constructor(private readonly max: number) {}

  push(chunk: Buffer): unknown[] {
    return pushing((out) => this.decode(chunk, out));
  }

  private decode(chunk: Buffer, out: unknown[]): void {
    let start = 0;
    let end = chunk.indexOf(NEWLINE, start);
    while (end >= 0) {
      this.held.add(chunk.subarray(start, end));
      const line = this.held.take(this.held.length);
      if (line.length > this.max) throw new ProtocolError(`a message from the daemon exceeds ${this.max} bytes`);
      if (line.toString("latin1").trim() !== "") out.push(parse(line));
      start = end + 1;
      end = chunk.indexOf(NEWLINE, start);
    }
    this.held.add(chunk.subarray(start));
    if (this.held.length > this.max) throw new ProtocolError(`a message from the daemon exceeds ${this.max} bytes`);
  }
}

class LspDecoder implements Decoder {
  private readonly held = new Chunks();
  private need: number | null = null;

  constructor(private readonly max: number) {}

  push(chunk: Buffer): unknown[] {
    return pushing((out) => this.decode(chunk, out));
  }

  private decode(chunk: Buffer, out: unknown[]): void {
    this.held.add(chunk);
    for (;;) {
      if (this.need === null) {
        const buffer = this.held.peek();
        const end = buffer.indexOf(HEADER_END);
        if (end < 0) {
          if (buffer.length > MAX_HEADER_BYTES) throw new ProtocolError("the daemon sent a header block that never ends");
          return;
        }
        this.need = contentLength(this.held.take(end + HEADER_END.length).toString("latin1"));
        if (this.need > this.max) throw new ProtocolError(`a message from the daemon exceeds ${this.max} bytes`);
      }
      if (this.held.length < this.need) return;
      out.push(parse(this.held.take(this.need)));
      this.need = null;
    }
  }
}

function contentLength(headers: string): number {
  for (const line of headers.split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon < 0) continue;
    if (line.slice(0, colon).trim().toLowerCase() !== "content-length") continue;
    const value = line.slice(colon + 1).trim();
    if (/^\d+$/.test(value)) return Number(value);
  }
  throw new ProtocolError("the daemon sent a header block without a valid Content-Length");
}
