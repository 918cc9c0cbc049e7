/**
 * The client side of the socket protocol: connect, hello, request. The TypeScript twin of localidx/interface/client.py.
 *
 * - `Connection` is one Unix-socket connection speaking newline-delimited JSON. Requests may be pipelined; the
 *   daemon answers them in order, one response per request, and responses are matched to requests by id. A
 *   request that times out closes the connection, as a late answer would be out of step.
 * - `DaemonClient` finds the socket by asking the CLI (`localidx daemon status --json`), starts a missing daemon
 *   when asked to (`localidx daemon start`), and shakes hands with `daemon/hello`. A daemon of another protocol or
 *   package version (error 1003, or a hello that names other versions) is restarted once (`daemon stop`, then
 *   `daemon start`) and the handshake retried (dmypy's rule). A request whose connection was lost, or that met a
 *   daemon shutting down, reconnects once and is sent again: that is how it survives a daemon restart.
 * - The hello raises the connection's response limit (`max_frame_bytes`) so that any response arrives whole. A daemon
 *   that answers OVERLOADED (it serves as many connections as it may) is asked again until the connect timeout.
 * - `watch(listener)` subscribes (`daemon/subscribe`) on every connection the client makes and hands each
 *   `index/progress` status to the listener, and the end of each connection (with the daemon's reason when it
 *   stopped by itself): the status bar paints from this instead of polling, so it never keeps the daemon busy.
 *
 * No `vscode` import: the integration test runs this against a real daemon under plain node.
 */

import * as net from "node:net";

import { DaemonStatus } from "./daemon";
import { CliError, DaemonTimeoutError, DaemonUnavailableError, ResponseError, isVersionMismatch } from "./errors";
import {
  CLIENT_MAX_FRAME_BYTES,
  ErrorCode,
  ErrorObject,
  HelloParams,
  HelloResult,
  MAX_FRAME_BYTES,
  Method,
  Notification,
  ParamsOf,
  PROTOCOL_VERSION,
  ProgressStatus,
  ResultOf,
} from "./protocol";

export const CLIENT_NAME = "localidx-vscode";
/** For connecting and the hello; generous, as a daemon busy with its first run can be slow to answer. */
export const CONNECT_TIMEOUT_MS = 10_000;
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

/** The daemon serves as many connections as it may (OVERLOADED): try again later. */
export class DaemonBusyError extends DaemonUnavailableError {
  constructor(message: string) {
    super(message);
    this.name = "DaemonBusyError";
  }
}

/** How long to wait before asking an overloaded daemon again (doubling up to this). */
const BUSY_RETRY_MAX_MS = 250;

/** No daemon runs for the work tree and the caller did not ask to start one. */
export class DaemonDownError extends DaemonUnavailableError {
  constructor(message: string) {
    super(message);
    this.name = "DaemonDownError";
  }
}

interface Pending {
  method: string;
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout | null;
}

/** One connection to a daemon's socket. */
export class Connection {
  private readonly socket: net.Socket;
  private readonly pending = new Map<number, Pending>();
  private chunks: Buffer[] = [];
  private buffered = 0;
  private nextId = 1;
  private closedWith: Error | null = null;
  private readonly closeListeners: ((reason: Error) => void)[] = [];
  private readonly notificationListeners: ((notification: Notification) => void)[] = [];
  /** The largest frame accepted from the daemon: MAX_FRAME_BYTES until the hello raises it. */
  maxFrameBytes = MAX_FRAME_BYTES;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on("data", (data: Buffer) => this.receive(data));
    socket.on("error", (err: NodeJS.ErrnoException) =>
      this.fail(new DaemonUnavailableError(`lost the connection to the daemon: ${err.code ?? err.message}`)),
    );
    socket.on("close", () => this.fail(new DaemonUnavailableError("the daemon closed the connection")));
  }

  /**
   * Connect to the socket at `socketPath`; rejects with DaemonUnavailableError when nothing listens there. A full
   * listen queue (EAGAIN: the daemon is there, busy accepting a burst of clients) is retried until `timeoutMs`.
   */
  static async open(socketPath: string, timeoutMs = CONNECT_TIMEOUT_MS): Promise<Connection> {
    const deadline = Date.now() + timeoutMs;
    let delay = 2;
    for (;;) {
      try {
        return await Connection.openOnce(socketPath, Math.max(1, deadline - Date.now()));
      } catch (err) {
        if ((err as { code?: string }).code !== "EAGAIN" || Date.now() + delay > deadline) {
          if ((err as { code?: string }).code === "EAGAIN") {
            throw new DaemonTimeoutError(`the daemon at ${socketPath} did not accept the connection in ${timeoutMs} ms (its listen queue stayed full)`);
          }
          throw err;
        }
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 100);
    }
  }

  private static openOnce(socketPath: string, timeoutMs: number): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection({ path: socketPath });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new DaemonTimeoutError(`the daemon at ${socketPath} did not accept the connection in ${timeoutMs} ms`));
      }, timeoutMs);
      socket.once("connect", () => {
        clearTimeout(timer);
        socket.removeAllListeners("error");
        resolve(new Connection(socket));
      });
      socket.once("error", (err: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        socket.destroy();
        const failure = new DaemonUnavailableError(`no daemon listens on ${socketPath} (${err.code ?? err.message})`);
        (failure as { code?: string }).code = err.code;
        reject(failure);
      });
    });
  }

  get closed(): boolean {
    return this.closedWith !== null;
  }

  /** Called once, when the connection closes for whatever reason. */
  onClose(listener: (reason: Error) => void): void {
    this.closeListeners.push(listener);
  }

  /** Called for each notification (a frame without an id) the daemon sends on this connection. */
  onNotification(listener: (notification: Notification) => void): void {
    this.notificationListeners.push(listener);
  }

  /**
   * Send one request and resolve with its result. An error response rejects with ResponseError; a lost
   * connection with DaemonUnavailableError; no answer within `timeoutMs` (null: wait as long as it takes) with
   * DaemonTimeoutError, closing the connection.
   */
  request<M extends Method>(method: M, params: ParamsOf[M], timeoutMs: number | null = DEFAULT_REQUEST_TIMEOUT_MS) {
    return this.send(method, params, timeoutMs) as Promise<ResultOf[M]>;
  }

  /** `request` without the method table's types (for methods this extension does not know). */
  send(method: string, params: object, timeoutMs: number | null = DEFAULT_REQUEST_TIMEOUT_MS): Promise<unknown> {
    if (this.closedWith) {
      return Promise.reject(this.closedWith);
    }
    const id = this.nextId++;
    const frame = Buffer.from(JSON.stringify({ id, method, params }) + "\n", "utf8");
    if (frame.length > MAX_FRAME_BYTES) {
      return Promise.reject(new RangeError(`the ${method} request is over ${MAX_FRAME_BYTES} bytes`));
    }
    return new Promise((resolve, reject) => {
      const timer =
        timeoutMs === null
          ? null
          : setTimeout(() => {
              this.pending.delete(id);
              reject(new DaemonTimeoutError(`the daemon did not answer ${method} in ${timeoutMs / 1000} s`));
              this.fail(new DaemonUnavailableError(`closed after ${method} timed out`));
            }, timeoutMs);
      this.pending.set(id, { method, resolve, reject, timer });
      this.socket.write(frame);
    });
  }

  /** Close the connection (idempotent); requests still waiting reject with DaemonUnavailableError. */
  close(): void {
    this.fail(new DaemonUnavailableError("the connection to the daemon is closed"));
  }

  private receive(data: Buffer): void {
    let start = 0;
    let newline = data.indexOf(0x0a, start);
    while (newline !== -1) {
      this.chunks.push(data.subarray(start, newline));
      const line = Buffer.concat(this.chunks).toString("utf8");
      this.chunks = [];
      this.buffered = 0;
      if (line.trim()) {
        this.dispatch(line);
      }
      if (this.closedWith) {
        return;
      }
      start = newline + 1;
      newline = data.indexOf(0x0a, start);
    }
    if (start < data.length) {
      this.chunks.push(data.subarray(start));
      this.buffered += data.length - start;
      if (this.buffered >= this.maxFrameBytes) {
        this.fail(new DaemonUnavailableError(`the daemon sent a frame over ${this.maxFrameBytes} bytes`));
      }
    }
  }

  private dispatch(line: string): void {
    let message: { id?: unknown; result?: unknown; error?: ErrorObject };
    try {
      message = JSON.parse(line);
    } catch {
      this.fail(new DaemonUnavailableError("the daemon sent a frame that is not JSON"));
      return;
    }
    if (message && typeof message === "object" && !("id" in message) && typeof (message as Notification).method === "string") {
      for (const listener of this.notificationListeners) {
        listener(message as unknown as Notification);
      }
      return;
    }
    if (message?.id === null && message.error?.code === ErrorCode.OVERLOADED) {
      this.fail(new DaemonBusyError(message.error.message));
      return;
    }
    const pending = typeof message?.id === "number" ? this.pending.get(message.id) : undefined;
    if (!pending || ("result" in message) === ("error" in message)) {
      // Not an answer to anything we asked: whoever is on the other end is no working daemon.
      const what = message && "error" in message ? `: ${message.error?.message}` : "";
      this.fail(new DaemonUnavailableError(`the daemon sent an unexpected frame (id ${String(message?.id)})${what}`));
      return;
    }
    this.pending.delete(message.id as number);
    if (pending.timer) {
      clearTimeout(pending.timer);
    }
    if (message.error) {
      pending.reject(new ResponseError(message.error));
    } else {
      pending.resolve(message.result);
    }
  }

  private fail(reason: Error): void {
    if (this.closedWith) {
      return;
    }
    this.closedWith = reason;
    this.socket.destroy();
    for (const pending of this.pending.values()) {
      if (pending.timer) {
        clearTimeout(pending.timer);
      }
      pending.reject(reason);
    }
    this.pending.clear();
    for (const listener of this.closeListeners) {
      listener(reason);
    }
  }
}

/** What `DaemonClient.watch` calls. */
export interface StatusWatcher {
  status(status: ProgressStatus): void;
  /** The connection ended; `stopping` is the daemon's reason when it stopped by itself. */
  closed(reason: Error, stopping?: string): void;
}

/** What the client needs from the CLI (daemon.ts's Cli; tests pass fakes). */
export interface DaemonControl {
  status(): Promise<DaemonStatus>;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** The installed localidx version: the package version the hello asks for. */
  version(): Promise<string>;
}

export interface ClientOptions {
  control: DaemonControl;
  clientName?: string;
  log?: (line: string) => void;
  connectTimeoutMs?: number;
}

export interface RequestOptions {
  /** Milliseconds; null waits as long as it takes. */
  timeoutMs?: number | null;
  /** Start the daemon when none runs (default true). */
  start?: boolean;
}

/** The work tree's daemon, connected on demand and reconnected after a restart. */
export class DaemonClient {
  /** The last successful hello (the daemon's versions, root, log path). */
  hello: HelloResult | null = null;
  private readonly control: DaemonControl;
  private readonly clientName: string;
  private readonly log: (line: string) => void;
  private readonly connectTimeoutMs: number;
  private connection: Connection | null = null;
  private connecting: Promise<Connection> | null = null;
  private disposed = false;
  private readonly watchers: StatusWatcher[] = [];
  private lastStatus: ProgressStatus | null = null;

  constructor(options: ClientOptions) {
    this.control = options.control;
    this.clientName = options.clientName ?? CLIENT_NAME;
    this.log = options.log ?? (() => undefined);
    this.connectTimeoutMs = options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
  }

  /** Whether a connection is open now (no I/O). */
  get connected(): boolean {
    return this.connection !== null && !this.connection.closed;
  }

  /** An open, greeted connection; with `start`, a missing daemon is started first. */
  async connect(start = true): Promise<Connection> {
    if (this.disposed) {
      throw new DaemonUnavailableError("the localidx client is disposed");
    }
    if (this.connection && !this.connection.closed) {
      return this.connection;
    }
    if (this.connecting) {
      try {
        return await this.connecting;
      } catch (err) {
        // A concurrent connect that was not allowed to start a daemon says nothing about this caller's.
        if (!(start && err instanceof DaemonDownError)) {
          throw err;
        }
      }
    }
    const attempt = this.handshake(start).finally(() => {
      if (this.connecting === attempt) {
        this.connecting = null;
      }
    });
    this.connecting = attempt;
    const connection = await attempt;
    this.connection = connection;
    connection.onClose((reason) => {
      if (this.connection === connection) {
        this.connection = null;
      }
      if (this.watchers.length) {
        const stopping = this.lastStatus?.stopping;
        this.lastStatus = null;
        for (const watcher of this.watchers) {
          watcher.closed(reason, stopping);
        }
      }
    });
    if (this.watchers.length) {
      void this.subscribe(connection);
    }
    return connection;
  }

  /**
   * Follow the daemon's status (`daemon/subscribe`) on every connection this client makes, from now on (and on the
   * current one). `status` gets the subscription's first status and every `index/progress` notification; `closed`
   * the end of each connection, with the daemon's reason when it stopped by itself (e.g. "idle for 3600 s").
   * Subscribing is not activity: it does not keep the daemon from releasing memory or idling out.
   */
  watch(watcher: StatusWatcher): { dispose(): void } {
    this.watchers.push(watcher);
    if (this.connection && !this.connection.closed) {
      void this.subscribe(this.connection);
    }
    return {
      dispose: () => {
        const at = this.watchers.indexOf(watcher);
        if (at >= 0) {
          this.watchers.splice(at, 1);
        }
      },
    };
  }

  /** Whether the current connection is subscribed (its statuses arrive by themselves). */
  get subscribed(): boolean {
    return this.connection !== null && !this.connection.closed && this.subscribedTo === this.connection;
  }

  private subscribedTo: Connection | null = null;

  private async subscribe(connection: Connection): Promise<void> {
    if (this.subscribedTo === connection) {
      return;
    }
    this.subscribedTo = connection;
    connection.onNotification((notification) => {
      if (notification.method === "index/progress") {
        this.emit(notification.params);
      }
    });
    try {
      const result = await connection.request("daemon/subscribe", {}, this.connectTimeoutMs);
      this.emit(result.status);
    } catch (err) {
      if (this.subscribedTo === connection) {
        this.subscribedTo = null;
      }
      this.log(`daemon/subscribe failed: ${(err as Error).message}`);
    }
  }

  private emit(status: ProgressStatus): void {
    this.lastStatus = status;
    for (const watcher of this.watchers) {
      watcher.status(status);
    }
  }

  /**
   * Send one request on the shared connection, connecting (and with `start`, starting the daemon) first.
   * A lost connection or a daemon shutting down is retried once on a fresh connection.
   */
  async request<M extends Method>(method: M, params: ParamsOf[M], options: RequestOptions = {}): Promise<ResultOf[M]> {
    const start = options.start ?? true;
    const timeoutMs = options.timeoutMs === undefined ? DEFAULT_REQUEST_TIMEOUT_MS : options.timeoutMs;
    for (let attempt = 0; ; attempt++) {
      const connection = await this.connect(start);
      try {
        return await connection.request(method, params, timeoutMs);
      } catch (err) {
        const retriable =
          (err instanceof DaemonUnavailableError && !(err instanceof DaemonTimeoutError)) ||
          (err instanceof ResponseError && err.code === ErrorCode.SHUTTING_DOWN);
        if (!retriable || attempt > 0 || method === "daemon/stop") {
          throw err;
        }
        this.log(`${method}: ${(err as Error).message}; reconnecting`);
        connection.close();
      }
    }
  }

  /** Stop the daemon and start a fresh one (`localidx daemon stop`, then `start`), then connect to it. */
  async restart(): Promise<HelloResult> {
    this.dropConnection();
    await this.control.stop();
    await this.control.start();
    await this.connect(false);
    return this.hello as HelloResult;
  }

  /** Close the connection; the next request reconnects. */
  dropConnection(): void {
    this.connection?.close();
    this.connection = null;
  }

  dispose(): void {
    this.disposed = true;
    this.dropConnection();
  }

  private async handshake(start: boolean): Promise<Connection> {
    const deadline = Date.now() + this.connectTimeoutMs;
    let delay = 10;
    for (;;) {
      try {
        return await this.handshakeOnce(start);
      } catch (err) {
        if (!(err instanceof DaemonBusyError) || Date.now() + delay > deadline) {
          throw err;
        }
        this.log(`${err.message}; asking again`);
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, BUSY_RETRY_MAX_MS);
    }
  }

  private async handshakeOnce(start: boolean): Promise<Connection> {
    let started = false;
    let restarted = false;
    let version: string | undefined;
    try {
      version = await this.control.version();
    } catch (err) {
      if (!(err instanceof CliError)) {
        throw err;
      }
      this.log(`cannot read the installed version (${err.message}); asking for the protocol version only`);
    }
    for (;;) {
      const status = await this.control.status();
      let connection: Connection;
      try {
        if (!status.running) {
          throw new DaemonDownError(
            status.state === "unreachable"
              ? `the localidx daemon (pid ${status.pid}) does not answer: ${status.problem ?? "unreachable"}`
              : "no localidx daemon runs for this work tree",
          );
        }
        connection = await Connection.open(status.socket, this.connectTimeoutMs);
      } catch (err) {
        if (!(err instanceof DaemonUnavailableError) || err instanceof DaemonTimeoutError || !start || started) {
          throw err;
        }
        this.log(`starting the daemon (${err.message})`);
        await this.control.start();
        started = true;
        continue;
      }
      try {
        this.hello = await this.greet(connection, version);
        this.log(`connected to localidx ${this.hello.package_version} (pid ${this.hello.pid}) on ${status.socket}`);
        return connection;
      } catch (err) {
        connection.close();
        // An older daemon refuses a hello parameter it does not know (max_frame_bytes): another version too.
        const olderDaemon = err instanceof ResponseError && err.code === ErrorCode.INVALID_PARAMS;
        if (!(isVersionMismatch(err) || olderDaemon) || restarted) {
          throw err;
        }
        this.log(`restarting the daemon: ${(err as Error).message}`);
        await this.control.stop();
        await this.control.start();
        restarted = true;
      }
    }
  }

  private async greet(connection: Connection, version: string | undefined): Promise<HelloResult> {
    const params: HelloParams = { protocol_version: PROTOCOL_VERSION, client: this.clientName };
    if (version) {
      params.package_version = version;
    }
    params.max_frame_bytes = CLIENT_MAX_FRAME_BYTES;
    const hello = await connection.request("daemon/hello", params, this.connectTimeoutMs);
    connection.maxFrameBytes = Math.max(MAX_FRAME_BYTES, hello.max_frame_bytes ?? MAX_FRAME_BYTES);
    // The daemon answers 1003 itself; a hello that names other versions means the same ("restart me").
    if (hello.protocol_version !== PROTOCOL_VERSION || (version && hello.package_version !== version)) {
      throw new ResponseError({
        code: ErrorCode.VERSION_MISMATCH,
        message:
          `the daemon speaks protocol ${hello.protocol_version} (localidx ${hello.package_version}), ` +
          `the extension protocol ${PROTOCOL_VERSION}${version ? ` (localidx ${version})` : ""}`,
        data: { protocol_version: hello.protocol_version, package_version: hello.package_version },
      });
    }
    return hello;
  }
}
