// The typed API: params and results follow the catalogue (checked by tsc when tests build).

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  ConflictError,
  InvalidParamsError,
  IoError,
  MakaClient,
  NotFoundError,
  TooManyConnectionsError,
  type ClientEvents,
  type DaemonStopping,
  type ImportProgressParams,
  type ParamsOf,
  type ResultOf,
  type StatusResult,
} from "../src/index.js";

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const assertType = <T extends true>(value: T): T => value;

// Never called: only compiled. Each @ts-expect-error fails the build if the line type-checks.
async function typedCalls(client: MakaClient): Promise<void> {
  const pong: string = await client.call("ping");
  const status: StatusResult = await client.m.status();
  await client.call("status", {}, { timeoutMs: 5 });
  // @ts-expect-error unknown method
  await client.call("no_such_method");
  // @ts-expect-error unknown param
  await client.call("ping", { bogus: 1 });
  const loose: unknown = await client.callRaw("anything", { at: "all" });
  void [pong, status, loose];
}

async function typedWorkspaceCalls(client: MakaClient): Promise<void> {
  // @ts-expect-error workspace is required
  await client.call("get_settings");
  // @ts-expect-error workspace must be a string
  await client.call("get_settings", { workspace: 1 });
  await client.call("get_settings", { workspace: "/w" });
}

// Never called: an error's documented data fields are typed (plain property access compiles).
function typedErrorData(error: unknown): void {
  if (error instanceof IoError && error.data.memoryWritten === true) {
    const written: string[] | undefined = error.data.written;
    const revision: number | undefined = error.data.revision;
    void [written, revision];
  }
  if (error instanceof ConflictError) {
    const current: number | undefined = error.data.currentRevision;
    const seq: number | undefined = error.data.currentSeq;
    const ids: string[] | undefined = error.data.ids;
    // @ts-expect-error a conflict's data has no field of that name
    void error.data.revision;
    void [current, seq, ids];
  }
  if (error instanceof TooManyConnectionsError) {
    const limit: number | undefined = error.data.limit;
    void limit;
  }
  if (error instanceof NotFoundError) {
    const ids: string[] | undefined = error.data.ids;
    void ids;
  }
  if (error instanceof InvalidParamsError) {
    // kinds without documented fields keep the index signature: bracket access only
    const path: unknown = error.data["path"];
    void path;
  }
}

// Never called: a change notification's documented fields are typed.
function typedNotifications(client: MakaClient): void {
  client.on("memory_changed", (params) => {
    const returned: string[] | undefined = params.returned;
    const reapplied: string[] | undefined = params.reapplied;
    void [returned, reapplied, params.cause];
  });
  client.on("daemon_stopping", (params) => {
    assertType<Equal<typeof params.reason, DaemonStopping["reason"]>>(true);
  });
  client.on("subscription_lost", ({ params }) => {
    const workspace: string = params.workspace;
    void workspace;
  });
}

describe("types", () => {
  it("a notification's and a lost subscription's params are typed", () => {
    assertType<Equal<ClientEvents["import_progress"], [params: ImportProgressParams]>>(true);
    assertType<Equal<ClientEvents["daemon_stopping"], [params: DaemonStopping]>>(true);
    assert.equal(typeof typedNotifications, "function");
  });

  it("an error's documented data fields are typed", () => {
    assertType<Equal<IoError["data"]["memoryWritten"], boolean | undefined>>(true);
    assertType<Equal<ConflictError["data"]["kind"], "conflict">>(true);
    assert.equal(typeof typedErrorData, "function");
    assert.equal(typeof typedNotifications, "function");
  });

  it("results and params come from the catalogue", () => {
    assertType<Equal<ResultOf<"ping">, string>>(true);
    assertType<Equal<ResultOf<"status">, StatusResult>>(true);
    assertType<Equal<ParamsOf<"ping">, Record<string, never>>>(true);
    assert.equal(typeof typedCalls, "function");
    assert.equal(typeof typedWorkspaceCalls, "function");
  });

  it("the method proxy has one function per method", () => {
    const client = new MakaClient({ socketPath: "/nonexistent.sock" });
    assert.equal(typeof client.m.ping, "function");
    assert.equal(typeof client.m["rpc.discover"], "function");
    assert.ok(Object.isFrozen(client.m));
  });
});
