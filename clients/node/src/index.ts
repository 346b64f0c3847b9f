// makad-client: a typed promise client for makad (JSON-RPC 2.0 over a Unix socket).

export {
  MakaClient,
  CHANGE_NOTIFICATIONS,
  type CallArgs,
  type CallOptions,
  type ChangeNotification,
  type ChangeNotificationName,
  type ClientEvents,
  type ClientOptions,
  type MethodProxy,
  type NotificationEvents,
  type ReconnectOptions,
} from "./client.js";
export {
  AbortError,
  ClientClosedError,
  ConnectionLostError,
  DaemonUnavailableError,
  MakaError,
  ProtocolError,
  RemoteError,
  TimeoutError,
  UntrustedServerError,
  type RemoteErrorData,
} from "./errors.js";
export { AppendPartlyDoneError, appendPieces, countValues, planAppend, type Limits } from "./append-parts.js";
export { createDecoder, encodeMessage, type Decoder, type Framing } from "./framing.js";
export { remoteErrorFrom } from "./remote.js";
export { defaultSocketPath, type SocketPathContext } from "./socket-path.js";
export { SERVER_UID_ENV, expectedServerUid, type ServerUid } from "./server-check.js";
export { StatePoller } from "./state-poll.js";
export * from "./generated.js";
