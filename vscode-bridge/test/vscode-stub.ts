/**
 * A fake `vscode` module for unit tests under plain node (VS Code itself cannot be downloaded here or in CI).
 *
 * `installVscodeStub()` patches Module._load so that `require("vscode")` returns one shared, mutable stub. It is
 * marked `__esModule` so TypeScript's `import * as vscode` hands out this very object, and tests can change its
 * answers between cases (`stub.reset()`). The stub records what the extension does (messages, opened editors,
 * clipboard, status bar text, commands run) and answers prompts from queues the test fills.
 */

import * as fs from "node:fs";
import Module = require("node:module");

type Listener<T> = (value: T) => unknown;

export class EventEmitter<T> {
  private listeners: Listener<T>[] = [];
  event = (listener: Listener<T>) => {
    this.listeners.push(listener);
    return { dispose: () => (this.listeners = this.listeners.filter((l) => l !== listener)) };
  };
  fire(value: T): void {
    for (const listener of [...this.listeners]) {
      listener(value);
    }
  }
}

export class Position {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}
}

export class Range {
  readonly start: Position;
  readonly end: Position;
  constructor(a: number | Position, b: number | Position, c?: number, d?: number) {
    if (typeof a === "number") {
      this.start = new Position(a, b as number);
      this.end = new Position(c as number, d as number);
    } else {
      this.start = a;
      this.end = b as Position;
    }
  }
}

export class Selection extends Range {
  get anchor(): Position {
    return this.start;
  }
  get active(): Position {
    return this.end;
  }
}

export class ThemeColor {
  constructor(readonly id: string) {}
}

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly fsPath: string,
  ) {}
  static file(path: string): Uri {
    return new Uri("file", path);
  }
  get path(): string {
    return this.fsPath;
  }
  toString(): string {
    return `file://${this.fsPath}`;
  }
}

export class FakeDocument {
  readonly lines: string[];
  constructor(
    readonly uri: Uri,
    text: string,
  ) {
    this.lines = text.split("\n");
  }
  get lineCount(): number {
    return this.lines.length;
  }
  lineAt(line: number) {
    const text = this.lines[line];
    return { text, range: new Range(line, 0, line, text.length) };
  }
  getText(range?: Range): string {
    if (!range) {
      return this.lines.join("\n");
    }
    const lines = this.lines.slice(range.start.line, range.end.line + 1);
    if (lines.length === 1) {
      return lines[0].slice(range.start.character, range.end.character);
    }
    lines[0] = lines[0].slice(range.start.character);
    lines[lines.length - 1] = lines[lines.length - 1].slice(0, range.end.character);
    return lines.join("\n");
  }
  getWordRangeAtPosition(position: Position): Range | undefined {
    const text = this.lines[position.line] ?? "";
    for (const found of text.matchAll(/\w+/g)) {
      const start = found.index ?? 0;
      if (start <= position.character && position.character <= start + found[0].length) {
        return new Range(position.line, start, position.line, start + found[0].length);
      }
    }
    return undefined;
  }
}

export class FakeEditor {
  decorations = new Map<unknown, Range[]>();
  revealed: Range[] = [];
  constructor(
    readonly document: FakeDocument,
    public selection: Selection,
  ) {}
  setDecorations(type: unknown, ranges: Range[]): void {
    this.decorations.set(type, ranges);
  }
  revealRange(range: Range): void {
    this.revealed.push(range);
  }
}

export interface QuickPickItem {
  label: string;
  description?: string;
  detail?: string;
  alwaysShow?: boolean;
}

export class FakeQuickPick<T extends QuickPickItem> {
  items: T[] = [];
  selectedItems: T[] = [];
  activeItems: T[] = [];
  busy = false;
  visible = false;
  disposed = false;
  title = "";
  placeholder = "";
  matchOnDescription = true;
  matchOnDetail = true;
  /** As in VS Code (1.77+), true unless set: the rows are re-sorted by how well their labels match the value. */
  sortByLabel = true;
  private currentValue = "";
  private readonly changeValue = new EventEmitter<string>();
  private readonly accept = new EventEmitter<void>();
  private readonly hideEmitter = new EventEmitter<void>();
  onDidChangeValue = this.changeValue.event;
  onDidAccept = this.accept.event;
  onDidHide = this.hideEmitter.event;

  get value(): string {
    return this.currentValue;
  }
  /** As in VS Code, setting the value fires onDidChangeValue. */
  set value(value: string) {
    this.currentValue = value;
    this.changeValue.fire(value);
  }
  /**
   * The rows as VS Code shows them: items that are not `alwaysShow` are filtered by their label, and unless
   * `sortByLabel` is false the rows whose label matches the typed value come first (VS Code ranks them by the
   * quality of the label match; a contiguous, case-insensitive match stands in for it here).
   */
  shown(): T[] {
    const value = this.currentValue.trim().toLowerCase();
    const labelMatches = (item: T) => !!value && item.label.replace(/\$\([^)]*\)\s*/g, "").toLowerCase().includes(value);
    const visible = this.items.filter((item) => item.alwaysShow || !value || labelMatches(item));
    if (!this.sortByLabel || !value) {
      return visible;
    }
    return [...visible.filter(labelMatches), ...visible.filter((item) => !labelMatches(item))];
  }
  /** The user types: the value changes to `value`. */
  type(value: string): void {
    this.value = value;
  }
  /** The user picks `item`. */
  pick(item: T): void {
    this.selectedItems = [item];
    this.activeItems = [item];
    this.accept.fire();
  }
  show(): void {
    this.visible = true;
  }
  hide(): void {
    if (this.visible) {
      this.visible = false;
      this.hideEmitter.fire();
    }
  }
  dispose(): void {
    this.disposed = true;
  }
}

export interface Message {
  kind: "info" | "warning" | "error";
  text: string;
  items: string[];
}

export class FakeStatusBarItem {
  /** Every text the item showed, in order. */
  texts: string[] = [];
  private currentText = "";
  get text(): string {
    return this.currentText;
  }
  set text(text: string) {
    this.currentText = text;
    this.texts.push(text);
  }
  tooltip: unknown = "";
  name = "";
  command: unknown;
  backgroundColor: ThemeColor | undefined;
  visible = false;
  show(): void {
    this.visible = true;
  }
  hide(): void {
    this.visible = false;
  }
  dispose(): void {
    this.visible = false;
  }
}

/** The fake module plus what it recorded. */
export class VscodeStub {
  readonly __esModule = true;
  readonly EventEmitter = EventEmitter;
  readonly Position = Position;
  readonly Range = Range;
  readonly Selection = Selection;
  readonly ThemeColor = ThemeColor;
  readonly Uri = Uri;
  readonly StatusBarAlignment = { Left: 1, Right: 2 };
  readonly ProgressLocation = { SourceControl: 1, Window: 10, Notification: 15 };
  readonly TextEditorRevealType = { Default: 0, InCenter: 1, InCenterIfOutsideViewport: 2, AtTop: 3 };
  readonly Disposable = class {
    constructor(private readonly callOnDispose: () => void) {}
    dispose(): void {
      this.callOnDispose();
    }
  };

  // What the extension did.
  messages: Message[] = [];
  editors: FakeEditor[] = [];
  quickPicks: FakeQuickPick<QuickPickItem>[] = [];
  statusBarItems: FakeStatusBarItem[] = [];
  output: string[] = [];
  clipboard = "";
  executed: { command: string; args: unknown[] }[] = [];
  commandHandlers = new Map<string, (...args: unknown[]) => unknown>();
  inputBoxes: Record<string, unknown>[] = [];
  /** Every setting read, as "section.key". */
  configReads = new Set<string>();

  // What the "user" answers.
  /** The user's settings ("section.key": value), as in User settings. */
  config: Record<string, unknown> = {};
  /**
   * A remote window (Remote-SSH, WSL, a container, code-server): as VS Code does, User settings of `machine` and
   * `machine-overridable` scope (package.json's contributes.configuration) are not applied there.
   */
  remoteWindow = false;
  workspaceFolders: { uri: Uri; name: string; index: number }[] | undefined = undefined;
  /** Decides which button a message gets clicked (undefined: dismissed). */
  answerMessage: (message: Message) => string | undefined = () => undefined;
  inputAnswers: (string | undefined)[] = [];
  activeTextEditor: FakeEditor | undefined = undefined;
  /** The folder the user picks when asked which one (undefined: dismissed). */
  folderPickAnswer: string | undefined = undefined;
  folderPicks = 0;

  private readonly selectionChanged = new EventEmitter<{ textEditor: FakeEditor }>();
  private readonly configurationChanged = new EventEmitter<{ affectsConfiguration(section: string): boolean }>();
  private readonly saved = new EventEmitter<unknown>();
  private readonly foldersChanged = new EventEmitter<unknown>();

  readonly window = {
    createOutputChannel: (name: string) => ({
      name,
      appendLine: (line: string) => this.output.push(line),
      append: (text: string) => this.output.push(text),
      show: () => undefined,
      clear: () => (this.output = []),
      dispose: () => undefined,
    }),
    createStatusBarItem: () => {
      const item = new FakeStatusBarItem();
      this.statusBarItems.push(item);
      return item;
    },
    createTextEditorDecorationType: (options: unknown) => ({ key: `decoration-${Math.random()}`, options, dispose: () => undefined }),
    showInformationMessage: (text: string, ...items: string[]) => this.message("info", text, items),
    showWarningMessage: (text: string, ...items: string[]) => this.message("warning", text, items),
    showErrorMessage: (text: string, ...items: string[]) => this.message("error", text, items),
    showInputBox: async (options: Record<string, unknown>) => {
      this.inputBoxes.push(options);
      return this.inputAnswers.shift();
    },
    createQuickPick: () => {
      const pick = new FakeQuickPick<QuickPickItem>();
      this.quickPicks.push(pick);
      return pick;
    },
    showTextDocument: async (document: FakeDocument, options?: { selection?: Selection }) => {
      const editor = new FakeEditor(document, options?.selection ?? new Selection(0, 0, 0, 0));
      this.editors.push(editor);
      this.activeTextEditor = editor;
      return editor;
    },
    withProgress: async <R>(
      _options: unknown,
      task: (progress: { report(value: unknown): void }, token: { isCancellationRequested: boolean }) => Promise<R>,
    ) => task({ report: () => undefined }, { isCancellationRequested: false }),
    onDidChangeTextEditorSelection: this.selectionChanged.event,
    showWorkspaceFolderPick: async () => {
      this.folderPicks++;
      return (this.workspaceFolders ?? []).find((f) => f.uri.fsPath === this.folderPickAnswer);
    },
  };

  readonly workspace = {
    getConfiguration: (section: string) => ({
      get: <T>(key: string, fallback?: T): T | undefined => {
        const name = `${section}.${key}`;
        this.configReads.add(name);
        const machineScoped = ["machine", "machine-overridable"].includes(settingScope(name));
        return name in this.config && !(this.remoteWindow && machineScoped) ? (this.config[name] as T) : fallback;
      },
    }),
    openTextDocument: async (uri: Uri) => new FakeDocument(uri, await fs.promises.readFile(uri.fsPath, "utf8")),
    onDidChangeConfiguration: this.configurationChanged.event,
    onDidSaveTextDocument: this.saved.event,
    onDidChangeWorkspaceFolders: this.foldersChanged.event,
  };

  readonly commands = {
    registerCommand: (command: string, handler: (...args: unknown[]) => unknown) => {
      this.commandHandlers.set(command, handler);
      return { dispose: () => this.commandHandlers.delete(command) };
    },
    executeCommand: async (command: string, ...args: unknown[]) => {
      this.executed.push({ command, args });
      return this.commandHandlers.get(command)?.(...args);
    },
  };

  readonly env = {
    clipboard: {
      writeText: async (text: string) => {
        this.clipboard = text;
      },
      readText: async () => this.clipboard,
    },
  };

  constructor() {
    // `vscode.workspace.workspaceFolders` and `vscode.window.activeTextEditor` read the stub's current values.
    Object.defineProperty(this.workspace, "workspaceFolders", { get: () => this.workspaceFolders, enumerable: true });
    Object.defineProperty(this.window, "activeTextEditor", { get: () => this.activeTextEditor, enumerable: true });
  }

  /** Forget everything recorded and every answer set. */
  reset(): void {
    this.messages = [];
    this.editors = [];
    this.quickPicks = [];
    this.statusBarItems = [];
    this.output = [];
    this.clipboard = "";
    this.executed = [];
    this.commandHandlers.clear();
    this.inputBoxes = [];
    this.configReads.clear();
    this.config = {};
    this.remoteWindow = false;
    this.workspaceFolders = undefined;
    this.answerMessage = () => undefined;
    this.inputAnswers = [];
    this.activeTextEditor = undefined;
    this.folderPickAnswer = undefined;
    this.folderPicks = 0;
  }

  /** The user adds or removes workspace folders. */
  setWorkspaceFolders(paths: string[]): void {
    this.workspaceFolders = paths.map((p, index) => ({ uri: Uri.file(p), name: p.split("/").pop() ?? p, index }));
    this.foldersChanged.fire({});
  }

  /** The user saves a file. */
  save(): void {
    this.saved.fire({});
  }

  /** The status bar items still shown. */
  get shownStatusBarItems(): FakeStatusBarItem[] {
    return this.statusBarItems.filter((item) => item.visible);
  }

  /** The user moves the cursor in `editor`. */
  moveSelection(editor: FakeEditor, selection: Selection): void {
    editor.selection = selection;
    this.selectionChanged.fire({ textEditor: editor });
  }

  /** The user changes a setting. */
  changeConfiguration(key: string, value: unknown): void {
    this.config[key] = value;
    this.configurationChanged.fire({ affectsConfiguration: (section) => key.startsWith(section) });
  }

  get statusBar(): FakeStatusBarItem {
    return this.statusBarItems[this.statusBarItems.length - 1];
  }

  private async message(kind: Message["kind"], text: string, items: string[]): Promise<string | undefined> {
    const message = { kind, text, items };
    this.messages.push(message);
    return this.answerMessage(message);
  }
}

/** A setting's scope as the extension's package.json declares it (VS Code's default: "window"). */
function settingScope(name: string): string {
  const manifest = JSON.parse(fs.readFileSync(`${__dirname}/../../package.json`, "utf8"));
  return manifest.contributes?.configuration?.properties?.[name]?.scope ?? "window";
}

let installed: VscodeStub | null = null;

/** Make `require("vscode")` return the shared stub; returns it. */
export function installVscodeStub(): VscodeStub {
  if (installed) {
    return installed;
  }
  const stub = new VscodeStub();
  const mod = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
  const original = mod._load;
  mod._load = function (request: string, ...rest: unknown[]) {
    return request === "vscode" ? stub : original.call(this, request, ...rest);
  };
  installed = stub;
  return stub;
}
