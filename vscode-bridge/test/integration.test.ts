/**
 * The extension's client against a real daemon: a temporary git repository is indexed with the fake embedder,
 * `localidx daemon start` serves it, and src/client.ts + src/daemon.ts (no vscode) search it, build context, read
 * its status, survive a restart and replace a daemon of another version. The daemon is stopped afterwards, always.
 *
 * Skipped, with the reason, when no localidx executable is found (see helpers.findLocalidx).
 */

import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";

import { DaemonClient } from "../src/client";
import { Cli } from "../src/daemon";
import { ResponseError } from "../src/errors";
import { ErrorCode } from "../src/protocol";
import { fromIndexStatus, render } from "../src/status";
import { toItem } from "../src/search";
import { NO_LOCALIDX, findLocalidx, waitFor } from "./helpers";

const executable = findLocalidx();

const AUTH_PY = `"""Authentication helpers."""


def verify_token(token, secret):
    """Check that a bearer token matches the shared secret."""
    return token == secret


class Session:
    def login(self, user, token):
        if not verify_token(token, user.secret):
            raise PermissionError("bad token")
        return user
`;

const MATHS_PY = `def add(a, b):
    """Add two numbers."""
    return a + b


def mean(values):
    return sum(values) / len(values)
`;

describe("integration: the client against a real daemon", { skip: executable ? false : NO_LOCALIDX }, () => {
  // Short paths: a Unix socket path must fit in about 100 bytes.
  let tmp: string;
  let repo: string;
  let env: NodeJS.ProcessEnv;
  let cli: Cli;
  let client: DaemonClient;

  before(() => {
    tmp = fs.mkdtempSync("/tmp/lxi-");
    repo = path.join(tmp, "repo");
    fs.mkdirSync(path.join(repo, "pkg"), { recursive: true });
    fs.mkdirSync(path.join(tmp, "run"), { mode: 0o700 });
    fs.writeFileSync(path.join(repo, "pkg", "auth.py"), AUTH_PY);
    fs.writeFileSync(path.join(repo, "pkg", "maths.py"), MATHS_PY);
    env = {
      ...process.env,
      LOCALIDX_EMBED_MODEL: "fake",
      LOCALIDX_HOME: path.join(tmp, "home"),
      LOCALIDX_WATCH: "0",
      XDG_RUNTIME_DIR: path.join(tmp, "run"),
      HF_HUB_OFFLINE: "1",
    };
    delete env.LOCALIDX_SOCK;
    delete env.LOCALIDX_FAKE_VERSION;
    const git = (...args: string[]) => execFileSync("git", args, { cwd: repo, env, stdio: "pipe" });
    git("init", "-q");
    git("add", ".");
    git("-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-q", "-m", "init");
    execFileSync(executable!, ["index"], { cwd: repo, env, stdio: "pipe" });
    cli = new Cli({ executable: executable!, cwd: repo, env });
    client = new DaemonClient({ control: cli, clientName: "localidx-vscode-test" });
  });

  after(() => {
    client?.dispose();
    try {
      execFileSync(executable!, ["daemon", "stop"], { cwd: repo, env, stdio: "pipe", timeout: 60_000 });
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it("reads the index's status without starting a daemon, as the status bar does while none runs", async () => {
    // The CLI starts a daemon by default outside CI; the status bar's refresh must not start again one that stopped.
    const outsideCi = { ...env };
    delete outsideCi.CI;
    delete outsideCi.LOCALIDX_DAEMON;
    const status = await new Cli({ executable: executable!, cwd: repo, env: outsideCi }).indexStatus();
    assert.equal(status.state, "READY");
    for (let i = 0; i < 10; i++) {
      assert.equal((await cli.status()).running, false, "no daemon was started");
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
  });

  it("starts the daemon and finds it through `localidx daemon status --json`", async () => {
    const before = await cli.status();
    assert.equal(before.running, false);
    assert.ok(before.socket.startsWith(path.join(tmp, "run")), before.socket);
    const status = await client.request("index/status", {}, { start: true });
    assert.equal(status.state, "READY");
    assert.equal(status.files, 2);
    assert.equal(client.hello?.protocol_version, 2);
    assert.equal(client.hello?.package_version, await cli.version());
    assert.equal(fs.realpathSync(client.hello!.root), fs.realpathSync(repo));
    const running = await cli.status();
    assert.equal(running.running, true);
    assert.equal(running.socket, before.socket);
    assert.equal(render(fromIndexStatus(status)).text, "$(check) localidx: READY");
  });

  it("reads a repository never indexed as EMPTY (NO INDEX) from `localidx status --json`, whose exit status is 1", async () => {
    const fresh = path.join(tmp, "fresh");
    fs.mkdirSync(fresh);
    fs.writeFileSync(path.join(fresh, "a.py"), "def f():\n    return 1\n");
    const git = (...args: string[]) => execFileSync("git", args, { cwd: fresh, env, stdio: "pipe" });
    git("init", "-q");
    git("add", ".");
    git("-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "-q", "-m", "init");
    const status = await new Cli({ executable: executable!, cwd: fresh, env }).indexStatus();
    assert.equal(status.state, "EMPTY");
    assert.equal(render(fromIndexStatus(status)).text, "$(circle-slash) localidx: NO INDEX");
  });

  it("searches, and the results make quick pick items", async () => {
    const result = await client.request("search/query", { query: "verify token secret", k: 5 });
    assert.ok(result.matches.length > 0);
    const top = result.matches[0];
    assert.equal(top.path, "pkg/auth.py");
    assert.equal(top.symbol, "verify_token");
    assert.equal(top.stale, false);
    assert.ok(top.start_line >= 1 && top.end_line >= top.start_line);
    assert.equal(toItem(top).description, `pkg/auth.py:${top.start_line}-${top.end_line}`);
  });

  it("answers a usage error as data and keeps the connection", async () => {
    await assert.rejects(client.request("search/query", { query: "x", kind: "no-such-kind" }), (err: unknown) => {
      assert.ok(err instanceof ResponseError);
      assert.equal(err.code, ErrorCode.USAGE_ERROR);
      return true;
    });
    assert.equal((await client.request("index/status", { check_work_tree: false })).state, "READY");
  });

  it("builds a context pack with an augmented prompt (context/build)", async (t) => {
    if (!client.hello?.capabilities.includes("context/build")) {
      t.skip("this localidx does not serve context/build yet (localidx/daemon/handlers/context.py)");
      return;
    }
    const result = await client.request("context/build", { query: "how is a bearer token verified?" }, { timeoutMs: 120_000 });
    assert.equal(typeof result.augmentedPrompt, "string");
    assert.ok(result.augmentedPrompt.length > 0);
    assert.ok(Array.isArray(result.matches) && result.matches.length > 0);
    assert.ok(result.matches.some((m) => m.path === "pkg/auth.py"));
    assert.ok(result.augmentedPrompt.includes("verify_token"));
    assert.ok(Array.isArray(result.appliedModules));
    assert.ok(Array.isArray(result.warnings));
  });

  it("marks results stale after an edit, and shows STALE until re-indexed", async () => {
    fs.writeFileSync(path.join(repo, "pkg", "auth.py"), AUTH_PY.replace("return token == secret", "return token is secret"));
    const status = await client.request("index/status", { check_work_tree: true });
    assert.equal(status.state, "STALE");
    assert.deepEqual(status.changed_files, ["pkg/auth.py"]);
    assert.equal(render(fromIndexStatus(status)).text, "$(history) localidx: STALE");
    const stale = (await client.request("search/query", { query: "verify token", k: 5 })).matches.find((m) => m.path === "pkg/auth.py");
    assert.equal(stale?.stale, true);
    await client.request("index/reindex", { paths: ["pkg/auth.py"], reason: "vscode-test", wait: true }, { timeoutMs: 120_000 });
    assert.equal((await client.request("index/status", { check_work_tree: true })).state, "READY");
  });

  it("follows a real daemon's runs through daemon/subscribe, with no polling", async () => {
    const seen: string[] = [];
    const watching = client.watch({ status: (status) => seen.push(status.state), closed: () => undefined });
    try {
      await waitFor(() => seen.length > 0, 15_000, "the subscription's first status");
      assert.equal(seen[0], "READY");
      fs.writeFileSync(path.join(repo, "pkg", "pay.py"), "def charge(invoice):\n    return invoice.total\n");
      await client.request("index/reindex", { paths: ["pkg/pay.py"], reason: "vscode-test", wait: true }, { timeoutMs: 120_000 });
      await waitFor(() => seen.includes("INDEXING") && seen[seen.length - 1] === "READY", 15_000, "INDEXING, then READY");
    } finally {
      watching.dispose();
    }
  });

  it("reconnects after the daemon was restarted behind its back", async () => {
    const firstPid = client.hello!.pid;
    await cli.stop();
    await cli.start();
    const status = await client.request("index/status", { check_work_tree: false });
    assert.equal(status.state, "READY");
    assert.notEqual(client.hello!.pid, firstPid);
  });

  it("replaces a daemon of another version once (1003), then serves", async () => {
    await cli.stop();
    client.dropConnection();
    const other = new Cli({ executable: executable!, cwd: repo, env: { ...env, LOCALIDX_FAKE_VERSION: "0.0.0-other" } });
    await other.start();
    const old = await cli.status();
    assert.equal(old.package_version, "0.0.0-other");
    const stops: string[] = [];
    const counting = new DaemonClient({
      control: {
        status: () => cli.status(),
        version: () => cli.version(),
        start: async () => (stops.push("start"), cli.start()),
        stop: async () => (stops.push("stop"), cli.stop()),
      },
    });
    try {
      const status = await counting.request("index/status", { check_work_tree: false }, { start: false });
      assert.equal(status.state, "READY");
      assert.deepEqual(stops, ["stop", "start"]);
      assert.equal(counting.hello!.package_version, await cli.version());
      assert.notEqual(counting.hello!.pid, old.pid);
    } finally {
      counting.dispose();
    }
  });
});
