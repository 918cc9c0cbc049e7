/** Search UI logic: debouncing, newest-answer-wins, item formatting, stale marking, and opening a pick. */

import { installVscodeStub } from "./vscode-stub";
const stub = installVscodeStub();

import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";

import { ResponseError } from "../src/errors";
import { Match } from "../src/protocol";
import { LiveSearch, SearchUpdate, debounce, errorItem, lineSpan, location, snippet, toItem } from "../src/search";
import { openMatch } from "../src/searchPick";
import { Selection } from "./vscode-stub";

function match(extra: Partial<Match> = {}): Match {
  return {
    path: "src/auth.py",
    start_line: 10,
    end_line: 14,
    symbol: "verify_token",
    kind: "function",
    language: "python",
    score: 0.9,
    stale: false,
    text: "def verify_token(tok):\n    \"\"\"Check a token.\"\"\"\n    return tok == SECRET",
    ...extra,
  };
}

describe("debounce", () => {
  it("coalesces a burst of calls into one call with the last arguments", (t) => {
    t.mock.timers.enable({ apis: ["setTimeout"] });
    const calls: string[] = [];
    const debounced = debounce((q: string) => calls.push(q), 200);
    debounced("v");
    t.mock.timers.tick(100);
    debounced("ve");
    t.mock.timers.tick(100);
    debounced("ver");
    t.mock.timers.tick(199);
    assert.deepEqual(calls, []);
    t.mock.timers.tick(1);
    assert.deepEqual(calls, ["ver"]);
    debounced("x");
    debounced.cancel();
    t.mock.timers.tick(1000);
    assert.deepEqual(calls, ["ver"]);
  });
});

describe("LiveSearch", () => {
  it("sends one search per pause in typing, and none for the same query twice", async (t) => {
    t.mock.timers.enable({ apis: ["setTimeout"] });
    const sent: string[] = [];
    const live = new LiveSearch(async (q) => (sent.push(q), []), () => undefined, 250);
    for (const prefix of ["v", "ve", "ver", "veri"]) {
      live.type(prefix);
      t.mock.timers.tick(50);
    }
    t.mock.timers.tick(250);
    live.type("veri");
    t.mock.timers.tick(500);
    assert.deepEqual(sent, ["veri"]);
  });

  it("shows only the newest query's answer when an older one arrives late", async () => {
    const resolvers = new Map<string, (m: Match[]) => void>();
    const shown: SearchUpdate[] = [];
    const live = new LiveSearch((q) => new Promise((resolve) => resolvers.set(q, resolve)), (u) => shown.push(u), 0);
    const slow = live.now("verify");
    const fast = live.now("verify token");
    resolvers.get("verify token")!([match({ symbol: "new" })]);
    await fast;
    resolvers.get("verify")!([match({ symbol: "old" })]);
    await slow;
    const answers = shown.filter((u) => u.matches);
    assert.equal(answers.length, 1);
    assert.equal(answers[0].query, "verify token");
    assert.equal(answers[0].matches![0].symbol, "new");
  });

  it("reports a failed search as an error update, and clears the list for an empty query", async () => {
    const shown: SearchUpdate[] = [];
    const live = new LiveSearch(async () => Promise.reject(new Error("boom")), (u) => shown.push(u), 0);
    await live.now("x");
    assert.equal((shown.at(-1)!.error as Error).message, "boom");
    live.type("   ");
    assert.deepEqual(shown.at(-1), { query: "   ", busy: false, matches: [] });
  });
});

describe("quick pick items", () => {
  it("show the symbol, path:lines and a one-line snippet, and are never filtered by the quick pick", () => {
    const item = toItem(match());
    assert.equal(item.label, "$(symbol-function) verify_token");
    assert.equal(item.description, "src/auth.py:10-14");
    assert.equal(item.detail, 'def verify_token(tok): """Check a token.""" return tok == SECRET');
    assert.equal(item.alwaysShow, true);
    assert.equal(location(match({ start_line: 3, end_line: 3 })), "src/auth.py:3");
  });

  it("show the signature once: from the signature on when the text holds it, before the text when it does not", () => {
    const method = match({ signature: "def login(self, user, token)", text: "    def login(self, user, token):\n        return user" });
    assert.equal(toItem(method).detail, "def login(self, user, token): return user");
    const withDocstring = match({
      signature: "def verify_token(token, secret)",
      text: '"""Authentication helpers."""\n\n\ndef verify_token(token, secret):\n    return token == secret',
    });
    assert.equal(toItem(withDocstring).detail, "def verify_token(token, secret): return token == secret");
    const elsewhere = match({ signature: "verify_token(tok)", text: "return tok == SECRET" });
    assert.equal(toItem(elsewhere).detail, "verify_token(tok) · return tok == SECRET");
  });

  it("mark stale matches, and only those", () => {
    assert.match(toItem(match({ stale: true })).description!, /\$\(warning\) stale/);
    assert.doesNotMatch(toItem(match({ stale: false })).description!, /stale/);
  });

  it("fall back to the title or file name when a chunk has no symbol, and cut long snippets", () => {
    assert.equal(toItem(match({ symbol: "", title: "README intro", kind: "section" })).label, "$(symbol-key) README intro");
    assert.equal(toItem(match({ symbol: "", title: undefined, kind: "weird" })).label, "$(symbol-misc) auth.py");
    const long = snippet("x".repeat(500));
    assert.equal(long.length, 160);
    assert.ok(long.endsWith("…"));
  });

  it("turn 'not indexed' into an item that offers to index", () => {
    const item = errorItem(new ResponseError({ code: 1001, message: "nothing indexed" }));
    assert.equal(item.action, "reindex");
    assert.match(item.label, /not indexed/);
    assert.equal(errorItem(new Error("daemon gone")).action, "logs");
  });
});

describe("openMatch", () => {
  let dir: string;
  beforeEach(() => {
    stub.reset();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "lxv-open-"));
    fs.mkdirSync(path.join(dir, "src"));
    const lines = Array.from({ length: 20 }, (_, i) => `line ${i + 1}${"!".repeat(i)}`);
    fs.writeFileSync(path.join(dir, "src", "auth.py"), lines.join("\n"));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("opens the file under the work tree with the match's lines selected, revealed and highlighted", async () => {
    const highlight = stub.window.createTextEditorDecorationType({});
    await openMatch(dir, match(), highlight as never);
    const editor = stub.editors[0];
    assert.equal(editor.document.uri.fsPath, path.join(dir, "src", "auth.py"));
    const { start, end } = editor.selection;
    assert.deepEqual([start.line, start.character, end.line, end.character], [9, 0, 13, "line 14".length + 13]);
    assert.equal(editor.revealed.length, 1);
    assert.equal(editor.decorations.get(highlight)!.length, 1);
    stub.moveSelection(editor as never, new Selection(0, 0, 0, 0));
    assert.equal(editor.decorations.get(highlight)!.length, 0, "the highlight goes once the user moves on");
  });

  it("clamps a match beyond the end of a file that shrank since it was indexed", () => {
    assert.deepEqual(lineSpan(match({ start_line: 30, end_line: 40 }), 20), { start: 19, end: 19 });
    assert.deepEqual(lineSpan(match({ start_line: 5, end_line: 40 }), 20), { start: 4, end: 19 });
  });
});
