/** The status bar: what it shows for each index state and each failure. */

import { installVscodeStub } from "./vscode-stub";
const stub = installVscodeStub();

import * as assert from "node:assert/strict";
import { beforeEach, describe, it } from "node:test";

import { DaemonUnavailableError, NotInstalledError, ResponseError } from "../src/errors";
import { IndexStatusResult } from "../src/protocol";
import { BarState, describe as describeStatus, fromError, fromIndexStatus, fromProgress, idle, pollIntervalMs, render } from "../src/status";
import { StatusBar } from "../src/statusBar";
import { indexStatus, progress } from "./helpers";

const status = (state: string, extra: Record<string, unknown> = {}) =>
  indexStatus(state, extra) as unknown as IndexStatusResult;

const writer = (progress: Record<string, unknown>) => ({
  daemon: {
    pid: 1,
    socket: "/s",
    log: "/l",
    writer: { state: "embed", queued: 0, progress, runs: 1, pending_vectors: 0, last_error: null },
  },
});

describe("status bar text", () => {
  it("names each state", () => {
    assert.equal(render(fromIndexStatus(status("READY"))).text, "$(check) localidx: READY");
    assert.equal(render(fromIndexStatus(status("STALE", { changed_files: ["a.py"] }))).text, "$(history) localidx: STALE");
    assert.equal(render(fromIndexStatus(status("EMPTY"))).text, "$(circle-slash) localidx: NO INDEX");
    assert.equal(render(fromError(new DaemonUnavailableError("no daemon"))).text, "$(debug-disconnect) localidx: DAEMON DOWN");
    assert.equal(render(fromIndexStatus(status("INDEXING", { embedding_progress: 1 }))).text, "$(sync~spin) localidx: INDEXING");
  });

  it("shows indexing progress from the writer's counters, else from the embedded share", () => {
    const running = status("INDEXING", writer({ phase: "embed", done: 30, total: 120 }));
    const state = fromIndexStatus(running);
    assert.equal(render(state).text, "$(sync~spin) localidx: INDEXING 25%");
    assert.match(render(state).tooltip, /embed/);
    const embedding = fromIndexStatus(status("INDEXING", { chunks: 10, chunks_with_vectors: 4, embedding_progress: 0.4 }));
    assert.equal(embedding.percent, 40);
  });

  it("says why in the tooltip, and colours the states that need attention", () => {
    const stale = render(fromIndexStatus(status("STALE", { changed_files: ["a.py", "b.py"], deleted_files: ["c.py"] })));
    assert.match(stale.tooltip, /3 files changed since indexed/);
    assert.equal(render(fromIndexStatus(status("READY"))).background, "none");
    assert.equal(render(fromIndexStatus(status("EMPTY"))).background, "warning");
    assert.equal(render(fromError(new DaemonUnavailableError("x"))).background, "error");
  });

  it("maps failures: not installed is NOT INSTALLED (a warning), unreachable is DAEMON DOWN, 1001 is NO INDEX", () => {
    const notInstalled = fromError(new NotInstalledError("localidx", "not found"));
    assert.equal(notInstalled.kind, "NOT_INSTALLED");
    assert.match(notInstalled.detail, /not installed/);
    assert.equal(render(notInstalled).text, "$(tools) localidx: NOT INSTALLED");
    assert.equal(render(notInstalled).background, "warning");
    assert.equal(fromError(new ResponseError({ code: 1001, message: "nothing indexed" })).kind, "NO_INDEX");
    assert.equal(fromError(new ResponseError({ code: 1004, message: "stopping" })).kind, "DAEMON_DOWN");
    assert.equal(fromError(new ResponseError({ code: -32603, message: "KeyError" })).kind, "ERROR");
  });

  it("polls fast only while indexing, and never once the daemon stopped because it was idle", () => {
    assert.ok(pollIntervalMs("INDEXING")! < pollIntervalMs("READY")!);
    assert.ok(pollIntervalMs("READY")! <= pollIntervalMs("DAEMON_DOWN")!);
    assert.equal(pollIntervalMs("IDLE"), null);
  });

  it("maps a subscription's status, and an idle stop, which is no failure", () => {
    const indexing = fromProgress(progress("INDEXING", { percent: 42, writer: { state: "embed", queued: 0, progress: { phase: "embed" }, runs: 1, pending_vectors: 9, last_error: null } }) as never);
    assert.equal(render(indexing).text, "$(sync~spin) localidx: INDEXING 42%");
    assert.match(indexing.detail, /\(embed\)/);
    assert.equal(render(fromProgress(progress("READY") as never)).text, "$(check) localidx: READY");
    assert.equal(fromProgress(progress("EMPTY") as never).kind, "NO_INDEX");
    assert.equal(fromProgress(progress("STALE", { chunks_with_vectors: 1 }) as never).detail, "3 chunks wait for vectors; 2 files, 4 chunks");
    const stopped = render(idle("idle for 3600 s"));
    assert.equal(stopped.text, "$(debug-pause) localidx: IDLE");
    assert.equal(stopped.background, "none");
    assert.match(stopped.tooltip, /idle for 3600 s.*next search starts it again/);
  });

  it("describes the status for Show Status, daemon included", () => {
    const lines = describeStatus(status("READY", writer({})));
    assert.ok(lines.includes("state    READY"));
    assert.ok(lines.some((l) => l.startsWith("daemon   pid 1")));
    assert.ok(describeStatus(status("EMPTY")).includes("daemon   not running"));
  });
});

describe("StatusBar", () => {
  beforeEach(() => stub.reset());

  it("paints what the probe says, runs Show Status when clicked, and survives a failing probe", async () => {
    let next: () => Promise<BarState> = async () => fromIndexStatus(status("READY"));
    const bar = new StatusBar(() => next(), "localidx.showStatus");
    assert.equal(stub.statusBar.command, "localidx.showStatus");
    assert.equal(stub.statusBar.visible, true);
    await bar.refresh();
    assert.equal(stub.statusBar.text, "$(check) localidx: READY");
    assert.equal(stub.statusBar.backgroundColor, undefined);
    next = async () => {
      throw new DaemonUnavailableError("gone");
    };
    await bar.refresh();
    assert.equal(stub.statusBar.text, "$(debug-disconnect) localidx: DAEMON DOWN");
    const colour = stub.statusBar.backgroundColor as { id: string } | undefined;
    assert.equal(colour?.id, "statusBarItem.errorBackground");
    bar.dispose();
  });
});
