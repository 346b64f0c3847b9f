// The client refuses a server that another user could have put on the socket path.

import assert from "node:assert/strict";
import { chmodSync, chownSync, mkdirSync, renameSync, rmSync, symlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";

import { expectedServerUid, MakaClient, UntrustedServerError } from "../src/index.js";
import { Daemon, shortTempDir } from "./helpers/daemon.js";
import { fakeServer } from "./helpers/fake-server.js";
import { impostorSkipReason, nobody, startImpostor, type Impostor } from "./helpers/impostor.js";

const SKIP = impostorSkipReason();

/** Ping once through a fresh client (no retries) and close it. */
async function ping(socketPath: string, options: { serverUid?: number | "any" } = {}): Promise<unknown> {
  const client = new MakaClient({ socketPath, reconnect: false, ...options });
  try {
    return await client.call("ping");
  } finally {
    await client.close();
  }
}

describe("a server run by another user (nobody)", { skip: SKIP }, () => {
  let impostor: Impostor;

  before(async () => {
    impostor = await startImpostor();
  });

  after(async () => {
    await impostor.stop();
    rmSync(dirname(impostor.socketPath), { recursive: true, force: true });
  });

  it("is refused with UntrustedServerError before a byte is sent", async () => {
    await assert.rejects(ping(impostor.socketPath), (error: unknown) => {
      assert.ok(error instanceof UntrustedServerError);
      assert.equal(error.expectedUid, process.geteuid!());
      assert.equal(error.ownerUid, impostor.uid);
      assert.match(error.message, /MAKA_SERVER_UID/);
      return true;
    });
    assert.equal(impostor.received(), 0);
  });

  it("is refused at once, never retried, by a client with the default reconnect policy", async () => {
    const client = new MakaClient({ socketPath: impostor.socketPath });
    let attempts = 0;
    client.on("reconnecting", () => attempts++);
    try {
      await assert.rejects(client.call("ping"), UntrustedServerError);
      await assert.rejects(client.call("subscribe", { workspace: "/" }), UntrustedServerError);
      assert.equal(attempts, 0);
      assert.equal(client.connected, false);
    } finally {
      await client.close();
    }
    assert.equal(impostor.received(), 0);
  });

  it("is reached when serverUid names its uid", async () => {
    assert.equal(await ping(impostor.socketPath, { serverUid: impostor.uid }), "pong");
  });

  it('is reached with serverUid "any" or MAKA_SERVER_UID=any', async () => {
    assert.equal(await ping(impostor.socketPath, { serverUid: "any" }), "pong");
    process.env["MAKA_SERVER_UID"] = "any";
    try {
      assert.equal(await ping(impostor.socketPath), "pong");
    } finally {
      delete process.env["MAKA_SERVER_UID"];
    }
  });

  it("is refused when its socket is moved into a private folder of ours", async () => {
    const mine = shortTempDir("mko-");
    const moved = join(mine, "s.sock");
    renameSync(impostor.socketPath, moved);
    try {
      await assert.rejects(ping(moved), (error: unknown) => {
        assert.ok(error instanceof UntrustedServerError);
        assert.match(error.reason, /socket file belongs to uid/);
        return true;
      });
    } finally {
      renameSync(moved, impostor.socketPath);
      rmSync(mine, { recursive: true, force: true });
    }
  });
});

describe("the folders above the socket", () => {
  let daemon: Daemon;

  before(async () => {
    daemon = await Daemon.start();
  });

  after(async () => {
    await daemon.dispose();
  });

  it("a socket of ours in a private folder is reached", async () => {
    assert.equal(await ping(daemon.socketPath), "pong");
  });

  it("a socket path that is a symbolic link to our own daemon is refused as one, and named", async () => {
    const folder = shortTempDir("mkl-");
    const link = join(folder, "s.sock");
    symlinkSync(daemon.socketPath, link);
    try {
      await assert.rejects(ping(link), (error: unknown) => {
        assert.ok(error instanceof UntrustedServerError);
        assert.equal(
          error.reason,
          `its socket path is a symbolic link (to ${daemon.socketPath}), which this client does not follow`,
        );
        assert.match(error.message, /connect to the path it leads to instead \(socketPath or MAKAD_SOCKET\)/);
        assert.doesNotMatch(error.message, /changed while connecting|allow its uid/);
        return true;
      });
      assert.equal(await ping(link, { serverUid: "any" }), "pong");
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it("a server behind a symbolic link is sent nothing, also by a client that reconnects", async () => {
    const server = await fakeServer();
    const folder = shortTempDir("mkl-");
    const link = join(folder, "s.sock");
    symlinkSync(server.socketPath, link);
    const client = new MakaClient({ socketPath: link });
    let attempts = 0;
    client.on("reconnecting", () => attempts++);
    try {
      await assert.rejects(client.call("ping"), /its socket path is a symbolic link/);
      assert.equal(attempts, 0);
      assert.equal(server.received(), "");
    } finally {
      await client.close();
      await server.close();
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it("a folder writable by its group is refused, and named", async () => {
    const folder = dirname(daemon.socketPath);
    chmodSync(folder, 0o770);
    try {
      await assert.rejects(ping(daemon.socketPath), (error: unknown) => {
        assert.ok(error instanceof UntrustedServerError);
        assert.equal(error.reason, `${folder} is writable by others (mode 0770)`);
        return true;
      });
    } finally {
      chmodSync(folder, 0o700);
    }
  });

  it("a folder of another user above it is refused", { skip: SKIP }, async () => {
    const account = nobody()!;
    const outer = shortTempDir("mkp-");
    const inner = join(outer, "in");
    mkdirSync(inner, { mode: 0o700 });
    chownSync(outer, account.uid, account.gid);
    const link = join(inner, "s.sock");
    renameSync(daemon.socketPath, link);
    try {
      await assert.rejects(ping(link), (error: unknown) => {
        assert.ok(error instanceof UntrustedServerError);
        assert.equal(error.reason, `${outer} belongs to uid ${account.uid}`);
        return true;
      });
    } finally {
      renameSync(link, daemon.socketPath);
      rmSync(outer, { recursive: true, force: true });
    }
  });
});

describe("expectedServerUid", () => {
  it("is this process's uid by default, the option or the environment otherwise", () => {
    assert.equal(expectedServerUid(undefined, {}), process.geteuid!());
    assert.equal(expectedServerUid(1234, {}), 1234);
    assert.equal(expectedServerUid(undefined, { MAKA_SERVER_UID: " 42 " }), 42);
    assert.equal(expectedServerUid(undefined, { MAKA_SERVER_UID: "ANY" }), null);
    assert.equal(expectedServerUid("any", { MAKA_SERVER_UID: "7" }), null);
  });

  it("refuses anything else, also at construction", () => {
    for (const bad of [-1, 1.5, "nobody", "", true]) {
      assert.throws(() => expectedServerUid(bad as never, {}), TypeError);
    }
    assert.throws(() => expectedServerUid(undefined, { MAKA_SERVER_UID: "root" }), TypeError);
    assert.throws(() => new MakaClient({ socketPath: "/tmp/x.sock", serverUid: -5 }), TypeError);
  });
});
