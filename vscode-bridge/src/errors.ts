/**
 * The errors the bridge raises, one class per thing the user can act on. No `vscode` import: the client and the
 * CLI wrapper use these too, and commands.ts turns them into messages.
 */

import { ErrorCode, ErrorObject } from "./protocol";

/** An error response from the daemon, with the protocol's code and data. */
export class ResponseError extends Error {
  readonly code: number;
  readonly data: unknown;

  constructor(error: ErrorObject) {
    super(error.message);
    this.name = "ResponseError";
    this.code = error.code;
    this.data = error.data;
  }
}

/** No daemon answers for this work tree: none runs, it went away, or it sent something that is no answer. */
export class DaemonUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DaemonUnavailableError";
  }
}

/** The daemon did not answer in time; the connection is closed (a late answer would be out of step). */
export class DaemonTimeoutError extends DaemonUnavailableError {
  constructor(message: string) {
    super(message);
    this.name = "DaemonTimeoutError";
  }
}

/** The `localidx` executable could not be run (spawn ENOENT or EACCES). */
export class NotInstalledError extends Error {
  readonly executable: string;

  constructor(executable: string, reason: string) {
    super(
      `localidx is not installed or not runnable (${executable}: ${reason}). Install it (pip install localidx) ` +
        `or set "localidx.executablePath" to the localidx executable.`,
    );
    this.name = "NotInstalledError";
    this.executable = executable;
  }
}

/** A `localidx` command ran but failed; the message is its last line of stderr. */
export class CliError extends Error {
  readonly exitCode: number | null;

  constructor(message: string, exitCode: number | null) {
    super(message);
    this.name = "CliError";
    this.exitCode = exitCode;
  }
}

/** Nothing is indexed yet: a 1001 from the daemon, or an EMPTY index found while no daemon runs. */
export function isIndexNotReady(err: unknown): boolean {
  return err instanceof ResponseError && err.code === ErrorCode.INDEX_NOT_READY;
}

export function isVersionMismatch(err: unknown): boolean {
  return err instanceof ResponseError && err.code === ErrorCode.VERSION_MISMATCH;
}

export function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
