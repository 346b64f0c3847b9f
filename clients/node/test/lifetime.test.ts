// What keeps the Node process alive: a client whose calls have all ended while makad was
// down lets it exit, instead of dialling on through its retries.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import { MakaClient, TimeoutError } from "../src/index.js";
import { Daemon, shortTempDir } from "./helpers/daemon.js";

const ESM_BUILD = pathToFileURL(resolve(dirname(fileURLToPath(import.meta.url)), "../../esm/index.js")).href;

/** Run an ES module script in a fresh Node process; resolves with its stdout once it exits. */
function runScript(source: string): Promise<string> {
  return new Promise((resolveRun, reject) => {
    execFile(process.execPath, ["--input-type=module", "-e", source], (error, stdout, stderr) => {
      if (error) reject(new Error(`${error.message}\n${stderr}`));
      else resolveRun(stdout);
    });
  });
}

// Retries that would keep dialling for minutes: the process exits long before, or the test times out.
const PATIENT = "{ retries: 1000, baseMs: 200, maxMs: 200 }";

describe("a client whose calls all ended while makad is down", () => {
  let dir = "";
  before(() => {
    dir = shortTempDir();
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it("lets the process exit after its only call timed out", { timeout: 30_000 }, async () => {
    const socketPath = join(dir, "absent.sock");
    const out = await runScript(`
      import { MakaClient } from ${JSON.stringify(ESM_BUILD)};
      const client = new MakaClient({ socketPath: ${JSON.stringify(socketPath)}, reconnect: ${PATIENT} });
      await client.call("ping", {}, { timeoutMs: 100 }).catch((error) => console.log(error.name));
    `);
    assert.equal(out.trim(), "TimeoutError");
  });

  it("lets the process exit after its only call was aborted", { timeout: 30_000 }, async () => {
    const socketPath = join(dir, "absent.sock");
    const out = await runScript(`
      import { MakaClient } from ${JSON.stringify(ESM_BUILD)};
      const client = new MakaClient({ socketPath: ${JSON.stringify(socketPath)}, timeoutMs: 0, reconnect: ${PATIENT} });
      const controller = new AbortController();
      client.once("reconnecting", () => controller.abort());
      await client.call("ping", {}, { signal: controller.signal }).catch((error) => console.log(error.name));
    `);
    assert.equal(out.trim(), "AbortError");
  });

  it("a call that timed out before it could be sent says so, and why", async () => {
    const socketPath = join(dir, "absent.sock");
    const client = new MakaClient({ socketPath, reconnect: { retries: 1000, baseMs: 200, maxMs: 200 } });
    try {
      await assert.rejects(client.call("ping", {}, { timeoutMs: 100 }), (error: unknown) => {
        assert.ok(error instanceof TimeoutError);
        assert.equal(error.sent, false);
        assert.match(error.message, /^ping was not sent within 100 ms: no makad is running on .*absent\.sock \(no socket there\)/);
        return true;
      });
    } finally {
      await client.close();
    }
  });

  it("connect() still waits through the retries while nobody else does", { timeout: 30_000 }, async () => {
    const daemon = await Daemon.start();
    const client = new MakaClient({ socketPath: daemon.socketPath, reconnect: { retries: 200, baseMs: 10, maxMs: 100 } });
    try {
      await daemon.stop();
      const restarted = new Promise<void>((resolveStart, reject) =>
        client.once("reconnecting", () => daemon.start().then(resolveStart, reject)),
      );
      await client.connect();
      await restarted;
      assert.equal(await client.call("ping"), "pong");
    } finally {
      await client.close();
      await daemon.dispose();
    }
  });

  it("a later call dials again after the loop gave up", { timeout: 30_000 }, async () => {
    const daemon = await Daemon.start();
    const client = new MakaClient({ socketPath: daemon.socketPath, reconnect: { retries: 1000, baseMs: 50, maxMs: 50 } });
    try {
      await daemon.stop();
      await assert.rejects(client.call("ping", {}, { timeoutMs: 100 }), TimeoutError);
      await daemon.start();
      assert.equal(await client.call("ping"), "pong");
    } finally {
      await client.close();
      await daemon.dispose();
    }
  });
});
