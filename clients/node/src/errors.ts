// Client-side errors. Remote errors (JSON-RPC error replies) get one subclass per
// `error.data.kind`, generated from the OpenRPC document into generated.ts.

import type { ErrorKind } from "./generated.js";

/** Base of every error this package throws. */
export class MakaError extends Error {
  override name = "MakaError";
}

/** `error.data` of a reply: always carries `kind`, plus kind-specific details. */
export interface RemoteErrorData {
  kind: string;
  [key: string]: unknown;
}

/**
 * What an error's text adds to its message from `data`: the reason of an error about the
 * whole message (too_large, bad_frame), and the param and reason of params that do not fit
 * the method ("Invalid params" alone would not say which param, nor what is wrong).
 */
function why(code: number, message: string, data: RemoteErrorData): string {
  const reason = data["reason"];
  if (typeof reason !== "string" || !reason) return "";
  if (code === -32600) return `: ${reason}`;
  if (code === -32602 && message === "Invalid params") {
    const path = data["path"];
    return `: ${typeof path === "string" && path !== "" && path !== "$" ? `${path}: ` : ""}${reason}`;
  }
  return "";
}

/** A JSON-RPC error reply from the daemon. `kind` is the stable reason; `message` is for people. */
export class RemoteError<K extends string = ErrorKind | (string & {})> extends MakaError {
  override name = "RemoteError";
  readonly code: number;
  readonly kind: K;
  readonly data: RemoteErrorData;
  /** The daemon's own message (`message` adds kind, code and method to it). */
  readonly remoteMessage: string;
  /** The method of the call that failed (absent for connection-level errors). */
  readonly method: string | undefined;

  constructor(code: number, message: string, data: RemoteErrorData, method?: string) {
    super(`${message}${why(code, message, data)} (${data.kind}, code ${code}${method ? `, method ${method}` : ""})`);
    this.code = code;
    this.remoteMessage = message;
    this.kind = data.kind as K;
    this.data = data;
    this.method = method;
  }
}

/**
 * What a connect error that means "no daemon there" says to a person: the Python client's
 * words (maka.autostart.WHY_NOBODY), so both clients say the same.
 */
export const WHY_NOBODY: Readonly<Record<string, string>> = {
  ENOENT: "no socket there",
  ECONNREFUSED: "the socket file is there but nothing listens on it",
};

// The system's words for the errors a connect or a check of the socket file meets (what
// Python's `strerror` gives; Node 20 has no getSystemErrorMessage).
const SYSTEM_REASONS: Readonly<Record<string, string>> = {
  EACCES: "Permission denied",
  EPERM: "Operation not permitted",
  ENOENT: "No such file or directory",
  ENOTDIR: "Not a directory",
  ECONNREFUSED: "Connection refused",
  ECONNRESET: "Connection reset by peer",
  ELOOP: "Too many levels of symbolic links",
  ENAMETOOLONG: "File name too long",
  ENOTSOCK: "Socket operation on non-socket",
  EIO: "Input/output error",
};

/** The system's reason for an error code, as a person reads it (`EACCES` → `Permission denied`). */
export function systemReason(code: string | undefined): string {
  if (code === undefined) return "unknown error";
  return SYSTEM_REASONS[code] ?? code;
}

/**
 * The longest Unix socket path connect() takes (sun_path less its NUL: 108 on Linux, 104 on
 * macOS and the BSDs), as the Python client's maka.autostart.MAX_SOCKET_PATH_BYTES. Node
 * does not refuse a longer one: it cuts it to fit and dials whatever the cut path names.
 */
export const MAX_SOCKET_PATH_BYTES = process.platform === "linux" ? 107 : 103;

/**
 * No daemon accepted a connection on the socket (after the reconnect attempts), or the
 * socket path is too long for any daemon to listen on (`reason` `ENAMETOOLONG`, never
 * retried). The words are the Python client's (maka.errors.DaemonUnavailable).
 */
export class DaemonUnavailableError extends MakaError {
  override name = "DaemonUnavailableError";
  readonly socketPath: string;
  /** The last connect failure's code, e.g. `ENOENT` or `ECONNREFUSED` (the message words it). */
  readonly reason: string;

  constructor(socketPath: string, reason: string, options?: { cause?: unknown }) {
    const size = Buffer.byteLength(socketPath);
    super(
      reason === "ENAMETOOLONG" && size > MAX_SOCKET_PATH_BYTES
        ? `cannot use the socket ${socketPath}: its path is ${size} bytes, over the ` +
            `${MAX_SOCKET_PATH_BYTES} a Unix socket path may have; pass a shorter socketPath or ` +
            "MAKAD_SOCKET (and start makad with the same)"
        : reason === "EAGAIN"
          ? // The daemon's listen queue is full (a burst of clients, or another user's flood of
            // connects on a socket opened to others): it is busy, not gone.
            `makad on ${socketPath} is too busy to take a connection: its listen queue stayed ` +
            "full through every retry; try again, or allow more retries (reconnect)"
          : `no makad is running on ${socketPath} (${WHY_NOBODY[reason] ?? systemReason(reason)}); ` +
            "start one with `makad` or `scripts/run`, or pass socketPath / set MAKAD_SOCKET",
      options,
    );
    this.socketPath = socketPath;
    this.reason = reason;
  }
}

/**
 * The server on the socket is not run by the uid this client expects (by default its own):
 * refused before anything was sent, since another user's server would read every request
 * and could answer with invented memory. Node cannot read the server's credentials, so the
 * socket file and its folders stand in (see server-check.ts for what that proves).
 */
export class UntrustedServerError extends MakaError {
  override name = "UntrustedServerError";
  readonly socketPath: string;
  readonly expectedUid: number;
  /** What failed the check, e.g. `its socket file belongs to uid 65534`. */
  readonly reason: string;
  /** The uid owning the socket file or folder at fault, when that is what failed. */
  readonly ownerUid: number | undefined;

  /**
   * `fix`: what to do instead of allowing another uid, when that is not the remedy (a
   * socket path that is a symbolic link: connect to the path it leads to).
   */
  constructor(socketPath: string, expectedUid: number, reason: string, ownerUid?: number, fix?: string) {
    const allow = ownerUid ?? "<uid>";
    super(
      fix !== undefined
        ? `the server on ${socketPath} is not trusted: ${reason}; refusing to talk to it, nothing was sent. ${fix}`
        : `the server on ${socketPath} is not trusted: ${reason}, and it should be run by uid ${expectedUid}; ` +
            "refusing to talk to it (another user's server would read everything this client sends and " +
            "could answer with invented memory). If it is the makad you mean to use, allow its uid: " +
            `serverUid: ${allow} (or MAKA_SERVER_UID=${allow}); "any" turns the check off`,
    );
    this.socketPath = socketPath;
    this.expectedUid = expectedUid;
    this.reason = reason;
    this.ownerUid = ownerUid;
  }
}

/**
 * The connection broke after the request was written: the daemon may or may not have
 * run it. Mutating calls can be retried safely with the same `requestId`.
 */
export class ConnectionLostError extends MakaError {
  override name = "ConnectionLostError";
  readonly method: string;

  constructor(method: string, options?: { cause?: unknown }) {
    super(`the connection to makad was lost before ${method} was answered`, options);
    this.method = method;
  }
}

/**
 * The call got no reply within its timeout (a notification: was not written within it).
 * `sent` says whether the request had reached the socket: one that had not (the client was
 * still connecting, or the daemon was not reading) was never run, and the message says why.
 */
export class TimeoutError extends MakaError {
  override name = "TimeoutError";
  readonly method: string;
  readonly timeoutMs: number;
  /** The request had been written to the socket: the daemon may still run it. */
  readonly sent: boolean;

  /** `unsentBecause`: why a request was not sent yet (its absence: it was sent). */
  constructor(method: string, timeoutMs: number, notification = false, unsentBecause?: string) {
    super(
      notification
        ? `${method} was not written within ${timeoutMs} ms${unsentBecause ? `: ${unsentBecause}` : ""}`
        : unsentBecause
          ? `${method} was not sent within ${timeoutMs} ms: ${unsentBecause}`
          : `${method} got no reply within ${timeoutMs} ms`,
    );
    this.method = method;
    this.timeoutMs = timeoutMs;
    this.sent = unsentBecause === undefined;
  }
}

/**
 * What a signal's reason adds to "was aborted": its message, unless it is the plain
 * `AbortError` that `abort()` without a reason gives (`AbortSignal.timeout`'s reason says
 * it timed out; an app's own reason says what it was).
 */
function abortReason(reason: unknown): string {
  if (reason instanceof Error || reason instanceof DOMException) {
    if (reason.name === "TimeoutError") return ": its signal timed out";
    return reason.name === "AbortError" || !reason.message ? "" : `: ${reason.message}`;
  }
  if (typeof reason === "string" && reason) return `: ${reason}`;
  return "";
}

/** The call's AbortSignal fired before the reply came. `cause` is the signal's reason. */
export class AbortError extends MakaError {
  override name = "AbortError";
  readonly method: string;

  constructor(method: string, reason?: unknown) {
    super(`${method} was aborted${abortReason(reason)}`, { cause: reason });
    this.method = method;
  }
}

/** The daemon sent bytes that are not JSON-RPC 2.0 in the connection's framing. */
export class ProtocolError extends MakaError {
  override name = "ProtocolError";
  /** From a decoder: the messages that came whole before the fault, in order. */
  decoded: unknown[] = [];
}

/** The client was closed with `close()`; pending and later calls fail with this. */
export class ClientClosedError extends MakaError {
  override name = "ClientClosedError";

  constructor() {
    super("the makad client is closed");
  }
}
