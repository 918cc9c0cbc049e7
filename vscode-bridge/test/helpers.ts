/**
 * Test doubles for the unit tests: a fake daemon (a real Unix socket speaking the real framing, with scripted
 * answers), a fake DaemonControl, and a fake `localidx` executable (a node script) for tests that go through the
 * CLI wrapper. The integration test uses none of these: it runs the real daemon.
 */

import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";

import { DaemonControl } from "../src/client";
import { DaemonStatus } from "../src/daemon";
import { ErrorObject } from "../src/protocol";

export interface Received {
  id: number | string;
  method: string;
  params: Record<string, unknown>;
}

/** An answer: a result, or `{error}`; a function computes it per request. */
export type Answer = { result: unknown } | { error: ErrorObject } | { drop: true } | { never: true };
export type Handler = (params: Record<string, unknown>, request: Received) => Answer | Promise<Answer>;

export const HELLO = {
  protocol_version: 2,
  package_version: "0.1.0",
  pid: 4242,
  root: "/repo",
  index: "/repo/.git/localidx",
  capabilities: ["daemon/hello", "daemon/stop", "daemon/subscribe", "index/reindex", "index/status", "search/query", "context/build"],
  max_frame_bytes: 256 * 1024 * 1024,
  daemon: {
    pid: 4242,
    socket: "",
    log: "/repo/.git/localidx/daemon.log",
    writer: { state: "idle", queued: 0, progress: {}, runs: 1, pending_vectors: 0, last_error: null },
  },
};

export function indexStatus(state: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    state,
    root: "/repo",
    index: "/repo/.git/localidx",
    model: "fake-bow-64",
    files: state === "EMPTY" ? 0 : 2,
    files_skipped: 0,
    chunks: state === "EMPTY" ? 0 : 4,
    chunks_with_vectors: state === "EMPTY" ? 0 : 4,
    changed_files: [],
    deleted_files: [],
    embedding_progress: state === "EMPTY" ? 0 : 1,
    errors: [],
    ...extra,
  };
}

/** The status a subscription reports (`daemon/subscribe`'s `status`, `index/progress`'s params). */
export function progress(state: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const empty = state === "EMPTY";
  return {
    seq: 1,
    state,
    files: empty ? 0 : 2,
    chunks: empty ? 0 : 4,
    chunks_with_vectors: empty ? 0 : 4,
    embedding_progress: empty ? 0 : 1,
    percent: null,
    writer: { state: "idle", queued: 0, progress: {}, runs: 1, pending_vectors: 0, last_error: null },
    memory: { released: false, rss_mb: 200 },
    ...extra,
  };
}

/** A daemon double on a real Unix socket: newline-delimited JSON, answers from `handlers`, records requests. */
export class FakeDaemon {
  readonly dir: string;
  readonly socketPath: string;
  readonly received: Received[] = [];
  handlers: Record<string, Handler>;
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  private readonly subscribers = new Set<net.Socket>();

  constructor(handlers: Record<string, Handler> = {}) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), "lxv-"));
    this.socketPath = path.join(this.dir, "d.sock");
    this.handlers = {
      "daemon/hello": () => ({ result: { ...HELLO, daemon: { ...HELLO.daemon, socket: this.socketPath } } }),
      "index/status": () => ({ result: indexStatus("READY") }),
      "daemon/subscribe": () => ({ result: { subscribed: true, interval_ms: 500, status: progress("READY") } }),
      ...handlers,
    };
  }

  /** Send an `index/progress` notification to every connection that subscribed. */
  notify(params: Record<string, unknown>): void {
    for (const socket of this.subscribers) {
      socket.write(JSON.stringify({ method: "index/progress", params }) + "\n");
    }
  }

  /** How many connections subscribed and are still open. */
  get subscriberCount(): number {
    return this.subscribers.size;
  }

  methods(): string[] {
    return this.received.map((r) => r.method);
  }

  listen(): Promise<void> {
    this.server = net.createServer((socket) => {
      this.sockets.add(socket);
      socket.on("close", () => {
        this.sockets.delete(socket);
        this.subscribers.delete(socket);
      });
      let buffered = "";
      let queue = Promise.resolve();
      socket.on("data", (data) => {
        buffered += data.toString("utf8");
        let newline = buffered.indexOf("\n");
        while (newline !== -1) {
          const line = buffered.slice(0, newline);
          buffered = buffered.slice(newline + 1);
          newline = buffered.indexOf("\n");
          if (line.trim()) {
            // Answer in order, one at a time, as the daemon does.
            queue = queue.then(() => this.answer(socket, line));
          }
        }
      });
      socket.on("error", () => undefined);
    });
    return new Promise((resolve) => this.server!.listen(this.socketPath, resolve));
  }

  /** Drop every open connection (as a daemon that exits does). */
  dropConnections(): void {
    for (const socket of this.sockets) {
      socket.destroy();
    }
  }

  async close(): Promise<void> {
    this.dropConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    this.server = null;
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  private async answer(socket: net.Socket, line: string): Promise<void> {
    const request = JSON.parse(line) as Received;
    this.received.push(request);
    const handler = this.handlers[request.method];
    const answer: Answer = handler
      ? await handler(request.params ?? {}, request)
      : { error: { code: -32601, message: `no method '${request.method}'` } };
    if ("drop" in answer) {
      socket.destroy();
      return;
    }
    if ("never" in answer) {
      return;
    }
    socket.write(JSON.stringify({ id: request.id, ...answer }) + "\n");
    if (request.method === "daemon/subscribe" && "result" in answer) {
      this.subscribers.add(socket);
    }
  }
}

/** A DaemonControl that records calls; `running` says what status() reports. */
export class FakeControl implements DaemonControl {
  calls: string[] = [];
  running = true;
  version_ = "0.1.0";
  onStart: () => void = () => undefined;
  onStop: () => void = () => undefined;

  constructor(private readonly socketPath: string) {}

  async status(): Promise<DaemonStatus> {
    this.calls.push("status");
    return {
      running: this.running,
      state: this.running ? "running" : "stopped",
      socket: this.socketPath,
      status_file: "/repo/.git/localidx/daemon.json",
      log: "/repo/.git/localidx/daemon.log",
    };
  }
  async start(): Promise<void> {
    this.calls.push("start");
    this.running = true;
    this.onStart();
  }
  async stop(): Promise<void> {
    this.calls.push("stop");
    this.running = false;
    this.onStop();
  }
  async version(): Promise<string> {
    this.calls.push("version");
    return this.version_;
  }
}

export interface FakeCliState {
  running: boolean;
  socket: string;
  log: string;
  indexState: string;
  version: string;
  /** When set, `daemon start` fails with this message on stderr. */
  startError?: string;
  /** Per work-tree folder (the command's cwd): what differs there, e.g. each folder's own socket. */
  folders?: Record<string, Partial<FakeCliState>>;
}

/**
 * A fake `localidx` executable: a node script that answers --version, status --json and daemon
 * start|stop|status|logs from a JSON state file, and appends each argv to `calls`.
 */
export class FakeCli {
  readonly dir: string;
  readonly executable: string;
  private readonly statePath: string;
  private readonly callsPath: string;

  constructor(state: FakeCliState) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), "lxv-cli-"));
    this.executable = path.join(this.dir, "localidx");
    this.statePath = path.join(this.dir, "state.json");
    this.callsPath = path.join(this.dir, "calls.log");
    this.setState(state);
    fs.writeFileSync(this.callsPath, "");
    const script = `#!${process.execPath}
const fs = require("fs");
const args = process.argv.slice(2);
const statePath = ${JSON.stringify(this.statePath)};
const all = JSON.parse(fs.readFileSync(statePath, "utf8"));
const here = (all.folders || {})[process.cwd()];
const state = Object.assign({}, all, here || {});
fs.appendFileSync(${JSON.stringify(this.callsPath)}, args.join(" ") + "\\n");
fs.writeFileSync(${JSON.stringify(this.callsPath + ".cwd")}, process.cwd());
const save = () => {
  if (here) { here.running = state.running; } else { all.running = state.running; }
  fs.writeFileSync(statePath, JSON.stringify(all));
};
const cmd = args.join(" ");
if (cmd === "--version") { console.log("localidx, version " + state.version); }
else if (cmd === "daemon status --json") {
  console.log(JSON.stringify({ running: state.running, state: state.running ? "running" : "stopped", socket: state.socket,
    status_file: "/repo/.git/localidx/daemon.json", log: state.log }, null, 2));
  process.exit(state.running ? 0 : 1);
}
else if (cmd === "daemon start") {
  if (state.startError) { console.error("localidx: error: " + state.startError); process.exit(1); }
  state.running = true; save(); console.log("daemon started: pid 4242, socket " + state.socket);
}
else if (cmd === "daemon stop") { const was = state.running; state.running = false; save(); console.log(was ? "daemon stopped (pid 4242)" : "no daemon running"); }
else if (cmd.startsWith("daemon logs")) { console.log("log line 1\\nlog line 2"); }
else if (cmd === "status --json --no-daemon") {
  const empty = state.indexState === "EMPTY";
  console.log(JSON.stringify({ state: state.indexState, root: "/repo", index: "/repo/.git/localidx", model: "fake",
    files: empty ? 0 : 2, files_skipped: 0, chunks: empty ? 0 : 4, chunks_with_vectors: empty ? 0 : 4,
    changed_files: [], deleted_files: [], embedding_progress: empty ? 0 : 1, errors: [] }));
  process.exit(empty ? 1 : 0); // as localidx does: exit status 1 when nothing is indexed yet
}
else { console.error("localidx: error: unknown command " + cmd); process.exit(2); }
`;
    fs.writeFileSync(this.executable, script, { mode: 0o755 });
  }

  setState(state: FakeCliState): void {
    fs.writeFileSync(this.statePath, JSON.stringify(state));
  }

  state(): FakeCliState {
    return JSON.parse(fs.readFileSync(this.statePath, "utf8"));
  }

  /** Each command line the fake ran, in order. */
  calls(): string[] {
    return fs.readFileSync(this.callsPath, "utf8").split("\n").filter(Boolean);
  }

  /** The directory the last command ran in. */
  lastCwd(): string {
    return fs.readFileSync(this.callsPath + ".cwd", "utf8");
  }

  remove(): void {
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Wait until `predicate` holds (polling), or fail after `timeoutMs`. */
export async function waitFor(predicate: () => boolean, timeoutMs = 15_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The real `localidx` for the schema and integration tests: $LOCALIDX_EXE, else the repository's
 * `.venv/bin/localidx` (next to vscode-bridge/), else `localidx` on PATH; null when there is none.
 */
export function findLocalidx(): string | null {
  const candidates: string[] = [];
  if (process.env.LOCALIDX_EXE) {
    candidates.push(process.env.LOCALIDX_EXE);
  }
  // Compiled tests live in vscode-bridge/out/test/.
  candidates.push(path.resolve(__dirname, "..", "..", "..", ".venv", "bin", "localidx"));
  for (const dir of (process.env.PATH ?? "").split(path.delimiter).filter(Boolean)) {
    candidates.push(path.join(dir, "localidx"));
  }
  for (const candidate of candidates) {
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not this one
    }
  }
  return null;
}

export const NO_LOCALIDX =
  "no localidx executable: set LOCALIDX_EXE, create ../.venv (pip install -e ..), or put localidx on PATH";
