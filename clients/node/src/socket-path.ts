// The daemon's default socket path, computed the way makad computes it
// (platformdirs.user_runtime_dir("maka") + "/makad.sock").

import { lstatSync, type Stats } from "node:fs";
import { homedir as osHomedir } from "node:os";
import { isAbsolute, join } from "node:path";

/** What the default depends on; every field defaults to the current process. */
export interface SocketPathContext {
  env?: Record<string, string | undefined>;
  platform?: NodeJS.Platform;
  /** Effective uid. */
  uid?: number;
  homedir?: string;
  /** lstat, or undefined when the path does not exist. */
  lstat?: (path: string) => Pick<Stats, "uid" | "mode" | "isDirectory" | "isSymbolicLink"> | undefined;
}

const APP = "maka";
const SOCKET_NAME = "makad.sock";

function defaultLstat(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

/**
 * `$MAKAD_SOCKET`, else `<runtime dir>/maka/makad.sock` where the runtime dir is
 * `$XDG_RUNTIME_DIR` when it is absolute and private (a 0700 directory of ours, or
 * missing), else on Linux `/run/user/<uid>` when private, else `<tmp>/runtime-<uid>`;
 * on macOS `~/Library/Caches/TemporaryItems`.
 */
export function defaultSocketPath(context: SocketPathContext = {}): string {
  const env = context.env ?? process.env;
  const explicit = env["MAKAD_SOCKET"];
  if (explicit) return explicit;
  return join(runtimeDir(context, env), APP, SOCKET_NAME);
}

function runtimeDir(context: SocketPathContext, env: Record<string, string | undefined>): string {
  const platform = context.platform ?? process.platform;
  const uid = context.uid ?? process.geteuid?.() ?? 0;
  const lstat = context.lstat ?? defaultLstat;

  const problem = (path: string, missingOk: boolean): boolean => {
    const info = lstat(path);
    if (info === undefined) return !missingOk;
    return info.isSymbolicLink() || !info.isDirectory() || info.uid !== uid || (info.mode & 0o777) !== 0o700;
  };

  const xdg = env["XDG_RUNTIME_DIR"] ?? "";
  if (isAbsolute(xdg) && xdg.startsWith("/") && !problem(xdg, true)) return xdg;

  if (platform === "darwin") {
    return join(context.homedir ?? env["HOME"] ?? osHomedir(), "Library", "Caches", "TemporaryItems");
  }
  const base = platform === "openbsd" ? `/tmp/run/user/${uid}`
    : platform === "freebsd" || platform === "netbsd" ? `/var/run/user/${uid}`
    : `/run/user/${uid}`;
  if (!problem(base, false)) return base;
  return join(tempRoot(env), `runtime-${uid}`);
}

/** Python's tempfile.gettempdir() order: $TMPDIR, $TEMP, $TMP, then /tmp. */
function tempRoot(env: Record<string, string | undefined>): string {
  for (const name of ["TMPDIR", "TEMP", "TMP"]) {
    const value = env[name];
    if (value && isAbsolute(value)) return value.length > 1 ? value.replace(/\/+$/, "") : value;
  }
  return "/tmp";
}
