// Servers that hang up at once or stop reading: calls end, memory stays bounded, close() returns.

import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { describe, it } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

import {
  AbortError,
  ConnectionLostError,
  DaemonUnavailableError,
  MakaClient,
  ProtocolError,
  TimeoutError,
} from "../src/index.js";
import { shortTempDir } from "./helpers/daemon.js";

interface Stubborn {
  socketPath: string;
  /** Bytes received so far (only while reading). */
  received(): number;
  /** Resolves once some bytes have been received. */
  receivedSome(): Promise<void>;
  /** Resolves with the first connection accepted. */
  firstSocket(): Promise<Socket>;
  close(): Promise<void>;
}

/** A server that accepts and then does `onAccept` with the socket (nothing by default). */
async function stubbornServer(onAccept: (socket: Socket) => void = () => {}): Promise<Stubborn> {
  const root = shortTempDir("mks-");
  const socketPath = join(root, "s.sock");
  const sockets = new Set<Socket>();
  let received = 0;
  let gotSome: () => void = () => {};
  const some = new Promise<void>((resolve) => (gotSome = resolve));
  let gotSocket: (socket: Socket) => void = () => {};
  const first = new Promise<Socket>((resolve) => (gotSocket = resolve));
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    gotSocket(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    socket.on("data", (chunk: Buffer) => {
      received += chunk.length;
      gotSome();
    });
    onAccept(socket);
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    socketPath,
    received: () => received,
    receivedSome: () => some,
    firstSocket: () => first,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(root, { recursive: true, force: true });
    },
  };
}

const MIB = "x".repeat(1 << 20);

/** Answer the ping in what the server has read so far, once it is all there. */
function answerPing(socket: Socket, text: string): void {
  const id = /"id":(\d+),"method":"ping"/.exec(text)?.[1];
  if (id !== undefined) socket.write(`{"jsonrpc":"2.0","id":${id},"result":"pong"}\n`);
}

describe("a server that hangs up as soon as it accepts", () => {
  it("a call rejects with DaemonUnavailableError after the retries instead of waiting forever", { timeout: 10_000 }, async () => {
    let accepted = 0;
    const server = await stubbornServer((socket) => {
      accepted++;
      socket.destroy();
    });
    const client = new MakaClient({ socketPath: server.socketPath, timeoutMs: 0, reconnect: { retries: 2, baseMs: 1, maxMs: 2 } });
    try {
      await assert.rejects(client.call("ping"), (error: unknown) => {
        assert.ok(error instanceof DaemonUnavailableError || error instanceof ConnectionLostError, String(error));
        return true;
      });
      assert.ok(accepted >= 1);
      assert.equal(client.connected, false, "no dead connection is kept as the client's");
    } finally {
      await client.close();
      await server.close();
    }
  });
});

describe("a server that stops reading", () => {
  it("close() returns while requests and a notification are still buffered for it", { timeout: 10_000 }, async () => {
    const server = await stubbornServer((socket) => socket.once("data", () => socket.pause()));
    const client = new MakaClient({ socketPath: server.socketPath });
    const outcome = (sent: Promise<unknown>) =>
      sent.then(
        () => "answered",
        (error: Error) => error.name,
      );
    const calls = [1, 2, 3].map(() => outcome(client.callRaw("status", { padding: MIB })));
    calls.push(outcome(client.notify("note", { padding: MIB })));
    await server.receivedSome();
    await client.close();
    assert.deepEqual(await Promise.all(calls), ["ClientClosedError", "ClientClosedError", "ClientClosedError", "ClientClosedError"]);
    await server.close();
  });

  it("a notification waits its turn behind the calls made before it", { timeout: 10_000 }, async () => {
    const server = await stubbornServer((accepted) => accepted.pause());
    const client = new MakaClient({ socketPath: server.socketPath });
    try {
      const before = [1, 2, 3].map(() => client.callRaw("status", { padding: MIB }).catch(() => undefined));
      const note = client.notify("note", { n: 1 });
      const reply = client.call("ping");
      const socket = await server.firstSocket();
      let text = "";
      socket.on("data", (chunk: Buffer) => {
        text += chunk.toString("latin1");
        answerPing(socket, text);
      });
      socket.resume();
      assert.equal(await reply, "pong");
      await note;
      const order = [...text.matchAll(/"method":"(\w+)"/g)].map((match) => match[1]);
      assert.deepEqual(order, ["status", "status", "status", "note", "ping"]);
      void before;
    } finally {
      await client.close();
      await server.close();
    }
  });

  it("a notification that timed out or was aborted before its turn is never sent, nor kept", { timeout: 10_000 }, async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const server = await stubbornServer((accepted) => accepted.pause());
    const client = new MakaClient({ socketPath: server.socketPath });
    try {
      // Connected first: a call made while the client connects is held until the connect ends.
      await client.connect();
      const socket = await server.firstSocket();
      const blocker = client.callRaw("status", { padding: MIB }).catch(() => undefined);
      let params: Record<string, unknown> | undefined = { padding: MIB.slice(1) };
      const held = new WeakRef(params);
      await assert.rejects(client.notify("late_note", params, { timeoutMs: 30 }), (error: unknown) => {
        assert.ok(error instanceof TimeoutError);
        assert.match(error.message, /late_note was not written within 30 ms/);
        return true;
      });
      const controller = new AbortController();
      const aborted = client.notify("aborted_note", {}, { signal: controller.signal });
      controller.abort();
      await assert.rejects(aborted, AbortError);
      params = undefined;
      await new Promise((resolve) => setImmediate(resolve));
      gc();
      assert.equal(held.deref(), undefined, "the timed-out notification is still held");
      // The server reads again: only what had already left the client can still arrive.
      const reply = client.call("ping", {}, { timeoutMs: 0 });
      let text = "";
      socket.on("data", (chunk: Buffer) => {
        text += chunk.toString("latin1");
        answerPing(socket, text);
      });
      socket.resume();
      assert.equal(await reply, "pong");
      assert.ok(!text.includes("_note"), "a dropped notification reached the server");
      void blocker;
    } finally {
      await client.close();
      await server.close();
    }
  });

  it("requests that timed out or were aborted before they left the client are never sent", { timeout: 10_000 }, async () => {
    const server = await stubbornServer((accepted) => accepted.pause());
    const client = new MakaClient({ socketPath: server.socketPath });
    try {
      // Connected first: a call made while the client connects is held until the connect ends.
      await client.connect();
      const socket = await server.firstSocket();
      const controller = new AbortController();
      const timedOut = Array.from({ length: 16 }, () => client.callRaw("status", { padding: MIB }, { timeoutMs: 50 }));
      const aborted = Array.from({ length: 16 }, () => client.callRaw("status", { padding: MIB }, { signal: controller.signal }));
      for (const call of timedOut) await assert.rejects(call, TimeoutError);
      controller.abort();
      for (const call of aborted) await assert.rejects(call, AbortError);
      // The server reads again: only what had already left the client can still arrive.
      const reply = client.call("ping", {}, { timeoutMs: 0 });
      socket.resume();
      let tail = "";
      socket.on("data", (chunk: Buffer) => {
        tail = (tail + chunk.toString("latin1")).slice(-64);
        if (tail.includes('"method":"ping"')) socket.write('{"jsonrpc":"2.0","id":33,"result":"pong"}\n');
      });
      assert.equal(await reply, "pong");
      assert.ok(server.received() < 4 * MIB.length, `${server.received()} bytes reached the server`);
    } finally {
      await client.close();
      await server.close();
    }
  });

  it("a call that timed out waiting for its turn is not kept until the daemon reads again", { timeout: 10_000 }, async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const server = await stubbornServer((socket) => socket.pause());
    const client = new MakaClient({ socketPath: server.socketPath });
    try {
      // Connected first: a call made while the client connects is held until the connect ends.
      await client.connect();
      const blocker = client.callRaw("status", { padding: MIB }).catch(() => undefined);
      let params: Record<string, unknown> | undefined = { padding: MIB.slice(1) };
      const held = new WeakRef(params);
      await assert.rejects(client.callRaw("status", params, { timeoutMs: 30 }), TimeoutError);
      params = undefined;
      await new Promise((resolve) => setImmediate(resolve));
      gc();
      assert.equal(held.deref(), undefined, "the timed-out request is still held");
      void blocker;
    } finally {
      await client.close();
      await server.close();
    }
  });

  it("calls that never fully left the client, when it hangs up and no retry is left, reject naming their own method", { timeout: 10_000 }, async () => {
    const server = await stubbornServer((accepted) => accepted.pause());
    const client = new MakaClient({ socketPath: server.socketPath, reconnect: false });
    try {
      const connected = new Promise((resolve) => client.once("connect", resolve));
      const calls = [
        client.callRaw("status", { padding: MIB }).catch((error: unknown) => error),
        client.call("ping").catch((error: unknown) => error),
      ];
      await connected;
      (await server.firstSocket()).destroy();
      const [status, ping] = await Promise.all(calls);
      assert.ok(status instanceof ConnectionLostError, String(status));
      assert.equal(status.method, "status");
      assert.ok(ping instanceof ConnectionLostError, String(ping));
      assert.equal(ping.method, "ping");
    } finally {
      await client.close();
      await server.close();
    }
  });
});

describe("a reply over the client's limit", () => {
  it("fails the connection's other calls, not the reply that came whole before it", { timeout: 10_000 }, async () => {
    for (const framing of ["ndjson", "lsp"] as const) {
      const server = await stubbornServer((socket) => {
        let seen = "";
        socket.on("data", (chunk: Buffer) => {
          seen += chunk.toString("utf8");
          if (!seen.includes('"id":2')) return;
          const replies = [
            { jsonrpc: "2.0", id: 1, result: "pong" },
            { jsonrpc: "2.0", id: 2, result: "x".repeat(4096) },
          ].map((reply) => {
            const body = JSON.stringify(reply);
            return framing === "ndjson" ? `${body}\n` : `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
          });
          socket.write(replies.join(""));
        });
      });
      const client = new MakaClient({ socketPath: server.socketPath, framing, maxMessageBytes: 1024, reconnect: false });
      try {
        const first = client.call("ping");
        const second = client.call("status").catch((error: unknown) => error);
        assert.equal(await first, "pong", framing);
        assert.ok((await second) instanceof ProtocolError, framing);
      } finally {
        await client.close();
        await server.close();
      }
    }
  });
});

describe("one AbortSignal shared by many calls", () => {
  it("aborts them all and draws no listener-leak warning from Node", { timeout: 10_000 }, async () => {
    const server = await stubbornServer();
    const client = new MakaClient({ socketPath: server.socketPath });
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on("warning", onWarning);
    try {
      const controller = new AbortController();
      const calls = Array.from({ length: 50 }, () => client.call("ping", {}, { signal: controller.signal }).catch((error: unknown) => error));
      await server.receivedSome();
      controller.abort();
      for (const outcome of await Promise.all(calls)) assert.ok(outcome instanceof AbortError, String(outcome));
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(warnings, []);
    } finally {
      process.off("warning", onWarning);
      await client.close();
      await server.close();
    }
  });
});

describe("a daemon that dies again under a subscription's renewal", () => {
  it("keeps the subscription and renews it on the next connection", { timeout: 10_000 }, async () => {
    let accepted = 0;
    const server = await stubbornServer((socket) => {
      const nth = ++accepted;
      let buffer = "";
      socket.on("data", (chunk: Buffer) => {
        buffer += chunk.toString("utf8");
        let end: number;
        while ((end = buffer.indexOf("\n")) >= 0) {
          const request = JSON.parse(buffer.slice(0, end)) as { id: number; params: { workspace: string } };
          buffer = buffer.slice(end + 1);
          if (nth === 2) {
            socket.destroy(); // dying: the renewal is cut off
            return;
          }
          const reply = { jsonrpc: "2.0", id: request.id, result: { workspace: request.params.workspace, revision: 1 } };
          if (nth === 1) {
            socket.end(`${JSON.stringify(reply)}\n`); // answers, then the daemon goes down
            return;
          }
          socket.write(`${JSON.stringify(reply)}\n`);
          if (nth === 3) {
            const note = { jsonrpc: "2.0", method: "settings_changed", params: { workspace: "/w", revision: 2, cause: "settings" } };
            socket.write(`${JSON.stringify(note)}\n`);
          }
        }
      });
    });
    const client = new MakaClient({ socketPath: server.socketPath, reconnect: { retries: 5, baseMs: 1, maxMs: 5 } });
    const lost: unknown[] = [];
    client.on("subscription_lost", (info) => lost.push(info));
    try {
      const changed = new Promise((resolve) => client.on("settings_changed", resolve));
      await client.call("subscribe", { workspace: "/w" });
      assert.deepEqual(await changed, { workspace: "/w", revision: 2, cause: "settings" });
      assert.equal(accepted, 3);
      assert.deepEqual(lost, []);
    } finally {
      await client.close();
      await server.close();
    }
  });
});
