// The package loads by its own name both as ESM (import) and as CommonJS (require).

import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { describe, it } from "node:test";

const require = createRequire(import.meta.url);

describe("dual build", () => {
  it("import and require both expose the client, the errors and the generated catalogue", async () => {
    const esm = (await import("makad-client")) as Record<string, unknown>;
    const cjs = require("makad-client") as Record<string, unknown>;
    for (const mod of [esm, cjs]) {
      assert.equal(typeof mod["MakaClient"], "function");
      assert.equal(typeof mod["NotFoundError"], "function");
      assert.equal(typeof mod["defaultSocketPath"], "function");
      assert.ok(Array.isArray(mod["METHOD_NAMES"]));
    }
    assert.deepEqual(Object.keys(cjs).sort(), Object.keys(esm).sort());
    assert.notEqual(esm["MakaClient"], cjs["MakaClient"]);
  });

  it("the CommonJS errors are real subclasses there too", () => {
    const cjs = require("makad-client") as typeof import("makad-client");
    const error = cjs.remoteErrorFrom({ code: -32002, message: "stale", data: { kind: "conflict", revision: 4 } });
    assert.ok(error instanceof cjs.ConflictError);
    assert.ok(error instanceof cjs.RemoteError);
    assert.ok(error instanceof cjs.MakaError);
  });
});
