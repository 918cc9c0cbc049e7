/**
 * `localidx: Search` in VS Code (the glue over search.ts): a quick pick that queries as you type, and opening a
 * picked match with its lines selected, revealed and highlighted.
 */

import * as path from "node:path";
import * as vscode from "vscode";

import { FolderMatch, LiveSearch, MatchItem, errorItem, lineSpan, noMatchesItem, toItem } from "./search";
import { Match } from "./protocol";

/** Open the match's file (`root` is the daemon's work tree) with its lines selected, revealed and highlighted. */
export async function openMatch(
  root: string,
  match: Match,
  highlight?: vscode.TextEditorDecorationType,
): Promise<vscode.TextEditor> {
  const document = await vscode.workspace.openTextDocument(vscode.Uri.file(path.resolve(root, match.path)));
  const { start, end } = lineSpan(match, document.lineCount);
  const range = new vscode.Range(start, 0, end, document.lineAt(end).text.length);
  const editor = await vscode.window.showTextDocument(document, {
    selection: new vscode.Selection(range.start, range.end),
    preview: true,
  });
  editor.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
  if (highlight) {
    editor.setDecorations(highlight, [range]);
    // The highlight marks where the jump landed; it goes once the user moves on.
    const clear = vscode.window.onDidChangeTextEditorSelection((event) => {
      if (event.textEditor === editor) {
        editor.setDecorations(highlight, []);
        clear.dispose();
      }
    });
  }
  return editor;
}

/**
 * A quick pick that can be told to keep its items' order. VS Code sorts the items of a quick pick by how well their
 * labels match the typed text unless `sortByLabel` is false (a property since VS Code 1.77 that @types/vscode
 * 1.90 does not declare): the daemon's ranking would be re-sorted by symbol names.
 */
type RankedQuickPick<T extends vscode.QuickPickItem> = vscode.QuickPick<T> & { sortByLabel: boolean };

export interface SearchOptions {
  /** Run one search (the bridge sends search/query with the configured max results). */
  search: (query: string) => Promise<FolderMatch[]>;
  /** The work tree match paths are relative to, known once the search answered (a FolderMatch names its own). */
  root: () => string;
  highlight?: vscode.TextEditorDecorationType;
  /** A query to search at once (Search Selection). */
  initialQuery?: string;
  /** What picking an error item does. */
  onAction: (action: NonNullable<MatchItem["action"]>) => void;
  /** A picked match that cannot be opened (its file is gone). */
  onOpenError: (err: unknown) => void;
  delayMs?: number;
}

/** Show the search quick pick; resolves when it closes, with the editor opened if a match was picked. */
export function showSearch(options: SearchOptions): {
  pick: vscode.QuickPick<MatchItem>;
  done: Promise<vscode.TextEditor | undefined>;
} {
  const pick = vscode.window.createQuickPick<MatchItem>() as RankedQuickPick<MatchItem>;
  pick.title = "localidx: Search";
  pick.placeholder = "Search the repository: a symbol, some code, or what it does";
  // The rows are the daemon's ranking, as it is: never filtered (alwaysShow), re-sorted or matched by VS Code.
  pick.sortByLabel = false;
  pick.matchOnDescription = false;
  pick.matchOnDetail = false;
  const live = new LiveSearch(
    options.search,
    (update) => {
      pick.busy = update.busy;
      if (update.error !== undefined) {
        pick.items = [errorItem(update.error)];
      } else if (update.matches) {
        pick.items = update.matches.length || !update.query.trim() ? update.matches.map(toItem) : [noMatchesItem(update.query)];
      }
    },
    options.delayMs,
  );
  const done = new Promise<vscode.TextEditor | undefined>((resolve) => {
    let opening: Promise<vscode.TextEditor | undefined> = Promise.resolve(undefined);
    pick.onDidChangeValue((value) => live.type(value));
    pick.onDidAccept(() => {
      const item = pick.selectedItems[0] ?? pick.activeItems[0];
      if (!item || (!item.match && !item.action)) {
        return;
      }
      if (item.match) {
        const match = item.match;
        opening = openMatch(match.root ?? options.root(), match, options.highlight).catch((err: unknown) => {
          options.onOpenError(err);
          return undefined;
        });
      } else if (item.action) {
        options.onAction(item.action);
      }
      pick.hide();
    });
    pick.onDidHide(() => {
      live.dispose();
      pick.dispose();
      void opening.then(resolve);
    });
  });
  pick.show();
  if (options.initialQuery?.trim()) {
    pick.value = options.initialQuery;
    void live.now(options.initialQuery);
  }
  return { pick, done };
}
