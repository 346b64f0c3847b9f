// Off-the-shelf editor tooling (vscode-jsonrpc, Content-Length framing) drives makad unchanged.

import assert from "node:assert/strict";
import { once } from "node:events";
import { createConnection } from "node:net";
import { after, before, describe, it } from "node:test";

import {
  createMessageConnection,
  ResponseError,
  StreamMessageReader,
  StreamMessageWriter,
  type MessageConnection,
} from "vscode-jsonrpc/node";

import { METHOD_NAMES } from "../src/index.js";
import { Daemon } from "./helpers/daemon.js";

const HAS_SUBSCRIBE = (METHOD_NAMES as readonly string[]).includes("subscribe");

describe("vscode-jsonrpc over the socket", () => {
  let daemon: Daemon;
  let connection: MessageConnection;

  before(async () => {
    daemon = await Daemon.start();
    const socket = createConnection(daemon.socketPath);
    await once(socket, "connect");
    connection = createMessageConnection(new StreamMessageReader(socket), new StreamMessageWriter(socket));
    connection.listen();
  });

  after(async () => {
    connection.dispose();
    await daemon.dispose();
  });

  it("ping answers pong", async () => {
    assert.equal(await connection.sendRequest("ping"), "pong");
  });

  it("status with a params object", async () => {
    const status = await connection.sendRequest<{ pid: number; connections: number }>("status", {});
    assert.equal(status.pid, daemon.pid);
    assert.ok(status.connections >= 1);
  });

  it("errors arrive as ResponseError with code and data.kind", async () => {
    await assert.rejects(connection.sendRequest("no_such_method", {}), (error: unknown) => {
      assert.ok(error instanceof ResponseError);
      assert.equal(error.code, -32601);
      assert.equal((error.data as { kind: string }).kind, "method_not_found");
      return true;
    });
  });

  it("notifications reach onNotification", { skip: HAS_SUBSCRIBE ? false : "subscribe not in protocol/openrpc.json yet" }, async () => {
    const seen = new Promise<{ workspace: string; revision: number }>((resolve) => {
      connection.onNotification("settings_changed", (params: { workspace: string; revision: number }) => resolve(params));
    });
    await connection.sendRequest("subscribe", { workspace: daemon.workspace });
    await connection.sendRequest("set_settings", { workspace: daemon.workspace, agentReadEnabled: true });
    const params = await seen;
    assert.equal(params.workspace, daemon.workspace);
    assert.equal(typeof params.revision, "number");
  });
});
