// The default socket path matches the daemon's (platformdirs user_runtime_dir("maka")).

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, rmSync, symlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";

import { defaultSocketPath, type SocketPathContext } from "../src/index.js";
import { findMakad, shortTempDir } from "./helpers/daemon.js";

type Lstat = NonNullable<SocketPathContext["lstat"]>;

function fakeDirs(dirs: Record<string, { uid: number; mode: number; link?: boolean }>): Lstat {
  return (path) => {
    const dir = dirs[path];
    if (!dir) return undefined;
    return { uid: dir.uid, mode: 0o40000 | dir.mode, isDirectory: () => !dir.link, isSymbolicLink: () => !!dir.link };
  };
}

describe("defaultSocketPath", () => {
  const base: SocketPathContext = { platform: "linux", uid: 1000, homedir: "/home/u", lstat: fakeDirs({}) };

  it("$MAKAD_SOCKET wins", () => {
    assert.equal(defaultSocketPath({ ...base, env: { MAKAD_SOCKET: "/x/y.sock", XDG_RUNTIME_DIR: "/run/user/1000" } }), "/x/y.sock");
  });

  it("a private $XDG_RUNTIME_DIR is used", () => {
    const lstat = fakeDirs({ "/run/user/1000": { uid: 1000, mode: 0o700 } });
    assert.equal(defaultSocketPath({ ...base, lstat, env: { XDG_RUNTIME_DIR: "/run/user/1000" } }), "/run/user/1000/maka/makad.sock");
  });

  it("a shared or foreign $XDG_RUNTIME_DIR is skipped for /run/user/<uid>", () => {
    const lstat = fakeDirs({ "/shared": { uid: 1000, mode: 0o755 }, "/run/user/1000": { uid: 1000, mode: 0o700 } });
    assert.equal(defaultSocketPath({ ...base, lstat, env: { XDG_RUNTIME_DIR: "/shared" } }), "/run/user/1000/maka/makad.sock");
  });

  it("without a runtime dir, Linux falls back to <tmp>/runtime-<uid>", () => {
    assert.equal(defaultSocketPath({ ...base, env: {} }), "/tmp/runtime-1000/maka/makad.sock");
    assert.equal(defaultSocketPath({ ...base, env: { TMPDIR: "/var/tmp/" } }), "/var/tmp/runtime-1000/maka/makad.sock");
  });

  it("a relative $XDG_RUNTIME_DIR is ignored", () => {
    assert.equal(defaultSocketPath({ ...base, env: { XDG_RUNTIME_DIR: "run" } }), "/tmp/runtime-1000/maka/makad.sock");
  });

  it("macOS uses ~/Library/Caches/TemporaryItems", () => {
    assert.equal(
      defaultSocketPath({ ...base, platform: "darwin", env: {} }),
      "/home/u/Library/Caches/TemporaryItems/maka/makad.sock",
    );
  });
});

/** The venv's python next to makad, if it has platformdirs. */
function venvPython(): string | undefined {
  try {
    const python = join(dirname(findMakad()), "python");
    if (!existsSync(python)) return undefined;
    execFileSync(python, ["-c", "import platformdirs"], { stdio: "ignore" });
    return python;
  } catch {
    return undefined;
  }
}

const python = venvPython();

describe("parity with the daemon's platformdirs", { skip: python ? false : "no python with platformdirs next to makad" }, () => {
  const fromPython = (env: Record<string, string>): string =>
    execFileSync(
      python!,
      ["-W", "ignore", "-c", 'import platformdirs, os; print(os.path.join(platformdirs.user_runtime_dir("maka", appauthor=False), "makad.sock"))'],
      { env: { PATH: process.env["PATH"] ?? "", HOME: process.env["HOME"] ?? "/", ...env }, encoding: "utf8" },
    ).trim();

  let root = "";
  const priv = () => join(root, "private");
  const shared = () => join(root, "shared");
  const link = () => join(root, "link");

  before(() => {
    root = shortTempDir("mkp-");
    mkdirSync(priv(), { mode: 0o700 });
    chmodSync(priv(), 0o700);
    mkdirSync(shared());
    chmodSync(shared(), 0o755);
    symlinkSync(priv(), link());
  });

  after(() => {
    rmSync(root, { recursive: true, force: true });
  });

  const cases: Array<[string, () => Record<string, string>]> = [
    ["no XDG_RUNTIME_DIR", () => ({})],
    ["a private XDG_RUNTIME_DIR", () => ({ XDG_RUNTIME_DIR: priv() })],
    ["a 0755 XDG_RUNTIME_DIR", () => ({ XDG_RUNTIME_DIR: shared() })],
    ["a symlinked XDG_RUNTIME_DIR", () => ({ XDG_RUNTIME_DIR: link() })],
    ["a missing XDG_RUNTIME_DIR", () => ({ XDG_RUNTIME_DIR: join(priv(), "missing") })],
  ];
  for (const [label, makeEnv] of cases) {
    it(`same path as Python with ${label}`, () => {
      const env = makeEnv();
      assert.equal(defaultSocketPath({ env }), fromPython(env));
    });
  }
});
