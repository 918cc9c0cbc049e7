/**
 * What the status bar shows: STARTING (the first connection, or the daemon's start, is under way: nothing has
 * failed yet), READY, INDEXING (with progress), STALE, NO INDEX, NOT INSTALLED (the executable is not found: a
 * setting to fill in, not a failure), DAEMON DOWN, IDLE (the daemon stopped by itself after its idle timeout: not a
 * failure; the next search starts it again) and ERROR for a daemon that answers with a failure, mapped from what the daemon reports: an `index/status` answer, or an `index/progress`
 * notification of the subscription. Pure functions, no `vscode` import: statusBar.ts paints them, and the
 * integration test maps a real daemon's answers through them.
 */

import { DaemonUnavailableError, NotInstalledError, ResponseError, isIndexNotReady, message } from "./errors";
import { ErrorCode, IndexStatusResult, ProgressStatus } from "./protocol";

export type BarKind =
  | "STARTING"
  | "READY"
  | "INDEXING"
  | "STALE"
  | "NO_INDEX"
  | "NOT_INSTALLED"
  | "DAEMON_DOWN"
  | "IDLE"
  | "ERROR";

export interface BarState {
  kind: BarKind;
  /** 0..100 while INDEXING, when known. */
  percent?: number;
  /** One line for the tooltip: why this state. */
  detail: string;
}

export interface Rendered {
  text: string;
  tooltip: string;
  /** Which theme background the item takes: none, warning or error. */
  background: "none" | "warning" | "error";
}

const LABELS: Record<BarKind, string> = {
  STARTING: "STARTING",
  READY: "READY",
  INDEXING: "INDEXING",
  STALE: "STALE",
  NO_INDEX: "NO INDEX",
  NOT_INSTALLED: "NOT INSTALLED",
  DAEMON_DOWN: "DAEMON DOWN",
  IDLE: "IDLE",
  ERROR: "ERROR",
};

const ICONS: Record<BarKind, string> = {
  STARTING: "$(loading~spin)",
  READY: "$(check)",
  INDEXING: "$(sync~spin)",
  STALE: "$(history)",
  NO_INDEX: "$(circle-slash)",
  NOT_INSTALLED: "$(tools)",
  DAEMON_DOWN: "$(debug-disconnect)",
  IDLE: "$(debug-pause)",
  ERROR: "$(error)",
};

/**
 * When to ask again without a subscription (an older daemon): quickly while indexing (progress moves), slowly
 * otherwise, rarely without a daemon (each poll then runs the CLI), never when it stopped because it was idle.
 * With a subscription the status arrives by itself and nothing polls.
 */
export function pollIntervalMs(kind: BarKind): number | null {
  switch (kind) {
    case "INDEXING":
    case "STARTING":
      return 1_500;
    case "READY":
    case "STALE":
      return 15_000;
    case "IDLE":
      return null;
    default:
      return 60_000;
  }
}

/** The bar's state for an `index/progress` notification (or a subscription's first status). */
export function fromProgress(status: ProgressStatus): BarState {
  const counts = `${status.files} files, ${status.chunks} chunks`;
  switch (status.state) {
    case "INDEXING": {
      const phase = status.writer?.progress?.phase ?? status.writer?.state;
      const percent = status.percent ?? (status.chunks > 0 && status.embedding_progress < 1
        ? Math.floor(100 * status.embedding_progress) : undefined);
      return { kind: "INDEXING", percent, detail: `indexing${phase ? ` (${phase})` : ""}; ${counts} so far` };
    }
    case "STALE":
      return { kind: "STALE", detail: `${status.chunks - status.chunks_with_vectors} chunks wait for vectors; ${counts}` };
    case "EMPTY":
      return { kind: "NO_INDEX", detail: "nothing indexed yet: run localidx: Re-index" };
    case "READY": {
      const released = status.memory?.released ? " (model released while unused)" : "";
      return { kind: "READY", detail: `${counts}${released}` };
    }
    default:
      return { kind: "ERROR", detail: `unknown index state ${JSON.stringify(status.state)}` };
  }
}

/** The bar's state once the daemon stopped by itself (`reason`, e.g. "idle for 3600 s"). */
export function idle(reason: string): BarState {
  return { kind: "IDLE", detail: `the daemon stopped (${reason}); the next search starts it again` };
}

/** How far a run has got, 0..100: the writer's phase counters when it reports them, else the embedded share. */
export function indexingPercent(status: IndexStatusResult): number | undefined {
  const progress = status.daemon?.writer?.progress;
  if (progress && typeof progress.done === "number" && typeof progress.total === "number" && progress.total > 0) {
    return Math.min(100, Math.floor((100 * progress.done) / progress.total));
  }
  if (status.chunks > 0 && status.embedding_progress < 1) {
    return Math.floor(100 * status.embedding_progress);
  }
  return undefined;
}

/** The bar's state for an `index/status` result. */
export function fromIndexStatus(status: IndexStatusResult): BarState {
  const counts = `${status.files} files, ${status.chunks} chunks`;
  switch (status.state) {
    case "INDEXING": {
      const phase = status.daemon?.writer?.progress?.phase ?? status.daemon?.writer?.state;
      const percent = indexingPercent(status);
      return { kind: "INDEXING", percent, detail: `indexing${phase ? ` (${phase})` : ""}; ${counts} so far` };
    }
    case "STALE": {
      const changed = status.changed_files.length + status.deleted_files.length;
      const pending = status.chunks - status.chunks_with_vectors;
      const why = changed ? `${changed} files changed since indexed` : `${pending} chunks wait for vectors`;
      return { kind: "STALE", detail: `${why}; ${counts}` };
    }
    case "EMPTY":
      return { kind: "NO_INDEX", detail: "nothing indexed yet: run localidx: Re-index" };
    case "READY":
      return { kind: "READY", detail: `${counts}, model ${status.model}` };
    default:
      return { kind: "ERROR", detail: `unknown index state ${JSON.stringify(status.state)}` };
  }
}

/** The bar's state while the first connection (or the daemon's start) is under way. */
export function starting(detail = "connecting to the daemon"): BarState {
  return { kind: "STARTING", detail };
}

/** The bar's state when asking for the status failed. */
export function fromError(err: unknown): BarState {
  if (err instanceof NotInstalledError) {
    return { kind: "NOT_INSTALLED", detail: err.message };
  }
  if (isIndexNotReady(err)) {
    return { kind: "NO_INDEX", detail: `nothing indexed yet: ${message(err)}` };
  }
  if (err instanceof DaemonUnavailableError) {
    return { kind: "DAEMON_DOWN", detail: message(err) };
  }
  if (err instanceof ResponseError && err.code === ErrorCode.SHUTTING_DOWN) {
    return { kind: "DAEMON_DOWN", detail: "the daemon is shutting down" };
  }
  return { kind: "ERROR", detail: message(err) };
}

/** The state in words, e.g. "INDEXING 42%" or "NO INDEX". */
export function label(state: BarState): string {
  const percent = state.kind === "INDEXING" && state.percent !== undefined ? ` ${state.percent}%` : "";
  return `${LABELS[state.kind]}${percent}`;
}

export function render(state: BarState): Rendered {
  const background =
    state.kind === "DAEMON_DOWN" || state.kind === "ERROR"
      ? "error"
      : state.kind === "NO_INDEX" || state.kind === "NOT_INSTALLED"
        ? "warning"
        : "none";
  return {
    text: `${ICONS[state.kind]} localidx: ${label(state)}`,
    tooltip: `localidx: ${label(state)}: ${state.detail}\nClick for details.`,
    background,
  };
}

/** The `Show Status` report: one fact a line. */
export function describe(status: IndexStatusResult): string[] {
  const lines = [
    `state    ${status.state}`,
    `root     ${status.root}`,
    `index    ${status.index}`,
    `model    ${status.model}`,
    `files    ${status.files} (${status.files_skipped} skipped)`,
    `chunks   ${status.chunks} (${status.chunks_with_vectors} with vectors, ` +
      `${Math.round(100 * status.embedding_progress)}% embedded)`,
  ];
  const changed = status.changed_files?.length ?? 0;
  const deleted = status.deleted_files?.length ?? 0;
  if (changed || deleted) {
    lines.push(`changed  ${changed} changed, ${deleted} deleted since indexed`);
  }
  if (status.errors?.length) {
    lines.push(`errors   ${status.errors.length} files could not be parsed`);
  }
  const daemon = status.daemon;
  if (daemon) {
    const queued = daemon.writer.queued < 0 ? "everything" : String(daemon.writer.queued);
    lines.push(
      `daemon   pid ${daemon.pid}, localidx ${daemon.package_version ?? "?"}, watcher ${daemon.watcher ?? "?"}`,
      `writer   ${daemon.writer.state}, ${queued} queued, ${daemon.writer.pending_vectors} vectors pending`,
      `socket   ${daemon.socket}`,
      `log      ${daemon.log}`,
    );
    if (daemon.writer.last_error) {
      lines.push(`last error  ${daemon.writer.last_error}`);
    }
  } else {
    lines.push("daemon   not running");
  }
  return lines;
}
