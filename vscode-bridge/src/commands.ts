/**
 * The bridge between VS Code and one work tree's daemon: the settings, the CLI, the client, the status bar, and
 * the commands (`localidx: Search`, `Search Selection`, `Copy Context for Question`, `Re-index`, `Show Status`,
 * `Restart Daemon`, `Show Logs`).
 *
 * When the daemon starts: a command or the activation finds none running and starts one with
 * `localidx daemon start`, but only where an index exists. A daemon's first job indexes the whole work tree, so
 * on a repository that was never indexed the user is asked first ("Index now"), never surprised by it.
 *
 * Errors become one message each, with the action that fixes them: not installed -> Open Settings; not indexed
 * (1001) -> Index now; daemon unavailable -> Restart Daemon / Show Logs. Everything is logged to the output channel.
 *
 * The status bar follows the daemon through a subscription on the bridge's connection (`daemon/subscribe`): states
 * arrive as they change and nothing polls, so an open window does not keep the daemon busy. A window with several
 * folders has one bridge per folder (extension.ts).
 */

import * as fs from "node:fs";
import * as vscode from "vscode";

import { DaemonClient, DaemonDownError, RequestOptions } from "./client";
import { Cli } from "./daemon";
import { DaemonUnavailableError, NotInstalledError, ResponseError, isIndexNotReady, message } from "./errors";
import { ContextBuildParams, ContextBuildResult, ErrorCode, MAX_QUERY_CHARS, Method, ParamsOf, ResultOf } from "./protocol";
import { mergeFolderSearches } from "./search";
import { showSearch } from "./searchPick";
import { BarState, describe, fromError, fromIndexStatus, fromProgress, idle, label, starting } from "./status";
import { StatusBar } from "./statusBar";

export const COMMANDS = {
  search: "localidx.search",
  searchSelection: "localidx.searchSelection",
  copyContext: "localidx.copyContext",
  reindex: "localidx.reindex",
  showStatus: "localidx.showStatus",
  restartDaemon: "localidx.restartDaemon",
  showLogs: "localidx.showLogs",
} as const;

const CONTEXT_TIMEOUT_MS = 120_000;
const REINDEX_POLL_MS = 1_000;

export interface Settings {
  executablePath: string;
  profile: string;
  maxResults: number;
}

export function readSettings(): Settings {
  const config = vscode.workspace.getConfiguration("localidx");
  const maxResults = Number(config.get("maxResults", 20));
  return {
    executablePath: String(config.get("executablePath", "localidx") || "localidx"),
    profile: String(config.get("profile", "") ?? "").trim(),
    maxResults: Number.isFinite(maxResults) ? Math.min(100, Math.max(1, Math.floor(maxResults))) : 20,
  };
}

/** The text a question starts from: the selection, else the word under the cursor, at most MAX_QUERY_CHARS. */
export function selectedText(editor: vscode.TextEditor | undefined): string {
  if (!editor) {
    return "";
  }
  let text = editor.document.getText(editor.selection);
  if (!text.trim()) {
    const word = editor.document.getWordRangeAtPosition(editor.selection.active);
    text = word ? editor.document.getText(word) : "";
  }
  return text.trim().slice(0, MAX_QUERY_CHARS);
}

export class Bridge implements vscode.Disposable {
  readonly output: vscode.OutputChannel;
  readonly statusBar: StatusBar;
  readonly highlight: vscode.TextEditorDecorationType;
  settings: Settings;
  cli!: Cli;
  client!: DaemonClient;
  private notInstalledShown = false;
  /** The start-up's connection attempt, while it runs. */
  private starting: Promise<void> | null = null;
  private watching: { dispose(): void } | null = null;

  constructor(
    /** The workspace folder; the CLI runs there and finds the work tree from it. */
    readonly folder: string,
    output: vscode.OutputChannel,
    readonly env?: NodeJS.ProcessEnv,
    /** The folder's name, shown in the status bar and the logs when the window has several folders. */
    readonly name = "",
  ) {
    this.output = output;
    this.settings = readSettings();
    this.highlight = vscode.window.createTextEditorDecorationType({
      backgroundColor: new vscode.ThemeColor("editor.findMatchHighlightBackground"),
      isWholeLine: true,
    });
    const command = name ? { title: "Show Status", command: COMMANDS.showStatus, arguments: [folder] } : COMMANDS.showStatus;
    this.statusBar = new StatusBar(() => this.probe(), command, name);
    this.connectCli();
  }

  log(line: string): void {
    this.output.appendLine(`[${new Date().toISOString().slice(11, 19)}]${this.name ? ` ${this.name}:` : ""} ${line}`);
  }

  /** A file was saved: with a subscription and a watching daemon the state follows by itself; else look soon. */
  onSave(): void {
    const watcher = this.client.hello?.daemon.watcher;
    const watching = watcher === "inotify" || watcher === "polling" || watcher === "native";
    if (!(this.client.subscribed && watching)) {
      this.statusBar.schedule(2_000);
    }
  }

  /** Settings changed: a new executable means a new CLI and client, connected (and started) as at activation. */
  reconfigure(): Promise<void> {
    const previous = this.settings.executablePath;
    this.settings = readSettings();
    if (this.settings.executablePath === previous) {
      return Promise.resolve();
    }
    this.watching?.dispose();
    this.client.dispose();
    this.connectCli();
    this.notInstalledShown = false;
    return this.startup().catch((err: unknown) => this.log(`startup failed: ${String(err)}`));
  }

  /**
   * At activation (and when the executable changes): connect to the daemon, starting it where an index exists, and
   * paint the status bar. Until this has tried, the bar says STARTING and probes wait for it: a daemon that is
   * still starting is not shown as down.
   */
  startup(): Promise<void> {
    const attempt = this.connectOrStart();
    this.starting = attempt;
    return attempt.finally(() => {
      if (this.starting === attempt) {
        this.starting = null;
      }
    }).then(() => this.statusBar.refresh().then(() => undefined));
  }

  private async connectOrStart(): Promise<void> {
    this.statusBar.paint(starting());
    try {
      await this.client.connect(false);
    } catch (err) {
      try {
        if (!(err instanceof DaemonDownError)) {
          throw err;
        }
        if ((await this.cli.indexStatus()).state !== "EMPTY") {
          this.log("no daemon runs: starting one");
          this.statusBar.paint(starting("starting the daemon"));
          await this.client.connect(true);
        }
      } catch (startErr) {
        if (startErr instanceof NotInstalledError && !this.notInstalledShown) {
          this.notInstalledShown = true;
          void this.report(startErr, "start");
        } else {
          this.log(`startup: ${message(startErr)}`);
        }
      }
    }
  }

  /**
   * One request, starting the daemon if none runs, but only where something is indexed: on a repository never
   * indexed this rejects with INDEX_NOT_READY (the caller offers "Index now") instead of indexing it unasked.
   */
  async call<M extends Method>(method: M, params: ParamsOf[M], options: RequestOptions = {}): Promise<ResultOf[M]> {
    try {
      return await this.client.request(method, params, { ...options, start: false });
    } catch (err) {
      if (!(err instanceof DaemonDownError)) {
        throw err;
      }
    }
    const index = await this.cli.indexStatus();
    if (index.state === "EMPTY") {
      throw new ResponseError({ code: ErrorCode.INDEX_NOT_READY, message: "nothing is indexed yet" });
    }
    this.log("no daemon runs: starting one");
    return this.client.request(method, params, { ...options, start: true });
  }

  /** What the status bar shows now (once the start-up's attempt is done). */
  async probe(): Promise<BarState> {
    await this.starting;
    try {
      return fromIndexStatus(await this.client.request("index/status", { check_work_tree: true }, { start: false }));
    } catch (err) {
      if (!(err instanceof DaemonDownError)) {
        return fromError(err);
      }
      try {
        const index = await this.cli.indexStatus();
        if (index.state === "EMPTY") {
          return fromIndexStatus(index);
        }
      } catch (indexErr) {
        return fromError(indexErr);
      }
      return fromError(err);
    }
  }

  // -- commands -------------------------------------------------------------------------------------------------

  /** `localidx: Search` (and, with a query, `Search Selection`). */
  search(initialQuery?: string): Promise<vscode.TextEditor | undefined> {
    const { done } = showSearch({
      search: async (query) => {
        const result = await this.call("search/query", { query, k: this.settings.maxResults });
        return result.matches;
      },
      root: () => this.client.hello?.root ?? this.folder,
      highlight: this.highlight,
      initialQuery,
      onAction: (action) => {
        const command =
          action === "reindex" ? COMMANDS.reindex : action === "logs" ? COMMANDS.showLogs : "workbench.action.openSettings";
        void vscode.commands.executeCommand(command, ...(action === "settings" ? ["localidx.executablePath"] : []));
      },
      onOpenError: (err) => void this.report(err, "open the match"),
    });
    return done;
  }

  async searchSelection(): Promise<vscode.TextEditor | undefined> {
    const text = selectedText(vscode.window.activeTextEditor);
    if (!text) {
      void vscode.window.showInformationMessage("localidx: select some text to search for.");
      return undefined;
    }
    return this.search(text);
  }

  /** `localidx: Copy Context for Question`: build a context pack and put the augmented prompt on the clipboard. */
  async copyContext(): Promise<ContextBuildResult | undefined> {
    const query = await vscode.window.showInputBox({
      title: "localidx: Copy Context for Question",
      prompt: "Your question; the prompt with the code it needs goes to the clipboard",
      value: selectedText(vscode.window.activeTextEditor),
    });
    if (!query?.trim()) {
      return undefined;
    }
    const params: ContextBuildParams = { query: query.trim() };
    if (this.settings.profile) {
      params.profile = this.settings.profile;
    }
    try {
      const result = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: "localidx: building context…" },
        () => this.call("context/build", params, { timeoutMs: CONTEXT_TIMEOUT_MS }),
      );
      await vscode.env.clipboard.writeText(result.augmentedPrompt);
      for (const warning of result.warnings ?? []) {
        this.log(`context/build warning: ${warning}`);
      }
      const warnings = result.warnings?.length ? ` ${result.warnings.length} warnings (see Show Logs).` : "";
      if (result.noResults || result.contextMissing) {
        const reason = result.noResultsReason ? `: ${result.noResultsReason}` : "";
        void vscode.window.showWarningMessage(
          `localidx: copied the prompt, but no code context was found${reason}.${warnings}`,
        );
      } else {
        const profile = result.profile ? `, profile ${result.profile}` : "";
        void vscode.window.showInformationMessage(
          `localidx: copied the prompt with ${result.matches.length} code excerpts${profile} to the clipboard.${warnings}`,
        );
      }
      return result;
    } catch (err) {
      await this.report(err, "build the context");
      return undefined;
    }
  }

  /** `localidx: Re-index`: queue everything for the daemon's writer (starting the daemon) and show progress. */
  async reindex(): Promise<BarState | undefined> {
    try {
      return await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: "localidx: indexing", cancellable: true },
        async (progress, token) => {
          await this.client.request("index/reindex", { reason: "vscode" }, { start: true });
          let reported = 0;
          for (;;) {
            const status = await this.client.request("index/status", { check_work_tree: false });
            const state = fromIndexStatus(status);
            this.statusBar.paint(state);
            if (state.kind !== "INDEXING" || token.isCancellationRequested) {
              void this.statusBar.refresh();
              if (!token.isCancellationRequested) {
                void vscode.window.showInformationMessage(`localidx: ${label(state)} (${state.detail})`);
              }
              return state;
            }
            const percent = state.percent ?? reported;
            progress.report({ message: state.detail, increment: Math.max(0, percent - reported) });
            reported = Math.max(reported, percent);
            await sleep(REINDEX_POLL_MS);
          }
        },
      );
    } catch (err) {
      await this.report(err, "re-index");
      return undefined;
    }
  }

  /** `localidx: Show Status`: the full report in the output channel, a summary with the next step as a message. */
  async showStatus(): Promise<void> {
    let lines: string[];
    let state: BarState;
    try {
      const status = await this.client.request("index/status", { check_work_tree: true }, { start: false });
      lines = describe(status);
      state = fromIndexStatus(status);
    } catch (err) {
      if (!(err instanceof DaemonDownError)) {
        await this.report(err, "read the status");
        return;
      }
      try {
        const status = await this.cli.indexStatus();
        lines = describe(status);
        state = status.state === "EMPTY" ? fromIndexStatus(status) : fromError(err);
      } catch (cliErr) {
        await this.report(cliErr, "read the status");
        return;
      }
    }
    this.statusBar.paint(state);
    this.output.appendLine("");
    this.output.appendLine("localidx status");
    for (const line of lines) {
      this.output.appendLine(`  ${line}`);
    }
    this.output.show(true);
    const actions =
      state.kind === "DAEMON_DOWN" ? ["Restart Daemon", "Show Logs"] : state.kind === "READY" ? [] : ["Re-index"];
    const chosen = await vscode.window.showInformationMessage(`localidx: ${label(state)}: ${state.detail}`, ...actions);
    await this.runAction(chosen);
  }

  /** `localidx: Restart Daemon`: `localidx daemon stop`, then `start`, then reconnect. */
  async restartDaemon(): Promise<void> {
    try {
      const hello = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: "localidx: restarting the daemon…" },
        () => this.client.restart(),
      );
      void vscode.window.showInformationMessage(`localidx: daemon restarted (pid ${hello.pid}).`);
    } catch (err) {
      await this.report(err, "restart the daemon");
    }
    await this.statusBar.refresh();
  }

  /** `localidx: Show Logs`: this extension's output channel, and the daemon's log file in an editor. */
  async showLogs(): Promise<string | undefined> {
    this.output.show(true);
    try {
      const log = this.client.hello?.daemon.log ?? (await this.cli.status()).log;
      if (!fs.existsSync(log)) {
        void vscode.window.showInformationMessage(`localidx: no daemon log yet (${log}).`);
        return undefined;
      }
      const document = await vscode.workspace.openTextDocument(vscode.Uri.file(log));
      const editor = await vscode.window.showTextDocument(document, { preview: true });
      const end = document.lineCount - 1;
      editor.revealRange(new vscode.Range(end, 0, end, 0), vscode.TextEditorRevealType.InCenter);
      return log;
    } catch (err) {
      await this.report(err, "show the logs");
      return undefined;
    }
  }

  // -- errors ---------------------------------------------------------------------------------------------------

  /** Tell the user what went wrong, with the action that fixes it; returns the action chosen. */
  async report(err: unknown, what: string): Promise<string | undefined> {
    this.log(`${what} failed: ${message(err)}`);
    let chosen: string | undefined;
    if (err instanceof NotInstalledError) {
      // Something to set up, not a failure: the button lands on the setting.
      chosen = await vscode.window.showWarningMessage(err.message, "Open Settings");
    } else if (isIndexNotReady(err)) {
      chosen = await vscode.window.showWarningMessage(
        "localidx: this repository is not indexed yet. Index it now? (The daemon then keeps it current.)",
        "Index now",
      );
    } else if (err instanceof ResponseError && err.code === ErrorCode.METHOD_NOT_FOUND) {
      chosen = await vscode.window.showErrorMessage(
        `localidx: the installed localidx cannot ${what} (${err.message}); update localidx.`,
      );
    } else if (err instanceof ResponseError && (err.code === ErrorCode.USAGE_ERROR || err.code === ErrorCode.INVALID_PARAMS)) {
      chosen = await vscode.window.showWarningMessage(`localidx: ${err.message}`);
    } else if (err instanceof DaemonUnavailableError) {
      chosen = await vscode.window.showErrorMessage(
        `localidx: the daemon is not available (${err.message}).`,
        "Restart Daemon",
        "Show Logs",
      );
    } else {
      chosen = await vscode.window.showErrorMessage(`localidx: could not ${what}: ${message(err)}`, "Show Logs");
    }
    await this.runAction(chosen);
    return chosen;
  }

  private async runAction(action: string | undefined): Promise<void> {
    switch (action) {
      case "Open Settings":
        await vscode.commands.executeCommand("workbench.action.openSettings", "localidx.executablePath");
        break;
      case "Index now":
      case "Re-index":
        await vscode.commands.executeCommand(COMMANDS.reindex);
        break;
      case "Restart Daemon":
        await vscode.commands.executeCommand(COMMANDS.restartDaemon);
        break;
      case "Show Logs":
        await vscode.commands.executeCommand(COMMANDS.showLogs);
        break;
    }
  }

  dispose(): void {
    this.watching?.dispose();
    this.statusBar.dispose();
    this.highlight.dispose();
    this.client.dispose();
  }

  private connectCli(): void {
    this.cli = new Cli({
      executable: this.settings.executablePath,
      cwd: this.folder,
      env: this.env,
      log: (line) => this.log(line),
    });
    this.client = new DaemonClient({ control: this.cli, log: (line) => this.log(line) });
    this.watching = this.client.watch({
      status: (status) => this.statusBar.pushed(fromProgress(status)),
      closed: (_reason, stopping) => this.statusBar.unsubscribed(stopping ? idle(stopping) : undefined),
    });
  }
}

/**
 * `localidx: Search` over several folders (a multi-root window): every folder's daemon is asked at once and the
 * matches are merged by score, each labelled with its folder and opened in its own work tree. A folder whose search
 * fails is logged and left out, unless every folder failed.
 */
export function searchFolders(bridges: Bridge[], initialQuery?: string): Promise<vscode.TextEditor | undefined> {
  const first = bridges[0];
  const { done } = showSearch({
    search: (query) =>
      mergeFolderSearches(
        bridges.map((bridge) => ({
          folder: bridge.name || bridge.folder,
          root: () => bridge.client.hello?.root ?? bridge.folder,
          run: async () => (await bridge.call("search/query", { query, k: bridge.settings.maxResults })).matches,
        })),
        first.settings.maxResults,
        (folder, err) => first.log(`search in ${folder} failed: ${message(err)}`),
      ),
    root: () => first.client.hello?.root ?? first.folder,
    highlight: first.highlight,
    initialQuery,
    onAction: (action) => {
      const command =
        action === "reindex" ? COMMANDS.reindex : action === "logs" ? COMMANDS.showLogs : "workbench.action.openSettings";
      void vscode.commands.executeCommand(command, ...(action === "settings" ? ["localidx.executablePath"] : []));
    },
    onOpenError: (err) => void first.report(err, "open the match"),
  });
  return done;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
