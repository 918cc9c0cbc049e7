/**
 * The extension's entry point: activation creates the output channel and one bridge per workspace folder (a
 * multi-root window is served for every folder, and folders added or removed later get or lose theirs), registers
 * the commands, and connects to each folder's daemon in the background (each folder's status bar item shows how
 * that went). Activation happens only in workspaces that contain `.git` or `.localidx.toml` (package.json's
 * activationEvents) or when a localidx command is run.
 *
 * Which folder a command serves: `localidx: Search` (and Search Selection) searches every folder at once and merges
 * the matches by score, each labelled with its folder; the other commands serve the folder given as their argument
 * (a status bar item passes its own), else the folder of the active editor, else the only folder, else the one the
 * user picks.
 */

import * as path from "node:path";
import * as vscode from "vscode";

import { Bridge, COMMANDS, searchFolders, selectedText } from "./commands";

export interface Api {
  /** The first folder's bridge; undefined when no folder is open. */
  bridge?: Bridge;
  /** Every folder's bridge, in the window's folder order. */
  bridges: Bridge[];
  /** Settles when the first connection attempts and status bar paints are done (tests wait on it). */
  ready: Promise<void>;
}

export function activate(context: vscode.ExtensionContext): Api {
  const output = vscode.window.createOutputChannel("localidx");
  context.subscriptions.push(output);
  const bridges = new Map<string, Bridge>();
  const api: Api = { bridges: [], ready: Promise.resolve() };
  const ordered = () => [...bridges.values()];

  const sync = (): Promise<void>[] => {
    const folders = (vscode.workspace.workspaceFolders ?? []).filter((f) => (f.uri.scheme ?? "file") === "file");
    const wanted = new Map(folders.map((f) => [f.uri.fsPath, f.name]));
    for (const [folder, bridge] of bridges) {
      if (!wanted.has(folder)) {
        bridge.log(`folder removed: ${folder}`);
        bridge.dispose();
        bridges.delete(folder);
      }
    }
    const started: Promise<void>[] = [];
    const several = wanted.size > 1;
    for (const [folder, name] of wanted) {
      if (!bridges.has(folder)) {
        const bridge = new Bridge(folder, output, undefined, several ? name || path.basename(folder) : "");
        bridges.set(folder, bridge);
        bridge.log(`localidx for ${folder}`);
        started.push(bridge.startup().catch((err: unknown) => bridge.log(`startup failed: ${String(err)}`)));
      }
    }
    api.bridges = ordered();
    api.bridge = api.bridges[0];
    return started;
  };

  /** The bridge a command serves (see the module docstring); undefined when the user dismissed the pick. */
  const target = async (folder?: unknown): Promise<Bridge | undefined> => {
    const all = ordered();
    if (typeof folder === "string" && bridges.has(folder)) {
      return bridges.get(folder);
    }
    const file = vscode.window.activeTextEditor?.document.uri.fsPath;
    if (file) {
      const owner = all
        .filter((b) => file === b.folder || file.startsWith(b.folder + path.sep))
        .sort((a, b) => b.folder.length - a.folder.length)[0];
      if (owner) {
        return owner;
      }
    }
    if (all.length <= 1) {
      return all[0];
    }
    const picked = await vscode.window.showWorkspaceFolderPick({ placeHolder: "Which folder?" });
    return picked ? bridges.get(picked.uri.fsPath) : undefined;
  };

  const none = () => vscode.window.showInformationMessage("localidx: open a folder (a git repository) first.");
  const on = (command: string, run: (bridge: Bridge) => unknown) =>
    vscode.commands.registerCommand(command, async (folder?: unknown) => {
      if (!bridges.size) {
        return none();
      }
      const bridge = await target(folder);
      return bridge ? run(bridge) : undefined;
    });
  const search = (initialQuery?: string) => {
    const all = ordered();
    if (!all.length) {
      return none();
    }
    return all.length === 1 ? all[0].search(initialQuery) : searchFolders(all, initialQuery);
  };

  context.subscriptions.push(
    { dispose: () => ordered().forEach((bridge) => bridge.dispose()) },
    vscode.commands.registerCommand(COMMANDS.search, () => search()),
    vscode.commands.registerCommand(COMMANDS.searchSelection, () => {
      const all = ordered();
      if (all.length === 1) {
        return all[0].searchSelection();
      }
      const text = selectedText(vscode.window.activeTextEditor);
      if (!text) {
        return vscode.window.showInformationMessage("localidx: select some text to search for.");
      }
      return search(text);
    }),
    on(COMMANDS.copyContext, (bridge) => bridge.copyContext()),
    on(COMMANDS.reindex, (bridge) => bridge.reindex()),
    on(COMMANDS.showStatus, (bridge) => bridge.showStatus()),
    on(COMMANDS.restartDaemon, (bridge) => bridge.restartDaemon()),
    on(COMMANDS.showLogs, (bridge) => bridge.showLogs()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("localidx")) {
        ordered().forEach((bridge) => bridge.reconfigure());
      }
    }),
    // A save may make the index stale (or start a run through the watcher, which the subscription reports).
    vscode.workspace.onDidSaveTextDocument(() => ordered().forEach((bridge) => bridge.onSave())),
    vscode.workspace.onDidChangeWorkspaceFolders(() => {
      const several = (vscode.workspace.workspaceFolders ?? []).length > 1;
      if (several !== ordered().some((b) => b.name)) {
        // Going from one folder to several (or back) changes every label: start the bridges afresh.
        ordered().forEach((bridge) => bridge.dispose());
        bridges.clear();
      }
      api.ready = Promise.all(sync()).then(() => undefined);
    }),
  );
  api.ready = Promise.all(sync()).then(() => undefined);
  return api;
}

export function deactivate(): void {
  // Everything is in context.subscriptions; the daemons keep running for the CLI, hooks and other windows.
}
