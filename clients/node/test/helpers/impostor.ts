// A JSON-RPC server run as another user (`nobody`): what another local user could put on
// the socket path. It answers every request with "pong" and reports every byte it got.

import { spawn, type ChildProcess } from "node:child_process";
import { chownSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";

import { shortTempDir } from "./daemon.js";

const SERVER = `
const net = require("node:net");
const server = net.createServer((socket) => {
  let buffered = "";
  socket.on("error", () => {});
  socket.on("data", (chunk) => {
    process.stdout.write("received " + chunk.length + "\\n");
    buffered += chunk.toString("utf8");
    let newline;
    while ((newline = buffered.indexOf("\\n")) >= 0) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      let id = null;
      try { id = JSON.parse(line).id; } catch {}
      if (id !== undefined && id !== null) socket.write(JSON.stringify({ jsonrpc: "2.0", id, result: "pong" }) + "\\n");
    }
  });
});
server.listen(process.argv[1], () => process.stdout.write("listening as " + process.getuid() + "\\n"));
`;

/** The uid and gid of `nobody`, or undefined where there is no such account. */
export function nobody(): { uid: number; gid: number } | undefined {
  try {
    for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
      const fields = line.split(":");
      if (fields[0] === "nobody") return { uid: Number(fields[2]), gid: Number(fields[3]) };
    }
  } catch {
    // no /etc/passwd
  }
  return undefined;
}

/** Why the impostor tests cannot run here, or undefined when they can. */
export function impostorSkipReason(): string | undefined {
  if (process.getuid?.() !== 0) return "needs root, to run a server as another user (nobody)";
  if (nobody() === undefined) return "no nobody account on this machine";
  return undefined;
}

export interface Impostor {
  /** Where it listens: `<folder owned by nobody>/s.sock`. */
  socketPath: string;
  uid: number;
  /** Bytes it has received so far, in total. */
  received(): number;
  stop(): Promise<void>;
}

/** Start the server as nobody in a folder of nobody's; resolves once it listens. */
export async function startImpostor(): Promise<Impostor> {
  const account = nobody()!;
  const root = shortTempDir("mki-");
  chownSync(root, account.uid, account.gid);
  const socketPath = join(root, "s.sock");
  const child: ChildProcess = spawn(process.execPath, ["-e", SERVER, socketPath], {
    uid: account.uid,
    gid: account.gid,
    stdio: ["ignore", "pipe", "inherit"],
  });
  let received = 0;
  await new Promise<void>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on("line", (line) => {
      if (line.startsWith("listening")) resolve();
      const match = /^received (\d+)$/.exec(line);
      if (match) received += Number(match[1]);
    });
    child.once("exit", (code) => reject(new Error(`the impostor exited (${code}) before listening`)));
  });
  return {
    socketPath,
    uid: account.uid,
    received: () => received,
    stop: async () => {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGKILL");
        await exited;
      }
    },
  };
}
