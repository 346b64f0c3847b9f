// An append_events of more events than one message may carry: the client sends it in
// consecutive parts, in order, against a real makad, and says which part landed when one fails.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import {
  AppendPartlyDoneError,
  countValues,
  InvalidParamsError,
  LIMITS,
  MakaClient,
  planAppend,
  TooLargeError,
  type EventInput,
} from "../src/index.js";
import { appendInParts } from "../src/append-parts.js";
import { Daemon } from "./helpers/daemon.js";

/** `count` note events numbered from `start`, each with `meta` meta entries. */
function notes(count: number, meta = 0, start = 0): EventInput[] {
  const extra = meta > 0 ? { meta: Object.fromEntries(Array.from({ length: meta }, (_, j) => [`k${j}`, "v"])) } : {};
  return Array.from({ length: count }, (_, i) => ({ type: "note" as const, text: `e${start + i}`, ...extra }));
}

describe("planning the parts", () => {
  it("counts values as the daemon does: elements and members, an empty container one, nothing in strings", () => {
    assert.equal(countValues({ a: [1, 2], b: {}, c: "x,[{\"", d: undefined }), 3 + 2 + 1);
  });

  it("sends a call within every cap as it is, in one request", () => {
    assert.deepEqual(planAppend({ workspace: "/w", sessionId: "s", events: notes(10) }), [[0, 10]]);
  });

  for (const [name, events] of [
    ["values", notes(12_000, 20)],
    ["count", notes(25_000)],
    ["bytes", Array.from({ length: 40 }, () => ({ type: "note", text: "x".repeat(1 << 20) }))],
  ] as const) {
    it(`cuts a batch over the ${name} cap into consecutive parts that each fit every cap`, () => {
      const params = { workspace: "/w", sessionId: "s", events: [...events] };
      const parts = planAppend(params);
      assert.ok(parts.length > 1);
      assert.equal(parts[0]?.[0], 0);
      assert.equal(parts.at(-1)?.[1], events.length);
      for (let k = 1; k < parts.length; k++) assert.equal(parts[k]?.[0], parts[k - 1]?.[1]);
      for (const [start, end] of parts) {
        const message = JSON.stringify({ jsonrpc: "2.0", id: 2 ** 53, method: "append_events", params: { ...params, events: events.slice(start, end) } });
        assert.ok(end - start <= LIMITS.maxAppendEvents);
        assert.ok(countValues(JSON.parse(message)) <= LIMITS.maxMessageValues);
        assert.ok(Buffer.byteLength(message) < LIMITS.maxMessageBytes);
      }
    });
  }
});

describe("a part that fails", () => {
  it("names an event of a later part by its place in the whole list", async () => {
    const sizes: number[] = [];
    const call = async (part: Record<string, unknown>) => {
      sizes.push((part["events"] as unknown[]).length);
      if (sizes.length === 2) throw new TooLargeError(-32006, "event 3 is over 8388608 bytes as JSON", { kind: "too_large", index: 3 });
      return { firstSeq: 1, lastSeq: 10_000 };
    };
    await assert.rejects(appendInParts(call, { workspace: "/w", sessionId: "s", events: notes(10_010) }), (error: unknown) => {
      assert.ok(error instanceof AppendPartlyDoneError);
      assert.ok(error.error instanceof TooLargeError);
      assert.equal(error.error.data["index"], 10_003);
      assert.equal(error.error.remoteMessage, "event 10003 is over 8388608 bytes as JSON");
      assert.match(error.error.message, /^event 10003 is over/);
      assert.match(error.message, /event 10003 is over/);
      assert.doesNotMatch(error.message, /event 3 /);
      assert.equal(error.failedPartUnknown, false);
      return true;
    });
    assert.deepEqual(sizes, [10_000, 10]);
  });
});

describe("appending in parts to a real daemon", () => {
  let daemon: Daemon;
  let client: MakaClient;

  before(async () => {
    daemon = await Daemon.start();
    client = new MakaClient({ socketPath: daemon.socketPath });
  });

  after(async () => {
    await client.close();
    await daemon.dispose();
  });

  async function openSession(): Promise<string> {
    return (await client.call("open_session", { workspace: daemon.workspace })).sessionId;
  }

  it("appends more events than the per-call cap in one call, in order", async () => {
    const sessionId = await openSession();
    const result = await client.call("append_events", { workspace: daemon.workspace, sessionId, events: notes(10_001) });
    assert.deepEqual([result.firstSeq, result.lastSeq], [1, 10_001]);
    const tail = await client.call("read_events", { workspace: daemon.workspace, sessionId, afterSeq: 9_999 });
    assert.deepEqual(tail.events.map((e) => e.text), ["e9999", "e10000"]);
  });

  it("appends events too rich in meta for one message, and a retry with the same requestId appends nothing", async () => {
    const sessionId = await openSession();
    const params = { workspace: daemon.workspace, sessionId, events: notes(3_000, 40), requestId: "batch-1" };
    const first = await client.call("append_events", params);
    const again = await client.call("append_events", params);
    assert.deepEqual(first, { firstSeq: 1, lastSeq: 3_000, redactions: 0 });
    assert.deepEqual(again, first);
    const last = await client.call("read_events", { workspace: daemon.workspace, sessionId, afterSeq: 2_999 });
    assert.equal(last.lastSeq, 3_000);
    assert.equal(last.events[0]?.text, "e2999");
  });

  it("says which part landed when a later part is refused", async () => {
    const sessionId = await openSession();
    const events = notes(10_005);
    events[10_002] = { type: "not_a_type", text: "bad" } as unknown as EventInput;
    await assert.rejects(client.callRaw("append_events", { workspace: daemon.workspace, sessionId, events }), (error: unknown) => {
      assert.ok(error instanceof AppendPartlyDoneError, String(error));
      assert.deepEqual([error.appended, error.total, error.firstSeq, error.lastSeq], [10_000, 10_005, 1, 10_000]);
      assert.equal(error.failedPartUnknown, false);
      assert.ok(error.error instanceof InvalidParamsError);
      assert.equal(error.error.data["path"], "$.events[10002].type");
      assert.match(error.message, /the first 10000 of 10005 events were appended/);
      assert.match(error.message, /events\.slice\(10000\)/);
      return true;
    });
    const head = await client.call("read_events", { workspace: daemon.workspace, sessionId, limit: 1 });
    assert.equal(head.lastSeq, 10_000);
  });

  it("refuses an event no message can carry before sending anything, naming the cap", async () => {
    const sessionId = await openSession();
    const huge = { type: "note", text: "x", meta: Object.fromEntries(Array.from({ length: 100_001 }, (_, j) => [`k${j}`, ""])) };
    await assert.rejects(
      client.callRaw("append_events", { workspace: daemon.workspace, sessionId, events: [...notes(3), huge] }),
      (error: unknown) => {
        assert.ok(error instanceof TooLargeError, String(error));
        assert.equal(error.data["index"], 3);
        assert.equal(error.data["limit"], 100_000);
        assert.match(error.message, /100000.*nothing was sent/);
        return true;
      },
    );
    const head = await client.call("read_events", { workspace: daemon.workspace, sessionId });
    assert.equal(head.lastSeq, 0);
  });

  it("refuses an event over maxEventBytes as the daemon measures it (absent fields as null) before any part lands", async () => {
    const sessionId = await openSession();
    const big: EventInput = { type: "note", text: "x".repeat(LIMITS.maxEventBytes - 40) };
    assert.ok(Buffer.byteLength(JSON.stringify(big)) < LIMITS.maxEventBytes);
    await assert.rejects(
      client.callRaw("append_events", { workspace: daemon.workspace, sessionId, events: [...notes(10_000), big] }),
      (error: unknown) => {
        assert.ok(error instanceof TooLargeError, String(error));
        assert.equal(error.data["index"], 10_000);
        assert.equal(error.data["clientSide"], true);
        return true;
      },
    );
    const head = await client.call("read_events", { workspace: daemon.workspace, sessionId });
    assert.equal(head.lastSeq, 0);
  });

  it("a message over the value cap (not an append) rejects with a TooLargeError saying why, and the next call works", async () => {
    const refs = Array.from({ length: 100_001 }, (_, i) => `event:s:${i}`);
    await assert.rejects(client.callRaw("retrieve", { workspace: daemon.workspace, refs }), (error: unknown) => {
      assert.ok(error instanceof TooLargeError, String(error));
      assert.equal(error.data["limit"], 100_000);
      assert.match(error.message, /more than 100000 values/);
      return true;
    });
    assert.equal(await client.call("ping"), "pong");
  });
});

describe("appending to a daemon with a smaller byte cap", () => {
  const SMALL_CAP = 64 * 1024;
  let daemon: Daemon;
  let client: MakaClient;

  before(async () => {
    daemon = await Daemon.start(["--max-message-bytes", String(SMALL_CAP)]);
    client = new MakaClient({ socketPath: daemon.socketPath });
  });

  after(async () => {
    await client.close();
    await daemon.dispose();
  });

  /** `count` note events of `size` bytes of text, numbered from 0. */
  function wideNotes(count: number, size = 2_000): EventInput[] {
    return Array.from({ length: count }, (_, i) => ({ type: "note" as const, text: `e${i} ${"x".repeat(size)}` }));
  }

  async function openSession(on: MakaClient = client): Promise<string> {
    return (await on.call("open_session", { workspace: daemon.workspace })).sessionId;
  }

  async function lastSeq(sessionId: string): Promise<number> {
    return (await client.call("read_events", { workspace: daemon.workspace, sessionId, limit: 1 })).lastSeq;
  }

  it("reports the caps it enforces in status.limits", async () => {
    const { limits } = await client.call("status");
    assert.equal(limits?.maxMessageBytes, SMALL_CAP);
    assert.equal(limits?.maxAppendEvents, LIMITS.maxAppendEvents);
    assert.equal(limits?.maxMessageValues, LIMITS.maxMessageValues);
  });

  it("cuts an append again at the daemon's cap: every event lands once, in order", async () => {
    const fresh = new MakaClient({ socketPath: daemon.socketPath });
    try {
      const sessionId = await openSession(fresh);
      const events = wideNotes(200);
      const result = await fresh.call("append_events", { workspace: daemon.workspace, sessionId, events, expectedSeq: 0 });
      assert.deepEqual([result.firstSeq, result.lastSeq], [1, 200]);
      const page = await fresh.call("read_events", { workspace: daemon.workspace, sessionId, limit: 1_000 });
      assert.deepEqual(page.events.map((e) => e.text), events.map((e) => e.text));
    } finally {
      await fresh.close();
    }
  });

  it("a retry with the same requestId appends nothing twice, by the client that learned the cap or a new one", async () => {
    const sessionId = await openSession();
    const params = { workspace: daemon.workspace, sessionId, events: notes(10_050), requestId: "cut-1" };
    const first = await client.call("append_events", params);
    const again = await client.call("append_events", params);
    const fresh = new MakaClient({ socketPath: daemon.socketPath });
    try {
      const third = await fresh.call("append_events", params);
      assert.deepEqual([first.firstSeq, first.lastSeq], [1, 10_050]);
      assert.deepEqual(again, first);
      assert.deepEqual(third, first);
    } finally {
      await fresh.close();
    }
    assert.equal(await lastSeq(sessionId), 10_050);
  });

  it("a cut append refused midway, retried on a new client, appends none of what landed again", async () => {
    const sessionId = await openSession();
    const events = wideNotes(200);
    events[150] = { type: "not_a_type", text: "bad" } as unknown as EventInput;
    const params = { workspace: daemon.workspace, sessionId, events, requestId: "cut-2" };
    let landed = -1;
    const fresh = new MakaClient({ socketPath: daemon.socketPath });
    try {
      for (const on of [fresh, client]) {
        await assert.rejects(on.callRaw("append_events", params), (error: unknown) => {
          assert.ok(error instanceof AppendPartlyDoneError, String(error));
          assert.ok(error.error instanceof InvalidParamsError);
          if (landed === -1) landed = error.appended;
          assert.equal(error.appended, landed);
          return true;
        });
      }
    } finally {
      await fresh.close();
    }
    assert.ok(landed > 0 && landed <= 150);
    assert.equal(await lastSeq(sessionId), landed);
  });

  for (const before of [3, 10_003]) {
    it(`refuses an event over the daemon's cap after ${before} others, naming that cap and its place in the whole list; nothing lands`, async () => {
      const sessionId = await openSession();
      const events = [...notes(before), { type: "note" as const, text: "x".repeat(100_000) }];
      await assert.rejects(client.callRaw("append_events", { workspace: daemon.workspace, sessionId, events }), (error: unknown) => {
        assert.ok(error instanceof TooLargeError, String(error));
        assert.equal(error.data["limit"], SMALL_CAP);
        assert.equal(error.data["index"], before);
        assert.match(error.message, new RegExp(`^event ${before} is `));
        return true;
      });
      assert.equal(await lastSeq(sessionId), 0);
    });
  }
});

describe("a cap learned from a daemon since restarted with the default", () => {
  it("does not make the client refuse an event over it: the daemon is asked", async () => {
    const SMALL_CAP = 64 * 1024;
    const daemon = await Daemon.start(["--max-message-bytes", String(SMALL_CAP)]);
    const client = new MakaClient({ socketPath: daemon.socketPath });
    try {
      const { sessionId } = await client.call("open_session", { workspace: daemon.workspace });
      const wide = Array.from({ length: 200 }, (_, i) => ({ type: "note" as const, text: `e${i} ${"x".repeat(2_000)}` }));
      await client.call("append_events", { workspace: daemon.workspace, sessionId, events: wide });
      const big = [{ type: "note" as const, text: "x".repeat(100_000) }];
      await assert.rejects(client.callRaw("append_events", { workspace: daemon.workspace, sessionId, events: big }), (error: unknown) => {
        assert.ok(error instanceof TooLargeError, String(error));
        assert.equal(error.data["limit"], SMALL_CAP); // that cap still holds: refused, naming it
        return true;
      });
      daemon.extraArgs.splice(0); // the default cap from now on
      await daemon.restart();
      const result = await client.call("append_events", { workspace: daemon.workspace, sessionId, events: big });
      assert.deepEqual([result.firstSeq, result.lastSeq], [201, 201]);
    } finally {
      await client.close();
      await daemon.dispose();
    }
  });
});
