// MakaClient against a real makad, in both framings.

import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import {
  AbortError,
  ClientClosedError,
  InvalidParamsError,
  MakaClient,
  MakaError,
  METHOD_NAMES,
  MethodNotFoundError,
  RemoteError,
  type ClientEvents,
  type DaemonStopping,
  type Framing,
} from "../src/index.js";
import { Daemon } from "./helpers/daemon.js";

const FRAMINGS: Framing[] = ["ndjson", "lsp"];
const HAS_SUBSCRIBE = (METHOD_NAMES as readonly string[]).includes("subscribe");
const HAS_SETTINGS = (METHOD_NAMES as readonly string[]).includes("set_settings");

/** The next `event` from the client that satisfies `accept`. */
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

let daemon: Daemon;

before(async () => {
  daemon = await Daemon.start();
});

after(async () => {
  await daemon.dispose();
});

for (const framing of FRAMINGS) {
  describe(`calls over ${framing}`, () => {
    let client: MakaClient;

    before(() => {
      client = new MakaClient({ socketPath: daemon.socketPath, framing });
    });

    after(async () => {
      await client.close();
    });

    it("ping answers pong", async () => {
      assert.equal(await client.call("ping"), "pong");
    });

    it("status has the daemon's pid and socket, through the method proxy", async () => {
      const status = await client.m.status({});
      assert.equal(status.pid, daemon.pid);
      assert.equal(status.socket, daemon.socketPath);
      assert.equal(typeof status.version, "string");
    });

    it("an unknown method rejects with MethodNotFoundError (kind method_not_found)", async () => {
      const error = await client.callRaw("no_such_method").then(
        () => assert.fail("expected an error"),
        (e: unknown) => e,
      );
      assert.ok(error instanceof MethodNotFoundError);
      assert.ok(error instanceof RemoteError && error instanceof MakaError);
      assert.equal(error.code, -32601);
      assert.equal(error.kind, "method_not_found");
      assert.equal(error.data["method"], "no_such_method");
      assert.equal(error.method, "no_such_method");
    });

    it("an unknown param rejects with InvalidParamsError (kind invalid_params, data.reason)", async () => {
      await assert.rejects(client.callRaw("status", { bogus: 1 }), (error: unknown) => {
        assert.ok(error instanceof InvalidParamsError);
        assert.equal(error.code, -32602);
        assert.equal(error.kind, "invalid_params");
        assert.match(String(error.data["reason"]), /bogus/);
        return true;
      });
    });

    it("params that do not fit say which param and what is wrong in the error's text", async () => {
      const params = { workspace: "/", sessionId: "s", events: [{ type: "user_message", content: "hi" }] };
      await assert.rejects(client.callRaw("append_events", params), (error: unknown) => {
        assert.ok(error instanceof InvalidParamsError);
        assert.match(error.message, /^Invalid params: \$\.events\[0\]: Object contains unknown field `content` \(invalid_params/);
        return true;
      });
    });

    it("positional params are refused with invalid_params", async () => {
      await assert.rejects(client.callRaw("ping", [1]), InvalidParamsError);
    });

    it("1,000 concurrent calls are each answered with their own reply", async () => {
      // The daemon's data.method tells each unknown-method reply apart: a mismatched id shows.
      const results = await Promise.all(
        Array.from({ length: 1000 }, (_, i) =>
          i % 3 === 0
            ? client.call("ping")
            : i % 3 === 1
              ? client.call("status").then((s) => s.pid)
              : client.callRaw(`no_such_${i}`).catch((error: RemoteError) => error.data["method"]),
        ),
      );
      results.forEach((value, i) => assert.equal(value, ["pong", daemon.pid, `no_such_${i}`][i % 3]));
    });

    it("an aborted call rejects with AbortError and the connection stays usable", async () => {
      const controller = new AbortController();
      const call = client.call("status", {}, { signal: controller.signal });
      controller.abort(new Error("user cancelled"));
      await assert.rejects(call, (error: unknown) => {
        assert.ok(error instanceof AbortError);
        assert.equal((error.cause as Error).message, "user cancelled");
        return true;
      });
      assert.equal(await client.call("ping"), "pong");
    });

    it("an aborted call's message says why the signal fired (AbortSignal.timeout, an app's reason)", async () => {
      const timedOut = AbortSignal.timeout(1);
      await new Promise((resolve) => timedOut.addEventListener("abort", resolve, { once: true }));
      await assert.rejects(client.call("status", {}, { signal: timedOut }), (error: unknown) => {
        assert.ok(error instanceof AbortError);
        assert.equal(error.message, "status was aborted: its signal timed out");
        assert.equal((error.cause as DOMException).name, "TimeoutError");
        return true;
      });
      const controller = new AbortController();
      const call = client.call("status", {}, { signal: controller.signal });
      controller.abort("window closed");
      await assert.rejects(call, { name: "AbortError", message: "status was aborted: window closed" });
      await assert.rejects(client.call("ping", {}, { signal: AbortSignal.abort() }), { message: "ping was aborted" });
    });

    it("a call with an already aborted signal is never sent", async () => {
      await assert.rejects(client.call("ping", {}, { signal: AbortSignal.abort() }), AbortError);
    });
  });
}

describe("the document makad serves (rpc.discover)", () => {
  it("generates exactly src/generated.ts: every method's params, result and errors as typed here", async () => {
    // dist/test/test/ -> the package directory
    const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
    const generator = (await import(pathToFileURL(join(packageDir, "scripts", "gen-types.mjs")).href)) as {
      generate(doc: unknown): string;
      OUTPUT_PATH: string;
    };
    const client = new MakaClient({ socketPath: daemon.socketPath });
    try {
      const served = await client.call("rpc.discover");
      assert.ok(generator.generate(served) === readFileSync(generator.OUTPUT_PATH, "utf8"), "src/generated.ts differs from the served document");
    } finally {
      await client.close();
    }
  });
});

describe("lifecycle", () => {
  it("rejects with ClientClosedError after close()", async () => {
    const client = new MakaClient({ socketPath: daemon.socketPath });
    assert.equal(await client.call("ping"), "pong");
    await client.close();
    assert.equal(client.connected, false);
    await assert.rejects(client.call("ping"), ClientClosedError);
  });

  it("a notification to the daemon (no id) gets no reply and the connection carries on", async () => {
    const client = new MakaClient({ socketPath: daemon.socketPath, framing: "lsp" });
    await client.notify("ping");
    assert.equal(await client.call("ping"), "pong");
    await client.close();
  });
});

describe("daemon_stopping", () => {
  it("reaches a connected client as its own typed event before the daemon closes the connection", async () => {
    const own = await Daemon.start();
    const client = new MakaClient({ socketPath: own.socketPath, reconnect: false });
    try {
      assert.equal(await client.call("ping"), "pong");
      const stopping = nextEvent(client, "daemon_stopping");
      await own.stop();
      const [params] = await stopping;
      const reason: DaemonStopping["reason"] = params.reason;
      assert.equal(reason, "signal");
    } finally {
      await client.close();
      await own.dispose();
    }
  });
});

describe("notifications", { skip: !HAS_SUBSCRIBE || !HAS_SETTINGS ? "subscribe/set_settings not in protocol/openrpc.json yet" : false }, () => {
  for (const framing of FRAMINGS) {
    it(`settings_changed reaches a subscribed client over ${framing}`, async () => {
      const client = new MakaClient({ socketPath: daemon.socketPath, framing });
      const other = new MakaClient({ socketPath: daemon.socketPath });
      try {
        await client.callRaw("subscribe", { workspace: daemon.workspace });
        const current = (await other.callRaw("get_settings", { workspace: daemon.workspace })) as Record<string, unknown>;
        const changed = nextEvent(client, "settings_changed", (p) => p.workspace === daemon.workspace);
        const generic = nextEvent(client, "notification", (method) => method === "settings_changed");
        await other.callRaw("set_settings", { workspace: daemon.workspace, agentReadEnabled: !current["agentReadEnabled"] });
        const [params] = await changed;
        assert.equal(params.workspace, daemon.workspace);
        assert.equal(typeof params.revision, "number");
        const [, genericParams] = await generic;
        assert.deepEqual(genericParams, params);
      } finally {
        await client.close();
        await other.close();
      }
    });
  }

  it("unsubscribe stops notifications for that workspace only", async () => {
    const client = new MakaClient({ socketPath: daemon.socketPath });
    const second = join(daemon.root, "ws2");
    mkdirSync(second, { recursive: true });
    const flip = async (workspace: string) => {
      const current = (await client.callRaw("get_settings", { workspace })) as Record<string, unknown>;
      await client.callRaw("set_settings", { workspace, agentReadEnabled: !current["agentReadEnabled"] });
    };
    try {
      await client.callRaw("subscribe", { workspace: daemon.workspace });
      await client.callRaw("subscribe", { workspace: second });
      await client.callRaw("unsubscribe", { workspace: daemon.workspace });
      const seen: string[] = [];
      client.on("settings_changed", (params) => seen.push(params.workspace));
      const secondChanged = nextEvent(client, "settings_changed", (p) => p.workspace === second);
      await flip(daemon.workspace);
      await flip(second);
      await secondChanged;
      assert.deepEqual(seen, [second]);
    } finally {
      await client.close();
    }
  });
});
