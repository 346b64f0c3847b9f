// The README's usage and build_context examples type-check against the built package and
// run as written against a real daemon; its errors table names every error class.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import ts from "typescript";

import { ERROR_CLASSES, MakaClient } from "makad-client";
import { Daemon } from "./helpers/daemon.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

function example(marker: string): string {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const block = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.startsWith(marker));
  assert.ok(block, `the README has a ts block starting with ${marker}`);
  return block;
}

/** TypeScript's complaints about each of `files` (name: code), compiled together against the built package. */
function typeErrors(scratch: string, files: Record<string, string>): string[] {
  const paths = Object.entries(files).map(([name, code]) => {
    writeFileSync(join(scratch, name), code);
    return join(scratch, name);
  });
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: ["node"],
    typeRoots: [join(root, "node_modules", "@types")],
  };
  const program = ts.createProgram(paths, options);
  return ts.getPreEmitDiagnostics(program).map((d) => `${d.file?.fileName}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`);
}

/** Run `code` (TypeScript, transpiled) with Node against the daemon, in its workspace; its output. */
function run(scratch: string, code: string, name: string, daemon: Daemon): string {
  const js = ts.transpileModule(code, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  }).outputText;
  const file = join(scratch, name);
  writeFileSync(file, js);
  return execFileSync(process.execPath, ["--unhandled-rejections=strict", file], {
    cwd: daemon.workspace,
    env: { ...process.env, MAKAD_SOCKET: daemon.socketPath },
    encoding: "utf8",
    timeout: 30_000,
  });
}

const BUILD_CONTEXT = "// build_context";
const USAGE = 'import { MakaClient, ConflictError, NotFoundError, StatePoller } from "makad-client";';

describe("README examples", () => {
  let daemon: Daemon;
  // Inside the package, so that "makad-client" resolves to this build (self-reference).
  const scratch = join(root, "dist", "readme-example");

  before(async () => {
    daemon = await Daemon.start();
    mkdirSync(scratch, { recursive: true });
  });
  after(async () => {
    await daemon.dispose();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("the usage and build_context examples type-check with the package's types", () => {
    assert.deepEqual(typeErrors(scratch, { "usage.mts": example(USAGE), "build-context.mts": example(BUILD_CONTEXT) }), []);
  });

  it("build_context runs and prints the memory the agent may read", async () => {
    const maka = new MakaClient({ socketPath: daemon.socketPath });
    await maka.call("add_entry", { workspace: daemon.workspace, title: "Deploys", content: "The team deploys on Tuesdays." });
    await maka.call("set_settings", { workspace: daemon.workspace, agentReadEnabled: true });
    await maka.close();
    const out = run(scratch, example(BUILD_CONTEXT), "build-context.mjs", daemon);
    assert.match(out, /^\d+ of 1500 tokens \((fast|bounded|slow|fallback) path\), 0 messages$/m);
    assert.match(out, /The team deploys on Tuesdays\./);
  });

  it("usage runs as written", () => {
    const out = run(scratch, example(USAGE), "usage.mjs", daemon);
    assert.match(out, /^pong$/m);
    assert.match(out, /^no such entry$/m);
  });
});

// Just enough of Electron's and VS Code's APIs, as their own typings declare them, for the
// README's integration examples to be compiled against this package's real types.
const HOST_STUBS = `
declare module "electron" {
  export const app: {
    whenReady(): Promise<void>;
    getPath(name: "home" | "documents" | "userData"): string;
    on(event: "will-quit", listener: () => void): void;
  };
  export class BrowserWindow {
    constructor(options?: { webPreferences?: { preload?: string } });
    webContents: { send(channel: string, ...args: unknown[]): void };
  }
  export const ipcMain: { handle(channel: string, listener: (event: unknown, ...args: any[]) => unknown): void };
}
declare module "vscode" {
  export interface Disposable { dispose(): any }
  export interface CancellationToken { isCancellationRequested: boolean; onCancellationRequested(listener: () => any): Disposable }
  export interface ExtensionContext { readonly subscriptions: { dispose(): any }[] }
  export interface StatusBarItem extends Disposable { text: string; show(): void }
  export enum StatusBarAlignment { Left = 1, Right = 2 }
  export enum ProgressLocation { SourceControl = 1, Window = 10, Notification = 15 }
  export namespace workspace {
    const workspaceFolders: readonly { readonly uri: { readonly fsPath: string } }[] | undefined;
    function openTextDocument(options?: { language?: string; content?: string }): Thenable<unknown>;
  }
  export namespace window {
    function createStatusBarItem(alignment?: StatusBarAlignment, priority?: number): StatusBarItem;
    function withProgress<R>(
      options: { location: ProgressLocation; title?: string; cancellable?: boolean },
      task: (progress: unknown, token: CancellationToken) => Thenable<R>,
    ): Thenable<R>;
    function showTextDocument(document: unknown): Thenable<unknown>;
    function showWarningMessage(message: string): Thenable<string | undefined>;
  }
  export namespace commands {
    function registerCommand(command: string, callback: (...args: any[]) => any): Disposable;
  }
}
`;

describe("README: Electron and VS Code examples", () => {
  const scratch = join(root, "dist", "readme-hosts");
  before(() => mkdirSync(scratch, { recursive: true }));
  after(() => rmSync(scratch, { recursive: true, force: true }));

  it("type-check with the package's types (the Electron main process as CommonJS)", () => {
    const files = {
      "hosts.d.ts": HOST_STUBS,
      "main.cts": example("// main.ts"),
      "extension.mts": example("// extension.ts"),
      "jsonrpc.mts": example('import { createConnection } from "node:net";'),
    };
    assert.deepEqual(typeErrors(scratch, files), []);
  });
});

describe("README: errors", () => {
  it("the table names the class of every error kind", () => {
    const readme = readFileSync(join(root, "README.md"), "utf8");
    const table = readme.slice(readme.indexOf("### Errors"), readme.indexOf("## Electron"));
    const missing = Object.values(ERROR_CLASSES)
      .map((cls) => cls.name)
      .filter((name) => !table.includes(`\`${name}\``));
    assert.deepEqual(missing, []);
  });
});
