// Timeouts, cancellation, lost connections and reconnecting to a restarted makad.

import assert from "node:assert/strict";
import { lstatSync, rmSync } from "node:fs";
import { execFileSync, spawn } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import {
  AbortError,
  ConnectionLostError,
  DaemonUnavailableError,
  MakaClient,
  METHOD_NAMES,
  StatePoller,
  TimeoutError,
  TooLargeError,
  TooManyConnectionsError,
  type ClientEvents,
} from "../src/index.js";
import { Daemon, shortTempDir } from "./helpers/daemon.js";
import { fakeServer } from "./helpers/fake-server.js";

const HAS_SUBSCRIBE = (METHOD_NAMES as readonly string[]).includes("subscribe");
const HAS_SETTINGS = (METHOD_NAMES as readonly string[]).includes("set_settings");

function nextEvent<E extends keyof ClientEvents>(
  client: MakaClient,
  event: E,
  accept: (...args: ClientEvents[E]) => boolean = () => true,
): Promise<ClientEvents[E]> {
  return new Promise((resolve) => {
    const listener = (...args: ClientEvents[E]) => {
      if (!accept(...args)) return;
      client.off(event, listener);
      resolve(args);
    };
    client.on(event, listener);
  });
}

describe("a server that never answers", () => {
  it("a call times out with TimeoutError after the request was sent", { timeout: 10_000 }, async () => {
    const server = await fakeServer();
    const client = new MakaClient({ socketPath: server.socketPath, timeoutMs: 60_000 });
    try {
      // Connected first: the timeout then runs from a request handed to the socket at once
      // (a call made while connecting counts the connect in its time, and may time out unsent).
      await client.connect();
      await assert.rejects(client.call("ping", {}, { timeoutMs: 50 }), (error: unknown) => {
        assert.ok(error instanceof TimeoutError);
        assert.equal(error.method, "ping");
        assert.equal(error.timeoutMs, 50);
        return true;
      });
      await server.waitFor('"method":"ping"');
    } finally {
      await client.close();
      await server.close();
    }
  });

  it("the client's default timeout applies when the call sets none", async () => {
    const server = await fakeServer();
    const client = new MakaClient({ socketPath: server.socketPath, timeoutMs: 30 });
    try {
      await assert.rejects(client.call("status"), TimeoutError);
    } finally {
      await client.close();
      await server.close();
    }
  });

  it("an in-flight call rejects with AbortError when its signal fires", async () => {
    const server = await fakeServer();
    const client = new MakaClient({ socketPath: server.socketPath, framing: "lsp" });
    try {
      const controller = new AbortController();
      const call = client.call("status", {}, { signal: controller.signal });
      await server.waitFor('"method":"status"');
      assert.match(server.received(), /^Content-Length: \d+\r\n\r\n\{/);
      controller.abort();
      await assert.rejects(call, AbortError);
    } finally {
      await client.close();
      await server.close();
    }
  });

  it("a connection closed after the request was written rejects with ConnectionLostError", async () => {
    const server = await fakeServer((socket) => socket.destroy());
    const client = new MakaClient({ socketPath: server.socketPath });
    try {
      await assert.rejects(client.call("ping"), ConnectionLostError);
    } finally {
      await client.close();
      await server.close();
    }
  });
});

describe("no daemon", () => {
  let dir = "";
  before(() => {
    dir = shortTempDir();
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it("rejects with DaemonUnavailableError after the retries, reporting each attempt", async () => {
    const socketPath = join(dir, "absent.sock");
    const client = new MakaClient({ socketPath, reconnect: { retries: 2, baseMs: 1, maxMs: 2 } });
    const attempts: ClientEvents["reconnecting"][0][] = [];
    client.on("reconnecting", (info) => attempts.push(info));
    await assert.rejects(client.call("ping"), (error: unknown) => {
      assert.ok(error instanceof DaemonUnavailableError);
      assert.equal(error.socketPath, socketPath);
      assert.equal(error.reason, "ENOENT");
      // The Python client's words (maka.errors.DaemonUnavailable, maka.autostart.WHY_NOBODY).
      assert.equal(
        error.message,
        `no makad is running on ${socketPath} (no socket there); start one with \`makad\` or ` +
          "`scripts/run`, or pass socketPath / set MAKAD_SOCKET",
      );
      return true;
    });
    assert.deepEqual(attempts.map((a) => [a.attempt, a.delayMs]), [[1, 1], [2, 2]]);
    await client.close();
  });

  it("a socket file nothing listens on is worded as the Python client words it", async () => {
    const socketPath = join(dir, "stale.sock");
    // Bound and never listened on, by a process that has exited: a stale socket file
    // (Node's own servers unlink theirs on close).
    const bind = "import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])";
    execFileSync(process.env["PYTHON"] ?? "python3", ["-c", bind, socketPath]);
    assert.ok(lstatSync(socketPath).isSocket());
    const client = new MakaClient({ socketPath, reconnect: false });
    await assert.rejects(client.call("ping"), (error: unknown) => {
      assert.ok(error instanceof DaemonUnavailableError);
      assert.equal(error.reason, "ECONNREFUSED");
      assert.match(error.message, /\(the socket file is there but nothing listens on it\); start one with/);
      return true;
    });
    await client.close();
  });

  it("a listen queue full through every retry says the daemon is busy, not that none runs", async () => {
    const socketPath = join(dir, "busy.sock");
    // A server that never accepts, its queue filled: what a flood of connects leaves.
    const fill =
      "import socket, sys\n" +
      "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(0); held = []\n" +
      "while True:\n" +
      "    c = socket.socket(socket.AF_UNIX); c.setblocking(False)\n" +
      "    try: c.connect(sys.argv[1])\n" +
      "    except BlockingIOError: break\n" +
      "    held.append(c)\n" +
      "print('full', flush=True); sys.stdin.read()\n";
    const filler = spawn(process.env["PYTHON"] ?? "python3", ["-c", fill, socketPath], {
      stdio: ["pipe", "pipe", "inherit"],
    });
    await new Promise<void>((resolve) => filler.stdout.once("data", () => resolve()));
    const client = new MakaClient({ socketPath, reconnect: { retries: 1, baseMs: 1, maxMs: 2 } });
    try {
      await assert.rejects(client.call("ping"), (error: unknown) => {
        assert.ok(error instanceof DaemonUnavailableError);
        assert.equal(error.reason, "EAGAIN");
        assert.match(error.message, /^makad on .* is too busy to take a connection: /);
        return true;
      });
    } finally {
      await client.close();
      filler.stdin.end();
      filler.kill();
    }
  });

  it("a socket path too long for a Unix socket is refused before dialing, in the Python client's words", async () => {
    // A server on the path cut to sun_path's size: what Node would dial instead.
    const sunPath = process.platform === "linux" ? 108 : 104;
    const cut = join(dir, "s".repeat(sunPath - Buffer.byteLength(dir) - 1));
    let reached = 0;
    const server = createServer((socket) => {
      reached++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(cut, resolve));
    const socketPath = `${cut}-other.sock`;
    const client = new MakaClient({ socketPath, serverUid: "any", reconnect: { retries: 2, baseMs: 1, maxMs: 2 } });
    let attempts = 0;
    client.on("reconnecting", () => attempts++);
    try {
      await assert.rejects(client.call("ping"), (error: unknown) => {
        assert.ok(error instanceof DaemonUnavailableError);
        assert.equal(error.reason, "ENAMETOOLONG");
        // maka.autostart.unavailable's words, socketPath for its --socket.
        assert.equal(
          error.message,
          `cannot use the socket ${socketPath}: its path is ${Buffer.byteLength(socketPath)} bytes, over the ` +
            `${process.platform === "linux" ? 107 : 103} a Unix socket path may have; pass a shorter ` +
            "socketPath or MAKAD_SOCKET (and start makad with the same)",
        );
        return true;
      });
      assert.equal(attempts, 0, "retrying cannot help");
      assert.equal(reached, 0, "nothing was dialed");
    } finally {
      await client.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("reconnect: false fails on the first attempt", async () => {
    const client = new MakaClient({ socketPath: join(dir, "absent.sock"), reconnect: false });
    let attempts = 0;
    client.on("reconnecting", () => attempts++);
    await assert.rejects(client.call("ping"), DaemonUnavailableError);
    assert.equal(attempts, 0);
    await client.close();
  });
});

describe("a restarted daemon", () => {
  it("the next call reconnects after makad is stopped (SIGTERM) and started again", async () => {
    const daemon = await Daemon.start();
    const client = new MakaClient({ socketPath: daemon.socketPath });
    try {
      const before = await client.call("status");
      const disconnected = nextEvent(client, "disconnect");
      assert.equal(await daemon.stop(), 0);
      await disconnected;
      await daemon.start();
      const reconnected = nextEvent(client, "connect");
      const after = await client.call("status");
      assert.notEqual(after.pid, before.pid);
      assert.deepEqual(await reconnected, [{ reconnect: true }]);
    } finally {
      await client.close();
      await daemon.dispose();
    }
  });

  it("a call made while makad is down waits through the backoff until it is back", async () => {
    const daemon = await Daemon.start();
    const client = new MakaClient({ socketPath: daemon.socketPath, reconnect: { retries: 200, baseMs: 10, maxMs: 100 } });
    try {
      assert.equal(await client.call("ping"), "pong");
      await daemon.stop();
      const restarted = nextEvent(client, "reconnecting").then(() => daemon.start());
      const answer = client.call("ping");
      await restarted;
      assert.equal(await answer, "pong");
    } finally {
      await client.close();
      await daemon.dispose();
    }
  });

  it("with retries: Infinity, a call and a subscription outlast a daemon down longer than the default retries", { timeout: 60_000 }, async (t) => {
    const daemon = await Daemon.start();
    const client = new MakaClient({ socketPath: daemon.socketPath, timeoutMs: 0, reconnect: { retries: Infinity, baseMs: 5, maxMs: 5 } });
    // A client that never gives up would keep a timed-out test's process alive.
    t.signal.addEventListener("abort", () => void client.close());
    try {
      await client.call("subscribe", { workspace: daemon.workspace });
      await daemon.stop();
      // Far more failed attempts, once it is gone, than the default six before makad is back.
      let failed = 0;
      const restarted = nextEvent(client, "reconnecting", () => ++failed === 20).then(() => daemon.start());
      const lost: unknown[] = [];
      client.on("subscription_lost", (info) => lost.push(info));
      const answer = client.call("ping");
      await restarted;
      assert.equal(await answer, "pong");
      const changed = nextEvent(client, "memory_changed", (p) => p.workspace === daemon.workspace);
      await client.call("add_entry", { workspace: daemon.workspace, title: "Back", content: "after a long outage" });
      await changed;
      assert.deepEqual(lost, []);
    } finally {
      await client.close();
      await daemon.dispose();
    }
  });

  it(
    "subscriptions are renewed on the new connection",
    { skip: !HAS_SUBSCRIBE || !HAS_SETTINGS ? "subscribe/set_settings not in protocol/openrpc.json yet" : false },
    async () => {
      const daemon = await Daemon.start();
      const client = new MakaClient({
        socketPath: daemon.socketPath,
        framing: "lsp",
        reconnect: { retries: 200, baseMs: 10, maxMs: 100 },
      });
      const other = new MakaClient({ socketPath: daemon.socketPath });
      try {
        await client.callRaw("subscribe", { workspace: daemon.workspace });
        const reconnected = nextEvent(client, "connect", (info) => info.reconnect);
        await daemon.restart();
        // No call of ours: the client reconnects by itself because it has a subscription.
        await reconnected;
        const changed = nextEvent(client, "settings_changed", (p) => p.workspace === daemon.workspace);
        await other.callRaw("set_settings", { workspace: daemon.workspace, agentReadEnabled: true });
        const [params] = await changed;
        assert.equal(params.workspace, daemon.workspace);
      } finally {
        await client.close();
        await other.close();
        await daemon.dispose();
      }
    },
  );
});

describe("a daemon killed with calls in flight (SIGKILL)", () => {
  it(
    "each call is answered or rejects with ConnectionLostError, and subscription and poller carry on after the restart",
    { timeout: 30_000, skip: !HAS_SUBSCRIBE || !HAS_SETTINGS ? "subscribe/set_settings not in protocol/openrpc.json yet" : false },
    async () => {
      const daemon = await Daemon.start();
      // No timeout: a call the kill leaves unanswered must still end, by the lost connection.
      const client = new MakaClient({ socketPath: daemon.socketPath, timeoutMs: 0, reconnect: { retries: 200, baseMs: 10, maxMs: 100 } });
      const other = new MakaClient({ socketPath: daemon.socketPath });
      try {
        // A workspace with memory on disk keeps its revision across a restart (a folder
        // never written to is given a new one by each daemon: PROTOCOL.md).
        await other.call("add_entry", { workspace: daemon.workspace, title: "Kept", content: "across the restart" });
        await client.call("subscribe", { workspace: daemon.workspace });
        const poller = new StatePoller(client, { workspace: daemon.workspace });
        assert.equal(await poller.poll(), true);
        const calls = Array.from({ length: 100 }, () =>
          client.call("status").then(
            () => "answered",
            (error: Error) => error.name,
          ),
        );
        const reconnected = nextEvent(client, "connect", (info) => info.reconnect);
        await daemon.stop("SIGKILL");
        // Calls still queued in the client when the connection dropped wait for the
        // reconnect (within its retries), so the daemon comes back before they are awaited.
        await daemon.start();
        const outcomes = new Set(await Promise.all(calls));
        for (const outcome of outcomes) assert.ok(["answered", "ConnectionLostError"].includes(outcome), outcome);
        await reconnected;
        assert.equal(await poller.poll(), false, "nothing changed while it was down");
        const changed = nextEvent(client, "settings_changed", (p) => p.workspace === daemon.workspace);
        await other.call("set_settings", { workspace: daemon.workspace, agentReadEnabled: true });
        await changed;
        assert.equal(await poller.poll(), true);
        assert.equal(client.listenerCount("connect"), 0, "no listener left behind by the client");
      } finally {
        await client.close();
        await other.close();
        await daemon.dispose();
      }
    },
  );
});

describe("connection-level errors", () => {
  it("a request over the daemon's size cap rejects with TooLargeError from the id:null reply, naming the cap", async () => {
    const daemon = await Daemon.start(["--max-message-bytes", "4096"]);
    const client = new MakaClient({ socketPath: daemon.socketPath });
    try {
      await assert.rejects(client.callRaw("status", { padding: "x".repeat(10_000) }), (error: unknown) => {
        assert.ok(error instanceof TooLargeError);
        assert.equal(error.kind, "too_large");
        assert.equal(error.code, -32600);
        assert.equal(error.data["limit"], 4096);
        assert.match(error.message, /message exceeds 4096 bytes/);
        return true;
      });
      // The daemon closed that connection; the client opens a new one.
      assert.equal(await client.call("ping"), "pong");
    } finally {
      await client.close();
      await daemon.dispose();
    }
  });

  it("a daemon at its connection cap refuses every further client with TooManyConnectionsError (from the id:null line)", async () => {
    const daemon = await Daemon.start(["--max-connections", "1"]);
    const first = new MakaClient({ socketPath: daemon.socketPath });
    try {
      assert.equal(await first.call("ping"), "pong");
      // Each writes its ping as soon as it is connected, usually before the refusal arrives.
      for (let i = 0; i < 10; i++) {
        const refused = new MakaClient({ socketPath: daemon.socketPath, reconnect: false });
        const error = await refused.call("ping").then(() => "answered", (caught: unknown) => caught);
        await refused.close();
        assert.ok(error instanceof TooManyConnectionsError, `client ${i}: ${String(error)}`);
        assert.equal(error.data["limit"], 1);
      }
      const together = Array.from({ length: 10 }, () => new MakaClient({ socketPath: daemon.socketPath }));
      const errors = await Promise.all(together.map((c) => c.call("ping").then(() => "answered", (caught: unknown) => caught)));
      await Promise.all(together.map((c) => c.close()));
      for (const error of errors) assert.ok(error instanceof TooManyConnectionsError, String(error));
      await first.close();
      // Served once the first connection is gone (the daemon notices the close on its own time).
      const third = new MakaClient({ socketPath: daemon.socketPath, reconnect: { retries: 50, baseMs: 20, maxMs: 100 } });
      let answer: unknown;
      for (let i = 0; i < 50 && answer === undefined; i++) {
        answer = await third.call("ping").catch(() => undefined);
      }
      assert.equal(answer, "pong");
      await third.close();
    } finally {
      await first.close();
      await daemon.dispose();
    }
  });

  it("a request far over the cap (the daemon closes while it is written) rejects with TooLargeError too", { timeout: 60_000 }, async () => {
    const daemon = await Daemon.start(["--max-message-bytes", "4096"]);
    // No timeout: a client that sent the request again on a new connection would not end.
    const client = new MakaClient({ socketPath: daemon.socketPath, timeoutMs: 0 });
    let connects = 0;
    client.on("connect", () => connects++);
    try {
      await assert.rejects(client.callRaw("status", { padding: "x".repeat(8 << 20) }), (error: unknown) => {
        assert.ok(error instanceof TooLargeError, String(error));
        return true;
      });
      assert.equal(connects, 1, "refused on its first connection, not sent again");
      assert.equal(await client.call("ping"), "pong");
    } finally {
      await client.close();
      await daemon.dispose();
    }
  });
});
