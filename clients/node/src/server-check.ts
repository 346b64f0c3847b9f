// Who is listening: the client talks only to a server run by the uid it expects.
//
// A local user who can make the socket's folder before makad does (`/tmp/runtime-<uid>`
// when XDG_RUNTIME_DIR is unset) or write to it can put a server of their own there: it
// would read every turn and proposal the client sends and could answer with invented
// memory. The Python client asks the kernel who the server is (SO_PEERCRED, getpeereid);
// Node has no API for that. So this client checks the socket file instead, right before
// and right after connecting:
//
// - the socket file belongs to the expected uid (bind() makes it as the server's uid);
// - every folder from `/` to it (through symlinks, each checked where it sits) belongs to
//   that uid, this process's uid or root, and is writable by nobody else unless sticky
//   (like /tmp, where nobody can rename or delete another's entries): so nobody but those
//   uids can have put a socket there or can swap it while the client connects;
// - the file is the same one (device and inode) before and after the connect;
// - the socket path is no symbolic link (the link and the file it leads to would be two
//   things to check): refused, naming the path it leads to.
//
// Limits: this shows who made the socket file and who could replace it, not which process
// holds the listening socket (a process of the expected uid, or root, can hand it to
// another one — it is trusted anyway); it reads owners the file system reports (some
// network and FUSE mounts report them loosely); and it refuses a socket in a folder another
// user owns even when the server is yours (e.g. a bind mount in a container): `serverUid`
// or MAKA_SERVER_UID then says which uid to expect, or "any" turns the check off.

import { lstat, readlink, realpath } from "node:fs/promises";
import { join, resolve, sep } from "node:path";

import { UntrustedServerError, systemReason } from "./errors.js";

/** The uid the server must run as, or "any" (no check). */
export type ServerUid = number | "any";

export const SERVER_UID_ENV = "MAKA_SERVER_UID";
const MAX_SYMLINK_HOPS = 40;
const OTHERS_WRITE = 0o022;
const STICKY = 0o1000;

/** The socket file a connect reached: compared before and after. */
export interface SocketFileIdentity {
  dev: number;
  ino: number;
}

function ownUid(): number {
  return process.geteuid?.() ?? 0;
}

/**
 * The uid the server must run as, `null` for any: `option`, else `$MAKA_SERVER_UID`, else
 * this process's effective uid. A TypeError for anything but a uid or "any".
 */
export function expectedServerUid(
  option: ServerUid | undefined,
  env: Record<string, string | undefined> = process.env,
): number | null {
  let value: unknown = option;
  if (value === undefined) {
    const raw = (env[SERVER_UID_ENV] ?? "").trim();
    if (raw === "") return ownUid();
    value = raw;
  }
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return value;
  if (typeof value === "string") {
    const text = value.trim().toLowerCase();
    if (text === "any") return null;
    if (/^[0-9]+$/.test(text)) return Number(text);
  }
  throw new TypeError(`serverUid (${SERVER_UID_ENV}) must be a uid or "any", not ${JSON.stringify(value)}`);
}

/**
 * Check the socket file at `socketPath` and the folders above it for a server of uid
 * `expected` (UntrustedServerError when another user could have put it there); `null`
 * when there is nothing to check (no file: the connect will say so).
 */
export async function checkSocketFile(socketPath: string, expected: number): Promise<SocketFileIdentity | null> {
  let info;
  try {
    info = await lstat(socketPath);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    throw new UntrustedServerError(socketPath, expected, `its socket file cannot be checked (${systemReason(code)})`);
  }
  if (info.isSymbolicLink()) {
    // The connect would follow it to a file this check never looked at: refused here, with
    // the path to use, rather than left to fail after the connect as a changed file.
    const target = await readlink(socketPath).catch(() => undefined);
    const to = target === undefined ? "" : ` (to ${target})`;
    throw new UntrustedServerError(
      socketPath,
      expected,
      `its socket path is a symbolic link${to}, which this client does not follow`,
      undefined,
      "connect to the path it leads to instead (socketPath or MAKAD_SOCKET); " +
        'serverUid "any" (MAKA_SERVER_UID=any) turns the check off',
    );
  }
  if (!info.isSocket()) return null; // not a server at all: the connect fails on its own
  if (info.uid !== expected) {
    throw new UntrustedServerError(socketPath, expected, `its socket file belongs to uid ${info.uid}`, info.uid);
  }
  const absolute = resolve(socketPath);
  await checkFolders(socketPath, expected, absolute.slice(0, absolute.lastIndexOf(sep)) || sep, 0);
  return { dev: info.dev, ino: info.ino };
}

/** Every folder from `/` to `folder`: owned by a trusted uid, writable by nobody else unless sticky. */
async function checkFolders(socketPath: string, expected: number, folder: string, hops: number): Promise<void> {
  const trusted = new Set([0, ownUid(), expected]);
  const parts = folder.split(sep).filter((part) => part !== "");
  let here: string = sep;
  for (let index = -1; index < parts.length; index++) {
    if (index >= 0) here = join(here, parts[index]!);
    let info;
    try {
      info = await lstat(here);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      throw new UntrustedServerError(socketPath, expected, `${here} cannot be checked (${systemReason(code)})`);
    }
    if (!trusted.has(info.uid)) {
      throw new UntrustedServerError(socketPath, expected, `${here} belongs to uid ${info.uid}`, info.uid);
    }
    if (info.isSymbolicLink()) {
      if (hops >= MAX_SYMLINK_HOPS) throw new UntrustedServerError(socketPath, expected, `${here}: too many symlinks`);
      const target = await realpath(here);
      await checkFolders(socketPath, expected, join(target, ...parts.slice(index + 1)), hops + 1);
      return;
    }
    if ((info.mode & OTHERS_WRITE) !== 0 && (info.mode & STICKY) === 0) {
      const mode = (info.mode & 0o7777).toString(8).padStart(4, "0");
      throw new UntrustedServerError(socketPath, expected, `${here} is writable by others (mode ${mode})`);
    }
  }
}
