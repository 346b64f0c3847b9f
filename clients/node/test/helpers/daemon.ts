// A real makad subprocess for tests: socket and data in a short temp dir ($TMPDIR, or /tmp
// when that is too long for a socket path: AF_UNIX paths are limited to 107 bytes).

import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { createInterface } from "node:readline";

const STARTUP_TIMEOUT_MS = 20_000;
const STOP_TIMEOUT_MS = 15_000;
const live = new Set<ChildProcess>();

// A failed test must not leave daemons behind.
process.on("exit", () => {
  for (const child of live) child.kill("SIGKILL");
});

/** `$MAKAD_BIN`, else `makad` on PATH. */
export function findMakad(): string {
  const explicit = process.env["MAKAD_BIN"];
  if (explicit) return explicit;
  for (const dir of (process.env["PATH"] ?? "").split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, "makad");
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  throw new Error("makad not found: set MAKAD_BIN or put the venv's bin on PATH (e.g. PATH=../../.venv/bin:$PATH)");
}

// AF_UNIX socket paths hold at most 107 bytes; the tests put sockets at most this far
// below a temp root.
const MAX_SOCKET_PATH_BYTES = 107;
const SOCKET_BELOW_ROOT_BYTES = 40;

/** A short temp dir: under $TMPDIR (os.tmpdir()) when a socket below it fits, else /tmp. */
export function shortTempDir(prefix = "mkn-"): string {
  const base = tmpdir();
  const fits = Buffer.byteLength(base) + SOCKET_BELOW_ROOT_BYTES <= MAX_SOCKET_PATH_BYTES;
  return mkdtempSync(join(fits ? base : "/tmp", prefix));
}

export class Daemon {
  readonly socketPath: string;
  readonly dataDir: string;
  readonly workspace: string;
  private child: ChildProcess | null = null;
  private stderr = "";

  private constructor(
    readonly root: string,
    readonly extraArgs: string[],
  ) {
    this.socketPath = join(root, "s.sock");
    this.dataDir = join(root, "data");
    this.workspace = join(root, "ws");
    mkdirSync(this.workspace, { recursive: true });
  }

  static async start(extraArgs: string[] = []): Promise<Daemon> {
    const daemon = new Daemon(shortTempDir(), extraArgs);
    await daemon.start();
    return daemon;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Start (again) on the same socket and data dir; resolves once it listens. */
  start(): Promise<void> {
    if (this.child) throw new Error("makad is already running");
    const child = spawn(findMakad(), ["--socket", this.socketPath, "--data-dir", this.dataDir, ...this.extraArgs], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child = child;
    live.add(child);
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (text: string) => {
      this.stderr = (this.stderr + text).slice(-8_000);
    });
    return new Promise((resolve, reject) => {
      const lines = createInterface({ input: child.stdout! });
      const timer = setTimeout(() => fail(new Error(`makad did not listen within ${STARTUP_TIMEOUT_MS} ms`)), STARTUP_TIMEOUT_MS);
      const onExit = (code: number | null) => fail(new Error(`makad exited (${code}) before listening:\n${this.stderr}`));
      const fail = (error: Error) => {
        clearTimeout(timer);
        child.off("exit", onExit);
        reject(error);
      };
      child.once("exit", onExit);
      child.once("error", fail);
      lines.on("line", (line) => {
        if (!line.includes("listening on")) return;
        clearTimeout(timer);
        child.off("exit", onExit);
        resolve();
      });
    });
  }

  /** Stop with a signal (SIGTERM by default) and wait for the exit; returns the exit code. */
  async stop(signal: NodeJS.Signals = "SIGTERM"): Promise<number | null> {
    const child = this.child;
    if (!child) return null;
    this.child = null;
    if (child.exitCode !== null || child.signalCode !== null) {
      live.delete(child);
      return child.exitCode;
    }
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    child.kill(signal);
    const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
    const code = await exited;
    clearTimeout(timer);
    live.delete(child);
    return code;
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** Stop and remove the temp dir. */
  async dispose(): Promise<void> {
    await this.stop();
    rmSync(this.root, { recursive: true, force: true });
  }

  log(): string {
    return this.stderr;
  }
}
