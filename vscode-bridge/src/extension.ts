/**
 * The extension's entry point: activation creates the output channel and the bridge for the first workspace
 * folder, registers the commands, and connects to the daemon in the background (the status bar shows how that
 * went). Activation happens only in workspaces that contain `.git` or `.localidx.toml` (package.json's
 * activationEvents) or when a localidx command is run.
 */

import * as vscode from "vscode";

import { Bridge, COMMANDS } from "./commands";

export interface Api {
  /** Undefined when no folder is open. */
  bridge?: Bridge;
  /** Settles when the first connection attempt and status bar paint are done (tests wait on it). */
  ready: Promise<void>;
}

export function activate(context: vscode.ExtensionContext): Api {
  const output = vscode.window.createOutputChannel("localidx");
  context.subscriptions.push(output);
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  if (!folder) {
    for (const command of Object.values(COMMANDS)) {
      context.subscriptions.push(
        vscode.commands.registerCommand(command, () =>
          vscode.window.showInformationMessage("localidx: open a folder (a git repository) first."),
        ),
      );
    }
    return { ready: Promise.resolve() };
  }
  const bridge = new Bridge(folder, output);
  context.subscriptions.push(
    bridge,
    vscode.commands.registerCommand(COMMANDS.search, () => bridge.search()),
    vscode.commands.registerCommand(COMMANDS.searchSelection, () => bridge.searchSelection()),
    vscode.commands.registerCommand(COMMANDS.copyContext, () => bridge.copyContext()),
    vscode.commands.registerCommand(COMMANDS.reindex, () => bridge.reindex()),
    vscode.commands.registerCommand(COMMANDS.showStatus, () => bridge.showStatus()),
    vscode.commands.registerCommand(COMMANDS.restartDaemon, () => bridge.restartDaemon()),
    vscode.commands.registerCommand(COMMANDS.showLogs, () => bridge.showLogs()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("localidx")) {
        bridge.reconfigure();
      }
    }),
    // A save may make the index stale (or start a run through the watcher): look again soon.
    vscode.workspace.onDidSaveTextDocument(() => bridge.statusBar.schedule(2_000)),
  );
  bridge.log(`localidx for ${folder}`);
  const ready = bridge.startup().catch((err: unknown) => bridge.log(`startup failed: ${String(err)}`));
  return { bridge, ready };
}

export function deactivate(): void {
  // Everything is in context.subscriptions; the daemon keeps running for the CLI, hooks and other windows.
}
