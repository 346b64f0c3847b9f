// The package loads by its own name both as ESM (import) and as CommonJS (require).

import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

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

describe("npm pack", () => {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

  it("packs the builds, the types, the README and the license, and no tests", () => {
    const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: root, encoding: "utf8" });
    const [pack] = JSON.parse(out) as [{ name: string; files: { path: string }[] }];
    const files = pack.files.map((f) => f.path);
    for (const wanted of ["package.json", "README.md", "LICENSE", "dist/esm/index.js", "dist/esm/index.d.ts", "dist/cjs/index.js", "dist/cjs/index.d.ts"]) {
      assert.ok(files.includes(wanted), `${wanted} is packed`);
    }
    assert.ok(!files.some((f) => f.startsWith("dist/test") || f.startsWith("test/")), "no tests packed");
    const meta = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as Record<string, unknown>;
    for (const field of ["name", "version", "description", "license", "keywords", "engines", "exports", "types", "files"]) {
      assert.ok(meta[field], `package.json has ${field}`);
    }
  });

  it("a build without the dev dependencies says to run npm ci first", () => {
    const dir = mkdtempSync(join(tmpdir(), "makad-nodeps-"));
    try {
      writeFileSync(join(dir, "package.json"), readFileSync(join(root, "package.json")));
      cpSync(join(root, "scripts"), join(dir, "scripts"), { recursive: true });
      const built = spawnSync("npm", ["run", "build"], { cwd: dir, encoding: "utf8" });
      assert.notEqual(built.status, 0);
      assert.match(built.stderr, /run `npm ci` in clients\/node first/);
      assert.doesNotMatch(built.stderr, /tsc: not found/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the packed tarball installs into another project and loads both ways", () => {
    const dir = mkdtempSync(join(tmpdir(), "makad-pack-"));
    try {
      execFileSync("npm", ["pack", "--ignore-scripts", "--pack-destination", dir], { cwd: root, encoding: "utf8" });
      const [tarball] = readdirSync(dir).filter((f) => f.endsWith(".tgz"));
      const app = join(dir, "app");
      mkdirSync(app);
      writeFileSync(join(app, "package.json"), JSON.stringify({ name: "probe", private: true }));
      execFileSync("npm", ["install", "--no-audit", "--no-fund", "--ignore-scripts", "--offline", join(dir, tarball!)], { cwd: app });
      const loaded = execFileSync(
        process.execPath,
        ["-e", "const c = require('makad-client'); import('makad-client').then(e => console.log(typeof c.MakaClient, typeof e.MakaClient))"],
        { cwd: app, encoding: "utf8" },
      );
      assert.equal(loaded.trim(), "function function");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
