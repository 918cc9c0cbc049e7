/**
 * The `localidx` command line, as the extension uses it: the daemon's lifecycle (start, stop, status, logs), the
 * installed version, the index's status when no daemon runs, and the protocol schema.
 *
 * The CLI is the single source of truth for where a work tree's daemon lives: `localidx daemon status --json`,
 * run in the work tree, prints the socket and log paths whether or not a daemon runs (exit status 1 when none
 * does). Every command runs in the workspace folder with no shell. A missing executable (spawn ENOENT/EACCES)
 * becomes NotInstalledError, a failing command CliError with its last line of stderr. No `vscode` import.
 */

import { execFile } from "node:child_process";
import * as os from "node:os";
import * as path from "node:path";

import { CliError, NotInstalledError } from "./errors";
import { IndexStatusResult, WriterState } from "./protocol";

/** What `localidx daemon status --json` prints. */
export interface DaemonStatus {
  running: boolean;
  /** running, stopped, or unreachable (a live pid that does not answer). */
  state: "running" | "stopped" | "unreachable";
  socket: string;
  status_file: string;
  log: string;
  pid?: number;
  root?: string;
  package_version?: string;
  protocol_version?: number;
  writer?: WriterState;
  /** Why a running daemon is not usable as it is (e.g. another protocol version). */
  problem?: string;
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  /** The `localidx` executable: a path, or a name looked up on PATH. `~/` is expanded. */
  executable: string;
  /** The work tree (the workspace folder); every command runs there. */
  cwd: string;
  env?: NodeJS.ProcessEnv;
  /** Where to log each command line and its failures (the output channel). */
  log?: (line: string) => void;
}

export const START_TIMEOUT_MS = 90_000; // `daemon start` waits up to 60 s for the daemon's hello
export const STOP_TIMEOUT_MS = 60_000; // `daemon stop` waits up to 40 s for the writer's batch
const DEFAULT_TIMEOUT_MS = 30_000;

export function expandHome(executable: string): string {
  return executable === "~" || executable.startsWith("~/") ? path.join(os.homedir(), executable.slice(1)) : executable;
}

/** Runs `localidx` subcommands in one work tree. */
export class Cli {
  readonly executable: string;
  readonly cwd: string;
  private readonly env: NodeJS.ProcessEnv | undefined;
  private readonly log: (line: string) => void;

  constructor(options: CliOptions) {
    this.executable = expandHome(options.executable.trim() || "localidx");
    this.cwd = options.cwd;
    this.env = options.env;
    this.log = options.log ?? (() => undefined);
  }

  /** Run `localidx ARGS`; resolves with the exit code and output whatever the exit code (a timeout is a CliError). */
  run(args: string[], timeoutMs = DEFAULT_TIMEOUT_MS): Promise<CliResult> {
    this.log(`$ ${this.executable} ${args.join(" ")}`);
    return new Promise((resolve, reject) => {
      execFile(
        this.executable,
        args,
        { cwd: this.cwd, env: this.env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024, encoding: "utf8" },
        (error, stdout, stderr) => {
          if (error) {
            const code = (error as NodeJS.ErrnoException).code;
            if (code === "ENOENT" || code === "EACCES") {
              reject(new NotInstalledError(this.executable, code === "ENOENT" ? "not found" : "permission denied"));
              return;
            }
            if (error.killed) {
              reject(new CliError(`localidx ${args.join(" ")} did not finish in ${timeoutMs / 1000} s`, null));
              return;
            }
            if (error.signal) {
              reject(new CliError(`localidx ${args.join(" ")} was killed by ${error.signal}`, null));
              return;
            }
          }
          resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr });
        },
      );
    });
  }

  /** Run a command that must succeed; its stdout. */
  private async check(args: string[], timeoutMs?: number): Promise<string> {
    const result = await this.run(args, timeoutMs);
    if (result.code !== 0) {
      const reason = lastLine(result.stderr) || lastLine(result.stdout) || `exit status ${result.code}`;
      this.log(`  failed: ${reason}`);
      throw new CliError(reason.replace(/^localidx: error: /, ""), result.code);
    }
    return result.stdout;
  }

  /** `localidx daemon status --json`: where the daemon lives and whether it runs (exit status 1 is "not running"). */
  async status(): Promise<DaemonStatus> {
    const result = await this.run(["daemon", "status", "--json"]);
    const parsed = parseJson(result.stdout);
    if (!parsed || typeof parsed.socket !== "string") {
      const reason = lastLine(result.stderr) || `exit status ${result.code}`;
      throw new CliError(`localidx daemon status failed: ${reason.replace(/^localidx: error: /, "")}`, result.code);
    }
    return parsed as unknown as DaemonStatus;
  }

  /** `localidx daemon start`: start the work tree's daemon unless one runs, and wait for its hello. */
  async start(): Promise<void> {
    await this.check(["daemon", "start"], START_TIMEOUT_MS);
  }

  /** `localidx daemon stop`: stop the daemon and wait until it has exited. */
  async stop(): Promise<void> {
    await this.check(["daemon", "stop"], STOP_TIMEOUT_MS);
  }

  /** The end of the daemon's log (`localidx daemon logs -n LINES`). */
  async logs(lines = 200): Promise<string> {
    const result = await this.run(["daemon", "logs", "-n", String(lines)]);
    return result.stdout || result.stderr;
  }

  /** The installed localidx version, from `localidx --version` ("localidx, version 0.1.0"). */
  async version(): Promise<string> {
    const out = await this.check(["--version"]);
    const found = /version\s+(\S+)/.exec(out);
    if (!found) {
      throw new CliError(`cannot read the version from ${JSON.stringify(out.trim())}`, 0);
    }
    return found[1];
  }

  /**
   * `localidx status --json --no-daemon`: the index's state read without a daemon (EMPTY when nothing is indexed).
   * `--no-daemon`: the CLI would otherwise start one, and the extension asks this while none runs, so a refresh of
   * the status bar would start again a daemon that stopped for being idle. The exit status says the state too (1 for
   * EMPTY, 2 for DAMAGED); the report printed is the answer whatever it is.
   */
  async indexStatus(): Promise<IndexStatusResult> {
    const result = await this.run(["status", "--json", "--no-daemon"], 60_000);
    const parsed = parseJson(result.stdout);
    if (!parsed || typeof parsed.state !== "string") {
      const reason = lastLine(result.stderr) || (result.code ? `exit status ${result.code}` : "it printed no JSON");
      this.log(`  failed: ${reason}`);
      throw new CliError(`localidx status failed: ${reason.replace(/^localidx: error: /, "")}`, result.code);
    }
    return parsed as unknown as IndexStatusResult;
  }

  /** `localidx protocol schema`, parsed. */
  async schema(): Promise<Record<string, unknown>> {
    const parsed = parseJson(await this.check(["protocol", "schema"]));
    if (!parsed) {
      throw new CliError("localidx protocol schema printed no JSON", 0);
    }
    return parsed;
  }
}

function lastLine(text: string): string {
  const lines = text.split("\n").map((line) => line.trim()).filter(Boolean);
  return lines.length ? lines[lines.length - 1] : "";
}

function parseJson(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
