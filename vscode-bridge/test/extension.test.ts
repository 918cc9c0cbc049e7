/**
 * The extension as VS Code runs it, against the stubbed `vscode` module, a fake daemon on a real socket and a fake
 * `localidx` executable: activation, the commands, the status bar, and the messages for the failures a user meets.
 */

import { FakeEditor, FakeDocument, Selection, Uri, installVscodeStub } from "./vscode-stub";
const stub = installVscodeStub();

import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";

import { Api, activate } from "../src/extension";
import { ErrorCode, Match } from "../src/protocol";
import type { MatchItem } from "../src/search";
import { Answer, FakeCli, FakeCliState, FakeDaemon, HELLO, indexStatus, progress, sleep, waitFor } from "./helpers";

const PACKAGE = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8"));

function match(extra: Partial<Match> = {}): Match {
  return {
    path: "src/auth.py",
    start_line: 2,
    end_line: 4,
    symbol: "verify_token",
    kind: "function",
    language: "python",
    score: 1,
    stale: false,
    text: "def verify_token(tok):\n    return tok == SECRET",
    ...extra,
  };
}

describe("extension", () => {
  let folder: string;
  let daemon: FakeDaemon;
  let cli: FakeCli;
  let subscriptions: { dispose(): unknown }[];
  let api: Api;

  async function start(state: Partial<FakeCliState> = {}, config: Record<string, unknown> = {}): Promise<Api> {
    cli.setState({ ...cli.state(), ...state });
    stub.config = { "localidx.executablePath": cli.executable, ...config };
    api = activate({ subscriptions } as never);
    await api.ready;
    return api;
  }

  function quickPick() {
    return stub.quickPicks[stub.quickPicks.length - 1];
  }

  beforeEach(async () => {
    stub.reset();
    folder = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "lxv-ws-")));
    fs.mkdirSync(path.join(folder, "src"));
    fs.writeFileSync(path.join(folder, "src", "auth.py"), "import os\ndef verify_token(tok):\n    return tok == SECRET\n\nx = 1\n");
    fs.writeFileSync(path.join(folder, "daemon.log"), "started\nlistening\n");
    stub.workspaceFolders = [{ uri: Uri.file(folder), name: "ws", index: 0 }];
    daemon = new FakeDaemon({
      "daemon/hello": () => ({
        result: { ...HELLO, root: folder, daemon: { ...HELLO.daemon, socket: daemon.socketPath, log: path.join(folder, "daemon.log") } },
      }),
      "search/query": () => ({ result: { matches: [match(), match({ path: "src/old.py", symbol: "old", stale: true })] } }),
      "index/reindex": () => ({ result: { queued: -1, full: true } }),
    });
    await daemon.listen();
    cli = new FakeCli({ running: true, socket: daemon.socketPath, log: path.join(folder, "daemon.log"), indexState: "READY", version: "0.1.0" });
    subscriptions = [];
  });

  afterEach(async () => {
    for (const subscription of subscriptions) {
      subscription.dispose();
    }
    await daemon.close();
    cli.remove();
    fs.rmSync(folder, { recursive: true, force: true });
  });

  it("registers exactly the commands package.json contributes, and reads exactly its settings", async () => {
    await start();
    const contributed = PACKAGE.contributes.commands.map((c: { command: string }) => c.command).sort();
    assert.deepEqual([...stub.commandHandlers.keys()].sort(), contributed);
    assert.deepEqual(
      PACKAGE.contributes.commands.map((c: { category: string; title: string }) => `${c.category}: ${c.title}`),
      [
        "localidx: Search",
        "localidx: Search Selection",
        "localidx: Copy Context for Question",
        "localidx: Re-index",
        "localidx: Show Status",
        "localidx: Restart Daemon",
        "localidx: Show Logs",
      ],
    );
    assert.deepEqual([...stub.configReads].sort(), Object.keys(PACKAGE.contributes.configuration.properties).sort());
    assert.ok(PACKAGE.activationEvents.includes("workspaceContains:.git"));
    assert.ok(PACKAGE.activationEvents.includes("workspaceContains:.localidx.toml"));
    assert.equal(PACKAGE.engines.vscode, "^1.90.0");
  });

  it("connects at activation with a hello naming the installed version, and shows READY", async () => {
    await start();
    assert.equal(daemon.received[0].method, "daemon/hello");
    assert.deepEqual(daemon.received[0].params, { protocol_version: 2, package_version: "0.1.0", client: "localidx-vscode", max_frame_bytes: 256 * 1024 * 1024 });
    assert.equal(stub.statusBar.text, "$(check) localidx: READY");
    assert.equal(stub.statusBar.command, "localidx.showStatus");
    assert.ok(!cli.calls().includes("daemon start"), "a running daemon is not started again");
  });

  it("searches as you type (debounced), marks stale results, and opens a pick at its lines", async () => {
    await start({}, { "localidx.maxResults": 7 });
    const done = stub.commands.executeCommand("localidx.search") as Promise<FakeEditor | undefined>;
    const pick = quickPick();
    for (const value of ["v", "ve", "ver", "verify"]) {
      pick.type(value); // faster than the debounce: one search, for the last value
    }
    await waitFor(() => pick.items.length > 0, 15_000, "search results");
    const searches = daemon.received.filter((r) => r.method === "search/query");
    assert.deepEqual(
      searches.map((r) => r.params),
      [{ query: "verify", k: 7 }],
    );
    const items = pick.items as MatchItem[];
    assert.equal(items[0].label, "$(symbol-function) verify_token");
    assert.equal(items[0].description, "src/auth.py:2-4");
    assert.doesNotMatch(items[0].description!, /stale/);
    assert.match(items[1].description!, /stale/);
    pick.pick(items[0]);
    const editor = await done;
    assert.ok(editor);
    assert.equal(editor.document.uri.fsPath, path.join(folder, "src", "auth.py"));
    assert.deepEqual([editor.selection.start.line, editor.selection.end.line], [1, 3]);
    assert.equal(pick.visible, false);
    assert.equal([...editor.decorations.values()][0].length, 1, "the picked lines are highlighted");
  });

  it("shows the daemon's ranking as it is: VS Code does not re-sort the rows by their labels", async () => {
    daemon.handlers["search/query"] = () => ({
      result: {
        matches: [
          match({ path: "net/redirects.py", symbol: "follow", start_line: 6, end_line: 12, score: 0.9 }),
          match({ path: "net/errors.py", symbol: "RedirectLimitError", kind: "class", start_line: 1, end_line: 2, score: 0.5 }),
        ],
      },
    });
    await start();
    void stub.commands.executeCommand("localidx.search");
    const pick = quickPick();
    pick.type("redirect");
    await waitFor(() => pick.items.length > 0, 15_000, "search results");
    const shown = pick.shown() as MatchItem[];
    assert.deepEqual(
      shown.map((item) => item.description),
      ["net/redirects.py:6-12", "net/errors.py:1-2"],
      "the first row is the daemon's first match, though another's label matches the query",
    );
    pick.pick(pick.activeItems[0] ?? shown[0]);
  });

  it("searches the selection at once (Search Selection)", async () => {
    await start();
    const text = "x = verify_token(t)\n";
    stub.activeTextEditor = new FakeEditor(new FakeDocument(Uri.file("/f.py"), text), new Selection(0, 4, 0, 16));
    void stub.commands.executeCommand("localidx.searchSelection");
    const pick = quickPick();
    assert.equal(pick.value, "verify_token");
    await waitFor(() => pick.items.length > 0, 15_000, "search results");
    await sleep(400); // past the debounce: setting the value must not search a second time
    assert.deepEqual(
      daemon.received.filter((r) => r.method === "search/query").map((r) => r.params.query),
      ["verify_token"],
    );
    pick.hide();
  });

  it("copies the augmented prompt from context/build, with the configured profile", async () => {
    daemon.handlers["context/build"] = () => ({
      result: { matches: [match()], augmentedPrompt: "PROMPT with code", warnings: ["top_k clamped to 20"], profile: "tight", noResults: false },
    });
    await start({}, { "localidx.profile": "tight" });
    stub.inputAnswers = ["how are tokens verified?"];
    await stub.commands.executeCommand("localidx.copyContext");
    assert.equal(stub.clipboard, "PROMPT with code");
    const request = daemon.received.find((r) => r.method === "context/build");
    assert.deepEqual(request?.params, { query: "how are tokens verified?", profile: "tight" });
    assert.match(stub.messages.at(-1)!.text, /copied the prompt with 1 code excerpts, profile tight/);
    assert.ok(stub.output.some((line) => line.includes("top_k clamped to 20")), "warnings go to the output channel");
  });

  it("says the repository is not indexed (1001) and indexes it when the user picks Index now", async () => {
    daemon.handlers["context/build"] = () => ({ error: { code: ErrorCode.INDEX_NOT_READY, message: "nothing indexed yet" } });
    await start();
    stub.inputAnswers = ["q"];
    stub.answerMessage = (m) => (m.items.includes("Index now") ? "Index now" : undefined);
    await stub.commands.executeCommand("localidx.copyContext");
    const warning = stub.messages.find((m) => m.kind === "warning");
    assert.match(warning!.text, /not indexed yet/);
    assert.ok(stub.executed.some((e) => e.command === "localidx.reindex"));
    const reindex = daemon.received.find((r) => r.method === "index/reindex");
    assert.deepEqual(reindex?.params, { reason: "vscode" });
    assert.equal(stub.clipboard, "");
  });

  it("offers to index from the search list when nothing is indexed", async () => {
    daemon.handlers["search/query"] = () => ({ error: { code: ErrorCode.INDEX_NOT_READY, message: "nothing indexed yet" } });
    await start();
    void stub.commands.executeCommand("localidx.search");
    const pick = quickPick();
    pick.type("anything");
    await waitFor(() => pick.items.length > 0, 15_000, "the error item");
    const item = pick.items[0] as MatchItem;
    assert.equal(item.action, "reindex");
    pick.pick(item);
    await waitFor(() => daemon.methods().includes("index/reindex"), 15_000, "index/reindex");
  });

  it("does not start a daemon (which would index everything) where nothing is indexed; Re-index does", async () => {
    await start({ running: false, indexState: "EMPTY" });
    assert.ok(!cli.calls().includes("daemon start"));
    assert.equal(stub.statusBar.text, "$(circle-slash) localidx: NO INDEX");
    stub.inputAnswers = ["q"];
    await stub.commands.executeCommand("localidx.copyContext");
    assert.match(stub.messages.find((m) => m.kind === "warning")!.text, /not indexed yet/);
    assert.ok(!cli.calls().includes("daemon start"));
    await stub.commands.executeCommand("localidx.reindex");
    assert.deepEqual(
      cli.calls().filter((c) => c === "daemon start"),
      ["daemon start"],
    );
    assert.ok(daemon.methods().includes("index/reindex"));
  });

  it("starts the daemon at activation when an index exists but no daemon runs", async () => {
    await start({ running: false, indexState: "READY" });
    assert.deepEqual(
      cli.calls().filter((c) => c === "daemon start"),
      ["daemon start"],
    );
    assert.equal(stub.statusBar.text, "$(check) localidx: READY");
  });

  it("restarts a daemon of another version once, with `daemon stop` then `daemon start`", async () => {
    let hellos = 0;
    const hello = daemon.handlers["daemon/hello"];
    daemon.handlers["daemon/hello"] = (params, request) =>
      ++hellos === 1
        ? { error: { code: ErrorCode.VERSION_MISMATCH, message: "the daemon runs localidx 0.0.9", data: {} } }
        : hello(params, request);
    await start();
    assert.deepEqual(
      cli.calls().filter((c) => c.startsWith("daemon st") && c !== "daemon status --json"),
      ["daemon stop", "daemon start"],
    );
    assert.equal(stub.statusBar.text, "$(check) localidx: READY");
  });

  it("says clearly that localidx is not installed (a warning, not an error), and offers the setting", async () => {
    stub.answerMessage = (m) => (m.items.includes("Open Settings") ? "Open Settings" : undefined);
    await start({}, { "localidx.executablePath": "/nonexistent/bin/localidx" });
    await waitFor(() => stub.executed.length > 0, 15_000, "Open Settings");
    assert.deepEqual(stub.messages.filter((m) => m.kind === "error"), []);
    const warning = stub.messages.find((m) => m.kind === "warning");
    assert.match(warning!.text, /localidx is not installed/);
    assert.match(warning!.text, /\/nonexistent\/bin\/localidx/);
    assert.deepEqual(stub.executed[0], { command: "workbench.action.openSettings", args: ["localidx.executablePath"] });
    assert.equal(stub.statusBar.text, "$(tools) localidx: NOT INSTALLED");
    assert.match(String(stub.statusBar.tooltip), /not installed/);
    const colour = stub.statusBar.backgroundColor as { id: string } | undefined;
    assert.equal(colour?.id, "statusBarItem.warningBackground");
  });

  it("uses the executable set in User settings in a remote window too (Remote-SSH, WSL, code-server)", async () => {
    stub.remoteWindow = true;
    await start();
    assert.deepEqual(stub.messages, [], "no 'not installed' message");
    assert.equal(stub.statusBar.text, "$(check) localidx: READY");
    assert.ok(cli.calls().includes("--version"), "the configured executable ran");
  });

  it("connects, starting the daemon, as soon as the executable is set after a start without one", async () => {
    await start({ running: false, indexState: "READY" }, { "localidx.executablePath": "/nonexistent/bin/localidx" });
    assert.equal(stub.statusBar.text, "$(tools) localidx: NOT INSTALLED");
    stub.changeConfiguration("localidx.executablePath", cli.executable);
    await waitFor(() => stub.statusBar.text === "$(check) localidx: READY", 15_000, "READY after the setting changed");
    assert.deepEqual(cli.calls().filter((c) => c === "daemon start"), ["daemon start"]);
  });

  it("shows STARTING, never DAEMON DOWN, while the daemon starts at activation", async () => {
    await start({ running: false, indexState: "READY" });
    const texts = stub.statusBar.texts;
    assert.equal(texts[0], "$(loading~spin) localidx: STARTING");
    assert.deepEqual(texts.filter((t) => /DAEMON DOWN|ERROR/.test(t)), [], `the bar showed ${JSON.stringify(texts)}`);
    assert.ok(texts.includes("$(loading~spin) localidx: STARTING"));
    assert.equal(stub.statusBar.text, "$(check) localidx: READY");
    assert.deepEqual(cli.calls().filter((c) => c === "daemon start"), ["daemon start"]);
  });

  it("shows DAEMON DOWN when the daemon goes away, and reconnects after Restart Daemon", async () => {
    await start();
    cli.setState({ ...cli.state(), running: false });
    daemon.dropConnections();
    await sleep(20);
    await api.bridge!.statusBar.refresh();
    assert.equal(stub.statusBar.text, "$(debug-disconnect) localidx: DAEMON DOWN");
    await stub.commands.executeCommand("localidx.restartDaemon");
    assert.ok(cli.calls().includes("daemon start"));
    assert.match(stub.messages.at(-1)!.text, /daemon restarted \(pid 4242\)/);
    assert.equal(stub.statusBar.text, "$(check) localidx: READY");
  });

  it("Show Status writes the report to the output channel and offers the next step", async () => {
    daemon.handlers["index/status"] = () => ({ result: indexStatus("STALE", { changed_files: ["src/auth.py"] }) });
    await start();
    await stub.commands.executeCommand("localidx.showStatus");
    assert.ok(stub.output.includes("  state    STALE"));
    const summary = stub.messages.at(-1)!;
    assert.match(summary.text, /STALE: 1 files changed since indexed/);
    assert.deepEqual(summary.items, ["Re-index"]);
  });

  it("Show Logs opens the daemon's log", async () => {
    await start();
    const log = await stub.commands.executeCommand("localidx.showLogs");
    assert.equal(log, path.join(folder, "daemon.log"));
    assert.equal(stub.editors.at(-1)!.document.uri.fsPath, path.join(folder, "daemon.log"));
  });

  it("paints from the subscription and never polls while subscribed; an idle stop shows IDLE and stays quiet", async () => {
    await start();
    await waitFor(() => daemon.subscriberCount === 1, 15_000, "the status bar's subscription");
    const polls = () => daemon.received.filter((r) => r.method === "index/status").length;
    const before = polls();
    daemon.notify(progress("INDEXING", { seq: 2, percent: 42 }));
    await waitFor(() => stub.statusBar.text === "$(sync~spin) localidx: INDEXING 42%", 15_000, "INDEXING 42%");
    daemon.notify(progress("READY", { seq: 3 }));
    await waitFor(() => stub.statusBar.text === "$(check) localidx: READY", 15_000, "READY");
    assert.equal(api.bridge!.statusBar.live, true);
    stub.save(); // the daemon watches the work tree: a save needs no look of our own
    await sleep(2_300);
    assert.equal(polls(), before, "no index/status while subscribed");
    daemon.notify(progress("READY", { seq: 4, stopping: "idle for 3600 s" }));
    await sleep(50);
    const calls = cli.calls().length;
    cli.setState({ ...cli.state(), running: false });
    daemon.dropConnections();
    await waitFor(() => stub.statusBar.text === "$(debug-pause) localidx: IDLE", 15_000, "IDLE");
    assert.match(String(stub.statusBar.tooltip), /idle for 3600 s/);
    await sleep(300);
    assert.equal(cli.calls().length, calls, "nothing polls a daemon that stopped because it was idle");
    assert.equal(stub.statusBar.backgroundColor, undefined, "an idle stop is no error");
  });

  it("serves every folder of a multi-root window: a status item each, searches merged, commands per folder", async () => {
    const second = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "lxv-ws2-")));
    fs.mkdirSync(path.join(second, "lib"));
    fs.writeFileSync(path.join(second, "lib", "pay.py"), "def charge(invoice):\n    return invoice.total\n");
    const other: FakeDaemon = new FakeDaemon({
      "daemon/hello": (): Answer => ({ result: { ...HELLO, root: second, pid: 5151, daemon: { ...HELLO.daemon, socket: other.socketPath } } }),
      "search/query": () => ({ result: { matches: [match({ path: "lib/pay.py", symbol: "charge", start_line: 1, end_line: 2, score: 2 })] } }),
      "index/reindex": () => ({ result: { queued: -1, full: true } }),
    });
    await other.listen();
    try {
      stub.workspaceFolders = [
        { uri: Uri.file(folder), name: "ws", index: 0 },
        { uri: Uri.file(second), name: "pay", index: 1 },
      ];
      await start({ folders: { [second]: { socket: other.socketPath } } });
      assert.equal(api.bridges.length, 2);
      const texts = stub.shownStatusBarItems.map((item) => item.text).sort();
      assert.deepEqual(texts, ["$(check) localidx pay: READY", "$(check) localidx ws: READY"]);
      await waitFor(() => daemon.subscriberCount === 1 && other.subscriberCount === 1, 15_000, "a subscription per folder");

      const done = stub.commands.executeCommand("localidx.search") as Promise<FakeEditor | undefined>;
      const pick = quickPick();
      pick.type("charge");
      await waitFor(() => pick.items.length >= 2, 15_000, "merged results");
      const items = pick.items as MatchItem[];
      assert.equal(items[0].description, "pay · lib/pay.py:1-2", "the better score first, labelled with its folder");
      assert.match(items[1].description!, /^ws · src\/auth\.py:2-4/);
      pick.pick(items[0]);
      const editor = await done;
      assert.equal(editor!.document.uri.fsPath, path.join(second, "lib", "pay.py"), "opened in its own folder");

      stub.activeTextEditor = editor; // a command serves the folder of the active editor
      await stub.commands.executeCommand("localidx.reindex");
      assert.ok(other.methods().includes("index/reindex"));
      assert.ok(!daemon.methods().includes("index/reindex"));
      stub.activeTextEditor = undefined; // none: the user picks
      stub.folderPickAnswer = folder;
      await stub.commands.executeCommand("localidx.reindex");
      assert.equal(stub.folderPicks, 1);
      assert.ok(daemon.methods().includes("index/reindex"));
      await stub.commands.executeCommand("localidx.showStatus", second); // a status item passes its folder
      assert.equal(stub.folderPicks, 1);

      stub.setWorkspaceFolders([folder]); // back to one folder: one plain item
      await api.ready;
      assert.equal(api.bridges.length, 1);
      assert.deepEqual(stub.shownStatusBarItems.map((item) => item.text), ["$(check) localidx: READY"]);
    } finally {
      await other.close();
      fs.rmSync(second, { recursive: true, force: true });
    }
  });
});
