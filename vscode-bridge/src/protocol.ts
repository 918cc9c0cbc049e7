/**
 * The socket protocol as the extension speaks it: the version, the method names, each method's parameter names,
 * the error codes and the shapes of the results it reads.
 *
 * localidx/protocol.py is the single source of truth; `localidx protocol schema` prints it as JSON, and
 * test/protocol-schema.test.ts compares that output with the constants here, so the two cannot drift apart. The
 * parameter interfaces are tied to the constants at compile time (see the `Same` checks at the end), so a field
 * added to an interface but not to METHODS (or the reverse) does not compile.
 *
 * Framing: one compact JSON object per line (UTF-8, at most MAX_FRAME_BYTES including the newline);
 * request {id, method, params}, response {id, result} or {id, error: {code, message, data?}}.
 */

export const PROTOCOL_VERSION = 2;
/** Every request; responses too, until the hello raises the connection's limit (`max_frame_bytes`). */
export const MAX_FRAME_BYTES = 1024 * 1024;
/** The longest query the daemon reads; longer text is cut to it, with a warning in the result (never refused). */
export const MAX_QUERY_CHARS = 32 * 1024;
/** The most a hello may ask for (the daemon's `max_negotiated_frame_bytes`). */
export const MAX_NEGOTIATED_FRAME_BYTES = 1 << 30;
/** What this extension asks for: a Node string holds at most about 512 MiB, so a larger frame could not be read. */
export const CLIENT_MAX_FRAME_BYTES = 256 * 1024 * 1024;

/** Error codes: the JSON-RPC ones, then localidx's own. */
export const ErrorCode = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  /** Nothing is indexed yet: offer to index. */
  INDEX_NOT_READY: 1001,
  /** Well-formed, but it cannot be served as asked (an empty query, an unknown kind). */
  USAGE_ERROR: 1002,
  /** The hello named another protocol or package version: restart the daemon once and retry. */
  VERSION_MISMATCH: 1003,
  SHUTTING_DOWN: 1004,
  /** The daemon serves as many connections as it may (id null, then closed): try again later. */
  OVERLOADED: 1005,
  /** The response is over this connection's frame limit: raise it in the hello. */
  RESPONSE_TOO_LARGE: 1006,
} as const;
export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

export const SEARCH_MODES = ["hybrid", "vector", "bm25"] as const;
export type SearchMode = (typeof SEARCH_MODES)[number];

/** Every method: its parameter names and which of them are required (as in the schema's `params`). */
export const METHODS = {
  "daemon/hello": {
    params: ["protocol_version", "package_version", "client", "max_frame_bytes", "settings_fingerprint"],
    required: ["protocol_version"],
  },
  "daemon/stop": { params: [], required: [] },
  "daemon/subscribe": { params: ["interval_ms"], required: [] },
  "index/status": { params: ["check_work_tree"], required: [] },
  "index/reindex": { params: ["paths", "reason", "rebuild", "wait"], required: [] },
  "search/query": { params: ["query", "k", "mode", "files", "lang", "path", "kind"], required: ["query"] },
  "context/build": {
    params: ["query", "profile", "max_tokens", "top_k", "conversation_context", "locale", "lang", "path", "kind"],
    required: ["query"],
  },
  "chunks/show": { params: ["paths", "max_tokens"], required: ["paths"] },
} as const;
export type Method = keyof typeof METHODS;

// -- parameters -------------------------------------------------------------------------------------------------

export interface HelloParams {
  protocol_version: number;
  package_version?: string;
  client?: string;
  /** The largest frame this client reads: the connection's responses may be that large. */
  max_frame_bytes?: number;
  /** localidx's own clients send a digest of their settings; a daemon started with others asks to be restarted. */
  settings_fingerprint?: string;
}

export interface SubscribeParams {
  /** The least time between two progress notifications (50..60000, default 500). */
  interval_ms?: number;
}

/** No parameters. */
export type StopParams = { [K in never]: never };

export interface StatusParams {
  check_work_tree?: boolean;
}

export interface ReindexParams {
  paths?: string[];
  reason?: string;
  /** Build a new index beside the current one and switch to it (`localidx index --rebuild`). */
  rebuild?: boolean;
  wait?: boolean;
}

interface Filters {
  lang?: string;
  path?: string;
  kind?: string;
}

export interface SearchParams extends Filters {
  query: string;
  k?: number;
  mode?: SearchMode;
  /** Also rank the k best files (from the best 100 matches). */
  files?: boolean;
}

export interface ContextBuildParams extends Filters {
  query: string;
  profile?: string;
  max_tokens?: number;
  top_k?: number;
  conversation_context?: string[];
  locale?: string;
}

export interface ChunksShowParams {
  /** Files relative to the work tree's root, forward slashes. */
  paths: string[];
  /** Split chunks over this many tokens instead of the max_tokens setting. */
  max_tokens?: number;
}

export interface ParamsOf {
  "daemon/hello": HelloParams;
  "daemon/stop": StopParams;
  "daemon/subscribe": SubscribeParams;
  "index/status": StatusParams;
  "index/reindex": ReindexParams;
  "search/query": SearchParams;
  "context/build": ContextBuildParams;
  "chunks/show": ChunksShowParams;
}

// -- results (the members the extension reads; the daemon sends more) ------------------------------------------

export interface WriterState {
  /** starting, idle, or the indexer's phase while a run is in progress: scan, chunk, written, embed. */
  state: string;
  /** Paths waiting for the next run; -1 means everything. */
  queued: number;
  /** The phase's counters, e.g. {phase: "embed", done: 120, total: 300}. */
  progress: { phase?: string; done?: number; total?: number; [key: string]: unknown };
  runs: number;
  pending_vectors: number;
  last_error: string | null;
}

export interface DaemonInfo {
  pid: number;
  socket: string;
  log: string;
  status_file?: string;
  root?: string;
  package_version?: string;
  protocol_version?: number;
  uptime_s?: number;
  idle_timeout_s?: number;
  model?: string;
  watcher?: string;
  writer: WriterState;
  release_after_s?: number;
  connections?: { open: number; max: number; refused: number; subscribed: number };
  memory?: { rss_mb?: number; released?: boolean; model_loaded?: boolean; [key: string]: unknown };
}

export interface HelloResult {
  protocol_version: number;
  package_version: string;
  pid: number;
  /** The work tree the daemon serves; match paths are relative to it. */
  root: string;
  index: string;
  capabilities: string[];
  /** The response limit in force on this connection. */
  max_frame_bytes?: number;
  daemon: DaemonInfo;
}

/** The `index/progress` notification's params (and `daemon/subscribe`'s `status`): cheap, no work-tree walk. */
export interface ProgressStatus {
  seq: number;
  state: IndexState;
  files: number;
  chunks: number;
  chunks_with_vectors: number;
  embedding_progress: number;
  /** 0..100 while INDEXING, when known. */
  percent: number | null;
  writer: WriterState;
  memory?: { released?: boolean; rss_mb?: number | null };
  /** Set in the last notification before the daemon exits: why (e.g. "idle for 3600 s"). */
  stopping?: string;
}

export interface SubscribeResult {
  subscribed: boolean;
  interval_ms: number;
  status: ProgressStatus;
}

/** A frame the daemon sends unasked (no id), after daemon/subscribe. */
export interface Notification {
  method: "index/progress";
  params: ProgressStatus;
}

export type IndexState = "READY" | "STALE" | "EMPTY" | "INDEXING";

export interface IndexStatusResult {
  state: IndexState;
  root: string;
  index: string;
  model: string;
  files: number;
  files_skipped: number;
  chunks: number;
  chunks_with_vectors: number;
  changed_files: string[];
  deleted_files: string[];
  /** Share of chunks that have vectors, 0..1. */
  embedding_progress: number;
  errors: { path: string; lines: [number, number]; reason: string }[];
  /** Present when the daemon answered (not in `localidx status --json`). */
  daemon?: DaemonInfo;
}

export interface Match {
  id?: string;
  path: string;
  start_line: number;
  end_line: number;
  symbol: string;
  kind: string;
  language: string;
  title?: string;
  score: number;
  stale: boolean;
  text: string;
  signature?: string;
  parent?: string;
}

export interface SearchResult {
  matches: Match[];
  /** What the daemon fixed in the request (a query cut to MAX_QUERY_CHARS, text that was not valid Unicode). */
  warnings?: string[];
}

export interface ContextBuildResult {
  matches: Match[];
  augmentedPrompt: string;
  instructions?: string;
  contextMissing?: boolean;
  noResults?: boolean;
  noResultsReason?: string | null;
  appliedModules?: string[];
  warnings?: string[];
  profile?: string;
  query?: string;
  rerankApplied?: boolean;
}

export interface ReindexResult {
  queued?: number;
  full?: boolean;
  files_processed?: number;
  chunks_written?: number;
}

export interface ChunkRecord {
  path: string;
  start_line: number;
  end_line: number;
  kind: string;
  /** "" for module code, windows and docs content. */
  symbol: string;
  title: string;
  token_count: number;
}

export interface ChunksShowResult {
  /** One entry per path, in their order; `skipped` is why a file is not chunked, or null. */
  files: { path: string; language: string; skipped: string | null; chunks: ChunkRecord[] }[];
}

export interface ResultOf {
  "daemon/hello": HelloResult;
  "daemon/stop": { stopping: boolean; pid?: number };
  "daemon/subscribe": SubscribeResult;
  "index/status": IndexStatusResult;
  "index/reindex": ReindexResult;
  "search/query": SearchResult;
  "context/build": ContextBuildResult;
  "chunks/show": ChunksShowResult;
}

export interface ErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

// -- compile-time ties between the interfaces and METHODS ------------------------------------------------------

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type RequiredKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? never : K }[keyof T];
type Declared<M extends Method> = (typeof METHODS)[M]["params"][number];
type DeclaredRequired<M extends Method> = (typeof METHODS)[M]["required"][number];
type Tied = { [M in Method]: [Same<keyof ParamsOf[M], Declared<M>>, Same<RequiredKeys<ParamsOf[M]>, DeclaredRequired<M>>] };
// Fails to compile when a parameter interface and METHODS disagree on names or on which are required.
const tied: { [M in Method]: Tied[M] extends [true, true] ? true : never } = {
  "daemon/hello": true,
  "daemon/stop": true,
  "daemon/subscribe": true,
  "index/status": true,
  "index/reindex": true,
  "search/query": true,
  "context/build": true,
  "chunks/show": true,
};
void tied;
