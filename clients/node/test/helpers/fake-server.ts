// Socket servers that misbehave on purpose: one that never answers, one that hangs up.

import { createServer, type Server, type Socket } from "node:net";
import { rmSync } from "node:fs";
import { join } from "node:path";

import { shortTempDir } from "./daemon.js";

export interface FakeServer {
  socketPath: string;
  /** Every byte received, as text. */
  received(): string;
  /** Resolves once `text` has been received. */
  waitFor(text: string): Promise<void>;
  close(): Promise<void>;
}

/** A Unix socket server that reads requests and then does `onData` (nothing by default). */
export async function fakeServer(onData: (socket: Socket) => void = () => {}): Promise<FakeServer> {
  const root = shortTempDir("mkf-");
  const socketPath = join(root, "fake.sock");
  const sockets = new Set<Socket>();
  let received = "";
  const waiters: Array<{ text: string; resolve: () => void }> = [];
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    socket.on("data", (chunk) => {
      received += chunk.toString("utf8");
      for (const waiter of [...waiters]) {
        if (received.includes(waiter.text)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      }
      onData(socket);
    });
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    socketPath,
    received: () => received,
    waitFor: (text) =>
      received.includes(text) ? Promise.resolve() : new Promise((resolve) => waiters.push({ text, resolve })),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(root, { recursive: true, force: true });
    },
  };
}
