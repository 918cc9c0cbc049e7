/**
 * The logic of `localidx: Search`, with no `vscode` import (searchPick.ts is the glue): keystrokes are debounced;
 * only the newest query's answer is shown (older answers that arrive late are dropped); each item shows the symbol,
 * `path:lines` and a snippet, and a match from a file changed since it was indexed is marked stale; `lineSpan` is
 * what picking one selects.
 */

import * as path from "node:path";
import type { QuickPickItem } from "vscode";

import { NotInstalledError, isIndexNotReady, message } from "./errors";
import { Match } from "./protocol";

export const SEARCH_DEBOUNCE_MS = 250;
export const SNIPPET_CHARS = 160;

export interface Debounced<A extends unknown[]> {
  (...args: A): void;
  cancel(): void;
}

/** `fn`, called `delayMs` after the last of a burst of calls, with that last call's arguments. */
export function debounce<A extends unknown[]>(fn: (...args: A) => void, delayMs: number): Debounced<A> {
  let timer: NodeJS.Timeout | null = null;
  const debounced = (...args: A) => {
    if (timer) {
      clearTimeout(timer);
    }
    timer = setTimeout(() => {
      timer = null;
      fn(...args);
    }, delayMs);
  };
  debounced.cancel = () => {
    if (timer) {
      clearTimeout(timer);
      timer = null;
    }
  };
  return debounced;
}

/** A match of a search over several folders: which folder's daemon found it, and the work tree its path is in. */
export interface FolderMatch extends Match {
  folder?: string;
  root?: string;
}

/** What a search item carries besides its text: the match to open, or what picking it does instead. */
export interface MatchItem extends QuickPickItem {
  match?: FolderMatch;
  action?: "reindex" | "settings" | "logs";
}

const KIND_ICONS: Record<string, string> = {
  function: "symbol-function",
  method: "symbol-method",
  class: "symbol-class",
  interface: "symbol-interface",
  module: "symbol-module",
  struct: "symbol-struct",
  enum: "symbol-enum",
  constant: "symbol-constant",
  variable: "symbol-variable",
  file: "file",
  summary: "file",
  section: "symbol-key",
  doc: "book",
};

/** `path:start-end` (or `path:line` for one line): the form terminals and editors jump to. */
export function location(match: Match): string {
  const lines = match.end_line > match.start_line ? `${match.start_line}-${match.end_line}` : `${match.start_line}`;
  return `${match.path}:${lines}`;
}

/** The match's text on one line, whitespace collapsed, cut to `max` characters. */
export function snippet(text: string, max = SNIPPET_CHARS): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/**
 * A match's detail line: its text from the signature on (the signature once, even where the chunk starts with a
 * docstring or comment), or the signature before the text where the text does not hold it.
 */
export function detail(match: Match): string {
  const text = snippet(match.text, Number.MAX_SAFE_INTEGER);
  const signature = match.signature ? snippet(match.signature, Number.MAX_SAFE_INTEGER) : "";
  if (!signature) {
    return snippet(text);
  }
  const at = text.indexOf(signature);
  return snippet(at >= 0 ? text.slice(at) : `${signature} · ${text}`);
}

/** A quick pick item for a match. `alwaysShow`: the daemon ranked these, the quick pick must not filter them. */
export function toItem(match: FolderMatch): MatchItem {
  const name = match.symbol || match.title || path.basename(match.path);
  const icon = KIND_ICONS[match.kind] ?? "symbol-misc";
  const stale = match.stale ? "  $(warning) stale: the file changed since it was indexed" : "";
  const folder = match.folder ? `${match.folder} · ` : "";
  return {
    label: `$(${icon}) ${name}`,
    description: `${folder}${location(match)}${stale}`,
    detail: detail(match),
    alwaysShow: true,
    match,
  };
}

/** The one item shown when a search failed, with what picking it does. */
export function errorItem(err: unknown): MatchItem {
  if (isIndexNotReady(err)) {
    return {
      label: "$(warning) This repository is not indexed yet",
      detail: "Pick this to index it now (localidx: Re-index).",
      alwaysShow: true,
      action: "reindex",
    };
  }
  if (err instanceof NotInstalledError) {
    return { label: "$(error) localidx is not installed", detail: err.message, alwaysShow: true, action: "settings" };
  }
  return { label: `$(error) ${message(err)}`, detail: "Pick this to show the logs.", alwaysShow: true, action: "logs" };
}

export function noMatchesItem(query: string): MatchItem {
  return { label: `No matches for "${query}"`, alwaysShow: true };
}

export interface SearchUpdate {
  query: string;
  busy: boolean;
  matches?: Match[];
  error?: unknown;
}

/**
 * Query-as-you-type: `type` debounces, `now` searches at once; only the newest query's answer reaches `show`.
 * The same query twice in a row is sent once.
 */
export class LiveSearch {
  private generation = 0;
  private lastQuery: string | null = null;
  private readonly debounced: Debounced<[string]>;

  constructor(
    private readonly run: (query: string) => Promise<Match[]>,
    private readonly show: (update: SearchUpdate) => void,
    delayMs = SEARCH_DEBOUNCE_MS,
  ) {
    this.debounced = debounce((query: string) => void this.now(query), delayMs);
  }

  type(query: string): void {
    if (query === this.lastQuery) {
      return;
    }
    this.lastQuery = query;
    if (!query.trim()) {
      this.debounced.cancel();
      this.generation++;
      this.show({ query, busy: false, matches: [] });
      return;
    }
    this.debounced(query);
  }

  async now(query: string): Promise<void> {
    this.debounced.cancel();
    this.lastQuery = query;
    const generation = ++this.generation;
    if (!query.trim()) {
      this.show({ query, busy: false, matches: [] });
      return;
    }
    this.show({ query, busy: true });
    let update: SearchUpdate;
    try {
      update = { query, busy: false, matches: await this.run(query.trim()) };
    } catch (error) {
      update = { query, busy: false, error };
    }
    if (generation === this.generation) {
      this.show(update);
    }
  }

  dispose(): void {
    this.debounced.cancel();
    this.generation++;
  }
}

/**
 * The matches of several folders' searches as one list: best score first, at most `k`. Folders that failed are
 * left out (`onError` hears about each); only when every folder failed does this reject, with the first failure.
 */
export async function mergeFolderSearches(
  searches: { folder: string; root: () => string; run: () => Promise<Match[]> }[],
  k: number,
  onError: (folder: string, err: unknown) => void = () => undefined,
): Promise<FolderMatch[]> {
  const settled = await Promise.allSettled(searches.map((s) => s.run()));
  const merged: FolderMatch[] = [];
  let firstError: unknown = undefined;
  settled.forEach((outcome, i) => {
    if (outcome.status === "fulfilled") {
      const root = searches[i].root();
      merged.push(...outcome.value.map((m) => ({ ...m, folder: searches[i].folder, root })));
    } else {
      firstError ??= outcome.reason;
      onError(searches[i].folder, outcome.reason);
    }
  });
  if (!merged.length && settled.every((o) => o.status === "rejected") && settled.length) {
    throw firstError;
  }
  return merged.sort((a, b) => b.score - a.score).slice(0, k);
}

/** The 0-based lines to select for a match, clamped to the document (the index can be older than the file). */
export function lineSpan(match: Match, lineCount: number): { start: number; end: number } {
  const last = Math.max(0, lineCount - 1);
  const start = Math.min(Math.max(0, match.start_line - 1), last);
  const end = Math.min(Math.max(start, match.end_line - 1), last);
  return { start, end };
}
