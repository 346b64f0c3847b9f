// Encoding and decoding of both framings, whatever the chunk boundaries.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { createDecoder, encodeMessage, ProtocolError, type Framing } from "../src/index.js";

const MESSAGES = [
  { jsonrpc: "2.0", id: 1, result: "pong" },
  { jsonrpc: "2.0", method: "memory_changed", params: { workspace: "/w", revision: 3, cause: "ünïcödé ✓ 記憶" } },
  [{ jsonrpc: "2.0", id: 2, result: null }],
];

function decodeInChunks(framing: Framing, bytes: Buffer, size: number): unknown[] {
  const decoder = createDecoder(framing, 1 << 20);
  const out: unknown[] = [];
  for (let i = 0; i < bytes.length; i += size) out.push(...decoder.push(bytes.subarray(i, i + size)));
  return out;
}

for (const framing of ["ndjson", "lsp"] as const) {
  describe(`${framing} framing`, () => {
    const bytes = Buffer.concat(MESSAGES.map((m) => encodeMessage(m, framing)));

    it("round-trips messages split at every chunk size", () => {
      for (let size = 1; size <= bytes.length; size++) {
        assert.deepEqual(decodeInChunks(framing, bytes, size), MESSAGES, `chunk size ${size}`);
      }
    });

    it("refuses a message over the cap", () => {
      const decoder = createDecoder(framing, 16);
      assert.throws(() => decoder.push(encodeMessage({ long: "x".repeat(100) }, framing)), ProtocolError);
    });
  });
}

describe("framing details", () => {
  it("ndjson skips blank lines and refuses a line that is not JSON", () => {
    const decoder = createDecoder("ndjson", 1024);
    assert.deepEqual(decoder.push(Buffer.from('\n  \n{"a":1}\n')), [{ a: 1 }]);
    assert.throws(() => decoder.push(Buffer.from("nope\n")), ProtocolError);
  });

  it("lsp headers are case-insensitive and other headers are ignored", () => {
    const decoder = createDecoder("lsp", 1024);
    const frame = 'content-type: application/json\r\ncontent-length: 7\r\n\r\n{"a":1}';
    assert.deepEqual(decoder.push(Buffer.from(frame)), [{ a: 1 }]);
  });

  it("lsp without a Content-Length is a ProtocolError", () => {
    const decoder = createDecoder("lsp", 1024);
    assert.throws(() => decoder.push(Buffer.from("X-Other: 1\r\n\r\n{}")), ProtocolError);
  });

  it("lsp counts bytes, not characters", () => {
    const frame = encodeMessage({ s: "é" }, "lsp").toString("latin1");
    assert.match(frame, /^Content-Length: 10\r\n\r\n/);
  });
});
