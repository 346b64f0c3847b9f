// MakaClient: one Unix-socket connection to makad, promise calls, notifications as events.

import { EventEmitter } from "node:events";
import { createConnection, type Socket } from "node:net";

import { APPEND_METHOD, appendInParts, type Limits } from "./append-parts.js";
import {
  AbortError,
  ClientClosedError,
  ConnectionLostError,
  DaemonUnavailableError,
  MAX_SOCKET_PATH_BYTES,
  MakaError,
  ProtocolError,
  TimeoutError,
} from "./errors.js";
import { createDecoder, encodeMessage, type Decoder, type Framing } from "./framing.js";
import {
  LIMITS,
  METHOD_NAMES,
  NOTIFICATION_NAMES,
  type ChangeNotification,
  type MethodName,
  type NotificationName,
  type Notifications,
  type ParamsOf,
  type ResultOf,
} from "./generated.js";
import { remoteErrorFrom } from "./remote.js";
import { checkSocketFile, expectedServerUid, type ServerUid } from "./server-check.js";
import { defaultSocketPath } from "./socket-path.js";

export interface ReconnectOptions {
  /** Connect attempts after the first failed one before giving up (0: fail at once; `Infinity`: never). */
  retries: number;
  /** Delay before the first retry; doubled on each further one. */
  baseMs: number;
  /** Ceiling of the delay. */
  maxMs: number;
}

export interface ClientOptions {
  /** Default: `defaultSocketPath()` (the daemon's own default). */
  socketPath?: string;
  /** Wire framing; the daemon detects it per connection. Default `"ndjson"`. */
  framing?: Framing;
  /** Default per-call timeout; `0` or `Infinity` means none. Default 30 000 ms. */
  timeoutMs?: number;
  /** Connect/reconnect policy, or `false` for a single attempt. */
  reconnect?: Partial<ReconnectOptions> | false;
  /** Largest message accepted from the daemon. Default 64 MiB. */
  maxMessageBytes?: number;
  /**
   * The uid the server must run as: another uid than this process's own (a makad run by
   * another account on purpose), or `"any"` to skip the check. Default:
   * `$MAKA_SERVER_UID`, else this process's uid. A server that fails the check is refused
   * with UntrustedServerError before anything is sent (see server-check.ts).
   */
  serverUid?: ServerUid;
}

export interface CallOptions {
  /** Aborting rejects the call with AbortError (the daemon may still complete it). */
  signal?: AbortSignal;
  /** Overrides the client's `timeoutMs` for this call. */
  timeoutMs?: number;
}

/** Params of `memory_changed`, `proposals_changed` and `settings_changed` (generated from the document). */
export type { ChangeNotification };

export const CHANGE_NOTIFICATIONS = ["memory_changed", "proposals_changed", "settings_changed"] as const;
export type ChangeNotificationName = (typeof CHANGE_NOTIFICATIONS)[number];

/** One event per notification of the document, named as it, with its typed params. */
export type NotificationEvents = { [N in NotificationName]: [params: Notifications[N]] };

/**
 * Events a MakaClient emits, with their listener arguments: each notification of the
 * document (`memory_changed`, `daemon_stopping`, …) under its own name, and these.
 */
export interface ClientEvents extends NotificationEvents {
  /** Every notification from the daemon, known or not. */
  notification: [method: string, params: unknown];
  /** A connection is up (`reconnect`: after a loss; subscriptions are renewed by then, re-read state). */
  connect: [info: { reconnect: boolean }];
  /** The connection was lost (not by `close()`). */
  disconnect: [info: { error: Error | undefined }];
  /** A connect attempt failed; the next one is in `delayMs`. */
  reconnecting: [info: { attempt: number; delayMs: number; error: Error }];
  /** A subscription could not be renewed after a reconnect: the params of its `subscribe` (the daemon accepted them). */
  subscription_lost: [info: { params: ParamsOf<"subscribe">; error: Error }];
}

type EventName = keyof ClientEvents;
type Listener<E extends EventName> = (...args: ClientEvents[E]) => void;

/** Arguments of a call: params may be left out when the method has no required param. */
export type CallArgs<M extends MethodName> =
  {} extends ParamsOf<M>
    ? [params?: ParamsOf<M>, options?: CallOptions]
    : [params: ParamsOf<M>, options?: CallOptions];

/** `client.m.read_state({...})`: one typed function per method of the document. */
export type MethodProxy = { readonly [M in MethodName]: (...args: CallArgs<M>) => Promise<ResultOf<M>> };

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_RECONNECT: ReconnectOptions = { retries: 6, baseMs: 50, maxMs: 2_000 };
const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

interface Pending {
  /** The request's id; a notification's key in `pending` only (it is sent without one). */
  readonly id: number;
  readonly method: string;
  readonly message: Record<string, unknown>;
  /** A request (settled by its reply), not a notification (settled once written). */
  readonly expectsReply: boolean;
  settled: boolean;
  /** The request reached the socket's kernel buffer: a lost connection leaves its outcome unknown. */
  written: boolean;
  /**
   * Handed to the socket, perhaps in part: a connection the daemon refused with an id:null
   * error (the message over its cap) settles it with that error instead of sending it again.
   */
  handed: boolean;
  /** Bound to one connection (a subscription renewal): never moved to another. */
  readonly pinned: boolean;
  connection: Connection | null;
  finish(error: Error | null, result?: unknown): void;
}

interface Early {
  closed: boolean;
  error: Error | undefined;
  note(error?: unknown): void;
}

class Connection {
  readonly inflight = new Set<Pending>();
  /**
   * Requests and notifications waiting for the socket to drain: while the daemon reads
   * slower than we call, they wait here rather than in the socket's own buffer, so that
   * one that times out or is aborted before its turn is dropped (never sent, and let go
   * at once), and what is held stays bounded by the calls still pending. A Set keeps the
   * calls' order.
   */
  readonly queue = new Set<Pending>();
  closed = false;
  /** A reply arrived on it: the daemon really serves this connection. */
  answered = false;
  /** Why the daemon is dropping us (an error reply with id null, e.g. too_large). */
  fatal: Error | undefined;
  error: Error | undefined;

  constructor(
    readonly socket: Socket,
    readonly decoder: Decoder,
  ) {}
}

export interface MakaClient {
  on<E extends EventName>(event: E, listener: Listener<E>): this;
  once<E extends EventName>(event: E, listener: Listener<E>): this;
  off<E extends EventName>(event: E, listener: Listener<E>): this;
  addListener<E extends EventName>(event: E, listener: Listener<E>): this;
  removeListener<E extends EventName>(event: E, listener: Listener<E>): this;
  emit<E extends EventName>(event: E, ...args: ClientEvents[E]): boolean;
}

/**
 * A client of makad. Connects lazily on the first call, reconnects with exponential
 * backoff after the daemon restarts, and renews `subscribe`s on the new connection.
 * Like any open socket, a connected client keeps the Node process alive until `close()`.
 */
export class MakaClient extends EventEmitter {
  readonly socketPath: string;
  readonly framing: Framing;
  readonly timeoutMs: number;
  readonly reconnect: Readonly<ReconnectOptions>;
  /** One typed function per method: `await client.m.status()`. */
  readonly m: MethodProxy;

  private readonly maxMessageBytes: number;
  /** The daemon's caps as far as known: its byte cap is learned from a refusal (append-parts.ts). */
  private readonly limits: Limits = { ...LIMITS };
  /** The uid the server must run as; null: any. */
  private readonly expectedUid: number | null;
  private readonly pending = new Map<number, Pending>();
  /** Params of each active `subscribe`, keyed by workspace, renewed after a reconnect. */
  private readonly subscriptions = new Map<string, ParamsOf<"subscribe">>();
  private nextId = 1;
  private connection: Connection | null = null;
  private connecting: Promise<Connection> | null = null;
  private everConnected = false;
  /** Connections in a row that closed before any reply: a daemon that drops us at once. */
  private strikes = 0;
  private closed = false;
  /** The calls waiting on each AbortSignal, behind one listener per signal. */
  private readonly abortWatches = new WeakMap<AbortSignal, { callbacks: Set<() => void>; listener: () => void }>();
  /** What befell a socket between connecting and being adopted (its file is checked meanwhile). */
  private readonly early = new WeakMap<Socket, Early>();
  /** Resolvers of backoff sleeps, so close() ends them at once. */
  private readonly wakers = new Set<() => void>();
  /** `connect()` calls waiting for a connection. */
  private connectWaiters = 0;
  /** Why the latest connect attempt failed, until one succeeds. */
  private lastConnectError: DaemonUnavailableError | undefined;

  constructor(options: ClientOptions = {}) {
    super();
    this.socketPath = options.socketPath ?? defaultSocketPath();
    this.framing = options.framing ?? "ndjson";
    if (this.framing !== "ndjson" && this.framing !== "lsp") throw new TypeError(`unknown framing ${String(this.framing)}`);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.reconnect = options.reconnect === false
      ? { retries: 0, baseMs: 0, maxMs: 0 }
      : { ...DEFAULT_RECONNECT, ...options.reconnect };
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.expectedUid = expectedServerUid(options.serverUid);
    const m: Record<string, unknown> = {};
    for (const name of METHOD_NAMES) {
      m[name] = (params?: Record<string, unknown>, callOptions?: CallOptions) => this.callRaw(name, params, callOptions);
    }
    this.m = Object.freeze(m) as unknown as MethodProxy;
  }

  /** Call a method of the document with its typed params; resolves to its typed result. */
  call<M extends MethodName>(method: M, ...args: CallArgs<M>): Promise<ResultOf<M>> {
    const [params, options] = args as [Record<string, unknown> | undefined, CallOptions | undefined];
    return this.callRaw(method, params, options) as Promise<ResultOf<M>>;
  }

  /** Call any method by name, untyped (methods newer than these types, or deliberate misuse). */
  callRaw(method: string, params?: unknown, options: CallOptions = {}): Promise<unknown> {
    if (method === APPEND_METHOD && typeof params === "object" && params !== null && !Array.isArray(params)) {
      // More events than one message may carry go in parts (append-parts.ts).
      return appendInParts((part) => this.request(method, part, options, null), params as Record<string, unknown>, this.limits);
    }
    return this.request(method, params, options, null);
  }

  /**
   * Send a JSON-RPC notification (no reply). It waits its turn behind the calls made
   * before it, like a call; resolves once it is written. A timeout or an abort before
   * then drops it unsent; a connection lost before then sends it on the next one.
   */
  async notify(method: string, params?: unknown, options: CallOptions = {}): Promise<void> {
    await this.submit(method, params, options, null, false);
  }

  /** A request sent on `via` (a connection being set up), else on the client's connection. */
  private request(method: string, params: unknown, options: CallOptions, via: Connection | null): Promise<unknown> {
    return this.submit(method, params, options, via, true);
  }

  /** Queue a request (settled by its reply) or a notification (settled once written). */
  private submit(
    method: string,
    params: unknown,
    options: CallOptions,
    via: Connection | null,
    expectsReply: boolean,
  ): Promise<unknown> {
    if (this.closed) return Promise.reject(new ClientClosedError());
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(new AbortError(method, signal.reason));
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;

    return new Promise<unknown>((resolve, reject) => {
      const id = this.nextId++;
      const message: Record<string, unknown> = expectsReply ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", method };
      if (params !== undefined) message["params"] = params;
      let timer: NodeJS.Timeout | undefined;
      let unwatch: (() => void) | undefined;
      const pending: Pending = {
        id,
        method,
        message,
        expectsReply,
        settled: false,
        written: false,
        handed: false,
        pinned: via !== null,
        connection: null,
        finish: (error, result) => {
          if (pending.settled) return;
          pending.settled = true;
          this.pending.delete(id);
          if (!this.wanted()) this.wakeSleepers();
          pending.connection?.inflight.delete(pending);
          pending.connection?.queue.delete(pending);
          if (timer !== undefined) clearTimeout(timer);
          unwatch?.();
          if (error) reject(error);
          else {
            if (expectsReply) this.trackSubscription(method, params);
            resolve(result);
          }
        },
      };
      this.pending.set(id, pending);
      if (timeoutMs > 0 && Number.isFinite(timeoutMs)) {
        timer = setTimeout(() => pending.finish(this.timeoutError(pending, timeoutMs)), timeoutMs);
      }
      if (signal) unwatch = this.watchAbort(signal, () => pending.finish(new AbortError(method, signal.reason)));
      if (via) {
        this.send(via, pending);
        return;
      }
      this.ensureConnected().then(
        (connection) => this.send(connection, pending),
        (error: Error) => pending.finish(error),
      );
    });
  }

  /** Why `pending` timed out: no reply, or (not sent yet) still connecting or waiting its turn. */
  private timeoutError(pending: Pending, timeoutMs: number): TimeoutError {
    let unsent: string | undefined;
    if (!pending.written) {
      if (pending.connection !== null) unsent = "makad has not read what was sent before it yet";
      else if (this.lastConnectError !== undefined) unsent = this.lastConnectError.message;
      else unsent = `still connecting to makad on ${this.socketPath}`;
    }
    return new TimeoutError(pending.method, timeoutMs, !pending.expectsReply, unsent);
  }

  /**
   * Whether anybody still needs a connection: a pending call, a subscription to renew, or
   * a `connect()` waiting. When nobody does, the connect loop stops dialling, so that a
   * client whose calls all timed out or were aborted while the daemon was down does not
   * keep the process alive through its retries.
   */
  private wanted(): boolean {
    return this.pending.size > 0 || this.subscriptions.size > 0 || this.connectWaiters > 0;
  }

  private wakeSleepers(): void {
    for (const wake of [...this.wakers]) wake();
  }

  /**
   * Run `onAbort` when `signal` fires; returns the way to stop watching. One listener per
   * signal, whatever the number of calls sharing it: a signal that lives as long as the app
   * can serve any number of concurrent calls without Node's listener-leak warning.
   */
  private watchAbort(signal: AbortSignal, onAbort: () => void): () => void {
    let watch = this.abortWatches.get(signal);
    if (!watch) {
      const callbacks = new Set<() => void>();
      const listener = () => {
        this.abortWatches.delete(signal);
        for (const callback of [...callbacks]) callback();
      };
      watch = { callbacks, listener };
      this.abortWatches.set(signal, watch);
      signal.addEventListener("abort", listener, { once: true });
    }
    const { callbacks, listener } = watch;
    callbacks.add(onAbort);
    return () => {
      callbacks.delete(onAbort);
      if (callbacks.size > 0 || this.abortWatches.get(signal) !== watch) return;
      this.abortWatches.delete(signal);
      signal.removeEventListener("abort", listener);
    };
  }

  /** Connect now rather than on the first call. */
  async connect(): Promise<void> {
    if (this.closed) throw new ClientClosedError();
    this.connectWaiters++;
    try {
      await this.ensureConnected();
    } finally {
      this.connectWaiters--;
    }
  }

  /** Whether a connection is currently open. */
  get connected(): boolean {
    return this.connection !== null && !this.connection.closed;
  }

  /** Close the connection at once (unsent requests are dropped); pending calls fail with ClientClosedError. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const pending of [...this.pending.values()]) pending.finish(new ClientClosedError());
    this.subscriptions.clear();
    this.wakeSleepers();
    const connection = this.connection;
    this.connection = null;
    if (connection && !connection.closed) {
      // Every call has been rejected: nothing buffered for the daemon is still wanted, and
      // waiting for it to drain would wait forever on a daemon that stopped reading.
      await new Promise<void>((resolve) => {
        connection.socket.once("close", () => resolve());
        connection.socket.destroy();
      });
    }
  }

  private trackSubscription(method: string, params: unknown): void {
    if (method !== "subscribe" && method !== "unsubscribe") return;
    if (typeof params !== "object" || params === null) return;
    const record = params as Record<string, unknown>;
    const key = typeof record["workspace"] === "string" ? record["workspace"] : JSON.stringify(record);
    // Only a subscribe the daemon accepted is tracked: its params are a SubscribeParams.
    if (method === "subscribe") this.subscriptions.set(key, record as ParamsOf<"subscribe">);
    else this.subscriptions.delete(key);
  }

  private send(connection: Connection, pending: Pending): void {
    if (pending.settled) return;
    if (connection.closed && pending.pinned) {
      pending.finish(new ConnectionLostError(pending.method, { cause: connection.error }));
      return;
    }
    if (connection.closed) {
      // Lost between connect and send: this request never left, so try again.
      this.ensureConnected().then(
        (next) => this.send(next, pending),
        (error: Error) => pending.finish(error),
      );
      return;
    }
    pending.connection = connection;
    connection.inflight.add(pending);
    connection.queue.add(pending);
    this.flush(connection);
  }

  /** Hand queued requests to the socket until its buffer is full ('drain' resumes). */
  private flush(connection: Connection): void {
    const { socket, queue } = connection;
    for (const pending of queue) {
      if (connection.closed || socket.writableNeedDrain) return;
      queue.delete(pending);
      pending.handed = true;
      socket.write(encodeMessage(pending.message, this.framing), (error) => {
        if (error) return;
        pending.written = true;
        if (!pending.expectsReply) pending.finish(null);
      });
    }
  }

  private ensureConnected(): Promise<Connection> {
    if (this.connection && !this.connection.closed) return Promise.resolve(this.connection);
    if (!this.connecting) {
      this.connecting = this.connectWithRetry().finally(() => {
        this.connecting = null;
      });
    }
    return this.connecting;
  }

  private backoff(attempt: number): number {
    return Math.min(this.reconnect.maxMs, this.reconnect.baseMs * 2 ** attempt);
  }

  private async connectWithRetry(): Promise<Connection> {
    for (let attempt = 0; ; attempt++) {
      if (this.closed) throw new ClientClosedError();
      if (attempt > 0 && !this.wanted() && this.lastConnectError !== undefined) throw this.lastConnectError;
      try {
        const socket = await this.openSocket();
        if (this.closed) {
          socket.destroy();
          throw new ClientClosedError();
        }
        return await this.adopt(socket);
      } catch (caught) {
        const error = caught instanceof Error ? caught : new Error(String(caught));
        if (error instanceof MakaError) throw error;
        const code = (error as NodeJS.ErrnoException).code ?? error.message;
        this.lastConnectError = new DaemonUnavailableError(this.socketPath, code, { cause: error });
        if (attempt >= this.reconnect.retries) throw this.lastConnectError;
        const delayMs = this.backoff(attempt);
        this.announce("reconnecting", { attempt: attempt + 1, delayMs, error });
        await this.sleep(delayMs);
      }
    }
  }

  private sleep(ms: number): Promise<void> {
    if (!this.wanted()) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.wakers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.wakers.add(wake);
    });
  }

  /**
   * Emit without letting a throwing listener corrupt the client's state: the exception
   * is rethrown on its own tick, where it surfaces as Node reports any uncaught error.
   */
  private announce<E extends EventName>(event: E, ...args: ClientEvents[E]): void {
    try {
      this.emit(event, ...args);
    } catch (error) {
      process.nextTick(() => {
        throw error;
      });
    }
  }

  /** Connect, checking the socket file before and after (server-check.ts). */
  private async openSocket(): Promise<Socket> {
    if (Buffer.byteLength(this.socketPath) > MAX_SOCKET_PATH_BYTES) {
      // Node would cut the path to fit and dial another one; no daemon can listen there.
      throw new DaemonUnavailableError(this.socketPath, "ENAMETOOLONG");
    }
    const expected = this.expectedUid;
    if (expected === null) return this.dial();
    const before = await checkSocketFile(this.socketPath, expected);
    const socket = await this.dial();
    try {
      const after = await checkSocketFile(this.socketPath, expected);
      if (after === null || (before !== null && (after.dev !== before.dev || after.ino !== before.ino))) {
        // Replaced meanwhile (a restart): connected to which one is unknown, so try again.
        throw new Error("the socket file changed while connecting");
      }
    } catch (error) {
      socket.destroy();
      throw error;
    }
    return socket;
  }

  private dial(): Promise<Socket> {
    const socket = createConnection({ path: this.socketPath });
    const early: Early = {
      closed: false,
      error: undefined,
      note: (error?: unknown) => {
        if (error instanceof Error) early.error = error;
        else early.closed = true;
      },
    };
    return new Promise((resolve, reject) => {
      const onError = (error: Error) => {
        socket.destroy();
        reject(error);
      };
      socket.once("error", onError);
      socket.once("connect", () => {
        socket.off("error", onError);
        // Until adopt() takes over (the socket file is checked meanwhile): an error must
        // not go unheard, and a close must not go unseen.
        this.early.set(socket, early);
        socket.on("error", early.note);
        socket.once("close", early.note);
        resolve(socket);
      });
    });
  }

  private async adopt(socket: Socket): Promise<Connection> {
    const early = this.early.get(socket);
    this.early.delete(socket);
    if (early) socket.off("error", early.note).off("close", early.note);
    if (early?.closed || socket.destroyed) {
      // The daemon hung up before we could use the connection (it was stopping, or was
      // killed with us in its backlog): a failed attempt, retried like a refused connect.
      socket.destroy();
      const code = (early?.error as NodeJS.ErrnoException | undefined)?.code ?? "ECONNRESET";
      throw Object.assign(new Error("the daemon closed the connection at once", { cause: early?.error }), { code });
    }
    const connection = new Connection(socket, createDecoder(this.framing, this.maxMessageBytes));
    socket.on("data", (chunk: Buffer) => this.receive(connection, chunk));
    socket.on("error", (error) => {
      connection.error = error;
    });
    socket.on("close", () => this.lost(connection));
    socket.on("drain", () => this.flush(connection));
    if (early?.error) connection.error = early.error;
    this.connection = connection;
    this.lastConnectError = undefined;
    const reconnect = this.everConnected;
    this.everConnected = true;
    if (reconnect && this.subscriptions.size > 0) await this.renewSubscriptions(connection);
    this.announce("connect", { reconnect });
    return connection;
  }

  private async renewSubscriptions(connection: Connection): Promise<void> {
    const renewals = [...this.subscriptions.values()].map(async (params) => {
      try {
        await this.request("subscribe", params, {}, connection);
      } catch (caught) {
        // The connection went down under the renewal (the daemon was still dying, or
        // stopped again): the reconnect its loss starts renews the subscription.
        if (this.closed || connection.closed) return;
        const error = caught instanceof Error ? caught : new Error(String(caught));
        const key = typeof params["workspace"] === "string" ? params["workspace"] : JSON.stringify(params);
        this.subscriptions.delete(key);
        this.announce("subscription_lost", { params, error });
      }
    });
    await Promise.all(renewals);
  }

  private receive(connection: Connection, chunk: Buffer): void {
    let messages: unknown[];
    let fault: Error | undefined;
    try {
      messages = connection.decoder.push(chunk);
    } catch (error) {
      // Replies that came whole before the fault are still answers to their calls.
      messages = error instanceof ProtocolError ? error.decoded : [];
      fault = error instanceof Error ? error : new ProtocolError(String(error));
    }
    for (const message of messages) {
      for (const one of Array.isArray(message) ? message : [message]) this.dispatch(connection, one);
    }
    if (fault) {
      connection.fatal = fault;
      connection.socket.destroy();
    }
  }

  private dispatch(connection: Connection, message: unknown): void {
    if (typeof message !== "object" || message === null) return;
    const record = message as Record<string, unknown>;
    connection.answered = true;
    this.strikes = 0;
    const id = record["id"];
    if (typeof record["method"] === "string") {
      // The daemon sends no requests; a message with a method and no id is a notification.
      if (id === undefined) this.notification(record["method"], record["params"]);
      return;
    }
    if (id === null || id === undefined) {
      if (record["error"] !== undefined) connection.fatal = remoteErrorFrom(record["error"]);
      return;
    }
    const pending = typeof id === "number" ? this.pending.get(id) : undefined;
    if (!pending?.expectsReply) return;
    if (record["error"] !== undefined) pending.finish(remoteErrorFrom(record["error"], pending.method));
    else pending.finish(null, record["result"]);
  }

  private notification(method: string, params: unknown): void {
    this.announce("notification", method, params);
    if ((NOTIFICATION_NAMES as readonly string[]).includes(method)) {
      // The params as the daemon sent them, typed by the document's name for them.
      this.announce(method as "memory_changed", params as ChangeNotification);
    }
  }

  private lost(connection: Connection): void {
    connection.closed = true;
    if (this.connection === connection) this.connection = null;
    const unsent: Pending[] = [];
    for (const pending of [...connection.inflight]) {
      if (pending.written || pending.pinned || (pending.handed && connection.fatal !== undefined)) {
        pending.finish(connection.fatal ?? new ConnectionLostError(pending.method, { cause: connection.error }));
      } else {
        pending.connection = null;
        pending.handed = false;
        unsent.push(pending);
      }
    }
    connection.inflight.clear();
    connection.queue.clear();
    if (this.closed) return;
    this.strikes = connection.answered ? 0 : this.strikes + 1;
    this.announce("disconnect", { error: connection.fatal ?? connection.error });
    if (unsent.length === 0 && this.subscriptions.size === 0) return;
    if (this.strikes > this.reconnect.retries) {
      for (const pending of unsent) {
        pending.finish(connection.fatal ?? new ConnectionLostError(pending.method, { cause: connection.error }));
      }
      this.dropSubscriptions(connection.fatal ?? new ConnectionLostError("subscribe", { cause: connection.error }));
      return;
    }
    const delay = this.strikes > 0 ? this.sleep(this.backoff(this.strikes - 1)) : Promise.resolve();
    delay
      .then(() => this.ensureConnected())
      .then(
        (next) => {
          for (const pending of unsent) this.send(next, pending);
        },
        (error: Error) => {
          for (const pending of unsent) pending.finish(error);
          this.dropSubscriptions(error);
        },
      );
  }

  private dropSubscriptions(error: Error): void {
    if (this.closed) return;
    for (const params of this.subscriptions.values()) this.announce("subscription_lost", { params, error });
    this.subscriptions.clear();
  }
}
