/** The socket client against a fake daemon: framing, errors as data, hello, restart-once on mismatch, reconnect. */

import * as assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";

import { CLIENT_NAME, Connection, DaemonClient, DaemonDownError } from "../src/client";
import { DaemonTimeoutError, DaemonUnavailableError, ResponseError } from "../src/errors";
import { CLIENT_MAX_FRAME_BYTES, ErrorCode, MAX_FRAME_BYTES, PROTOCOL_VERSION, ProgressStatus } from "../src/protocol";
import { FakeControl, FakeDaemon, HELLO, progress, waitFor } from "./helpers";

const MISMATCH = {
  error: { code: ErrorCode.VERSION_MISMATCH, message: "the daemon speaks protocol 1, the client 2", data: { protocol_version: 1 } },
};

describe("Connection", () => {
  let daemon: FakeDaemon;
  beforeEach(async () => {
    daemon = new FakeDaemon();
    await daemon.listen();
  });
  afterEach(() => daemon.close());

  it("sends one compact JSON line per request and matches pipelined answers by id", async () => {
    daemon.handlers["search/query"] = (params) => ({ result: { matches: [], echo: params.query } });
    const connection = await Connection.open(daemon.socketPath);
    const answers = await Promise.all([
      connection.request("search/query", { query: "one", k: 3 }),
      connection.request("search/query", { query: "two" }),
    ]);
    assert.deepEqual(
      answers.map((a) => (a as unknown as { echo: string }).echo),
      ["one", "two"],
    );
    assert.deepEqual(daemon.received[0], { id: 1, method: "search/query", params: { query: "one", k: 3 } });
    assert.equal(daemon.received[1].id, 2);
    connection.close();
  });

  it("turns an error response into a ResponseError with the code and data, and keeps the connection", async () => {
    daemon.handlers["search/query"] = () => ({ error: { code: 1002, message: "params.query: must not be empty", data: { x: 1 } } });
    const connection = await Connection.open(daemon.socketPath);
    await assert.rejects(connection.request("search/query", { query: "" }), (err: unknown) => {
      assert.ok(err instanceof ResponseError);
      assert.equal(err.code, ErrorCode.USAGE_ERROR);
      assert.deepEqual(err.data, { x: 1 });
      return true;
    });
    assert.equal(connection.closed, false);
    const status = await connection.request("index/status", {});
    assert.equal(status.state, "READY");
    connection.close();
  });

  it("reads frames split anywhere, even inside a multi-byte character", async () => {
    const text = "é€😀".repeat(20_000); // about 180 KB: arrives in many chunks
    daemon.handlers["search/query"] = () => ({ result: { matches: [{ text }] } });
    const connection = await Connection.open(daemon.socketPath);
    const result = await connection.request("search/query", { query: "x" });
    assert.equal(result.matches[0].text, text);
    connection.close();
  });

  it("rejects with DaemonUnavailableError when nothing listens, and when the daemon drops the connection", async () => {
    await assert.rejects(Connection.open(`${daemon.dir}/nothing.sock`), DaemonUnavailableError);
    daemon.handlers["search/query"] = () => ({ drop: true });
    const connection = await Connection.open(daemon.socketPath);
    await assert.rejects(connection.request("search/query", { query: "x" }), DaemonUnavailableError);
    assert.equal(connection.closed, true);
  });

  it("times out, and closes the connection so that a late answer cannot be taken for the next one", async () => {
    daemon.handlers["search/query"] = () => ({ never: true });
    const connection = await Connection.open(daemon.socketPath);
    await assert.rejects(connection.request("search/query", { query: "x" }, 100), DaemonTimeoutError);
    assert.equal(connection.closed, true);
  });
});

describe("DaemonClient", () => {
  let daemon: FakeDaemon;
  let control: FakeControl;
  let client: DaemonClient;
  beforeEach(async () => {
    daemon = new FakeDaemon();
    await daemon.listen();
    control = new FakeControl(daemon.socketPath);
    client = new DaemonClient({ control });
  });
  afterEach(async () => {
    client.dispose();
    await daemon.close();
  });

  it("says hello first, with the protocol version, the installed package version and its name", async () => {
    const status = await client.request("index/status", { check_work_tree: false });
    assert.equal(status.state, "READY");
    assert.deepEqual(daemon.methods(), ["daemon/hello", "index/status"]);
    assert.deepEqual(daemon.received[0].params, {
      protocol_version: PROTOCOL_VERSION,
      package_version: "0.1.0",
      client: CLIENT_NAME,
      max_frame_bytes: CLIENT_MAX_FRAME_BYTES,
    });
    assert.equal(client.hello?.root, "/repo");
    await client.request("index/status", {});
    assert.deepEqual(daemon.methods(), ["daemon/hello", "index/status", "index/status"], "one hello per connection");
  });

  it("restarts the daemon exactly once on a version mismatch (1003), then retries the hello", async () => {
    let hellos = 0;
    daemon.handlers["daemon/hello"] = () => (++hellos === 1 ? MISMATCH : { result: HELLO });
    await client.request("index/status", {});
    assert.deepEqual(
      control.calls.filter((c) => c === "stop" || c === "start"),
      ["stop", "start"],
    );
    assert.equal(hellos, 2);
  });

  it("restarts only once when the mismatch persists, then gives up with the 1003 error", async () => {
    daemon.handlers["daemon/hello"] = () => MISMATCH;
    await assert.rejects(client.request("index/status", {}), (err: unknown) => {
      assert.ok(err instanceof ResponseError);
      assert.equal(err.code, ErrorCode.VERSION_MISMATCH);
      return true;
    });
    assert.deepEqual(
      control.calls.filter((c) => c === "stop" || c === "start"),
      ["stop", "start"],
    );
    assert.deepEqual(daemon.methods(), ["daemon/hello", "daemon/hello"]);
  });

  it("treats a hello naming another protocol or package version as a mismatch too", async () => {
    let hellos = 0;
    daemon.handlers["daemon/hello"] = () => ({
      result: ++hellos === 1 ? { ...HELLO, protocol_version: 3 } : HELLO,
    });
    await client.connect();
    assert.deepEqual(
      control.calls.filter((c) => c === "stop" || c === "start"),
      ["stop", "start"],
    );
    hellos = 0;
    client.dropConnection();
    control.calls = [];
    daemon.handlers["daemon/hello"] = () => ({ result: ++hellos === 1 ? { ...HELLO, package_version: "0.0.9" } : HELLO });
    await client.connect();
    assert.deepEqual(
      control.calls.filter((c) => c === "stop" || c === "start"),
      ["stop", "start"],
    );
  });

  it("does not start a daemon unless asked, and starts it once when asked", async () => {
    control.running = false;
    await assert.rejects(client.request("index/status", {}, { start: false }), DaemonDownError);
    assert.ok(!control.calls.includes("start"));
    await client.request("index/status", {}, { start: true });
    assert.deepEqual(
      control.calls.filter((c) => c === "start"),
      ["start"],
    );
  });

  it("gives up when the daemon it started still does not listen", async () => {
    control.running = false;
    control.onStart = () => (control.running = false);
    await assert.rejects(client.request("index/status", {}), DaemonDownError);
    assert.deepEqual(
      control.calls.filter((c) => c === "start"),
      ["start"],
    );
  });

  it("reconnects once and resends when the daemon went away between requests (a restart)", async () => {
    await client.request("index/status", {});
    daemon.dropConnections();
    const status = await client.request("index/status", {});
    assert.equal(status.state, "READY");
    assert.deepEqual(daemon.methods(), ["daemon/hello", "index/status", "daemon/hello", "index/status"]);
  });

  it("retries a request that met a daemon shutting down (1004) on a fresh connection", async () => {
    let calls = 0;
    daemon.handlers["search/query"] = () =>
      ++calls === 1 ? { error: { code: ErrorCode.SHUTTING_DOWN, message: "shutting down" } } : { result: { matches: [] } };
    const result = await client.request("search/query", { query: "x" });
    assert.deepEqual(result.matches, []);
    assert.equal(calls, 2);
  });

  it("shares one handshake between concurrent requests", async () => {
    await Promise.all([client.request("index/status", {}), client.request("index/status", {}), client.request("index/status", {})]);
    assert.equal(daemon.methods().filter((m) => m === "daemon/hello").length, 1);
  });

  it("restart() stops, starts and reconnects", async () => {
    await client.connect();
    const hello = await client.restart();
    assert.equal(hello.pid, HELLO.pid);
    assert.deepEqual(
      control.calls.filter((c) => c === "stop" || c === "start"),
      ["stop", "start"],
    );
    assert.equal(client.connected, true);
  });

  it("restarts a daemon too old to know a hello parameter (-32602), like a version mismatch", async () => {
    let hellos = 0;
    daemon.handlers["daemon/hello"] = () =>
      ++hellos === 1 ? { error: { code: ErrorCode.INVALID_PARAMS, message: "params.max_frame_bytes: unknown parameter" } } : { result: HELLO };
    await client.connect();
    assert.deepEqual(
      control.calls.filter((c) => c === "stop" || c === "start"),
      ["stop", "start"],
    );
  });

  it("asks an overloaded daemon again (1005, id null) until it has a free slot", async () => {
    let refusals = 3;
    const hello = daemon.handlers["daemon/hello"];
    daemon.handlers["daemon/hello"] = (params, request) =>
      refusals-- > 0 ? { error: { code: ErrorCode.OVERLOADED, message: "full; try again later" }, id: null } as never : hello(params, request);
    const status = await client.request("index/status", { check_work_tree: false });
    assert.equal(status.state, "READY");
    assert.equal(refusals, -1);
    assert.deepEqual(
      control.calls.filter((c) => c === "stop" || c === "start"),
      [],
      "an overloaded daemon is not restarted",
    );
  });

  it("reads a response larger than the default frame limit once the hello raised it", async () => {
    const text = "x".repeat(3 * MAX_FRAME_BYTES);
    daemon.handlers["search/query"] = () => ({ result: { matches: [{ text }] } });
    const result = await client.request("search/query", { query: "big" });
    assert.equal(result.matches[0].text.length, text.length);
  });

  it("follows the status through a subscription on each connection, and says when one ends", async () => {
    const statuses: ProgressStatus[] = [];
    const ends: (string | undefined)[] = [];
    const watching = client.watch({ status: (s) => statuses.push(s), closed: (_r, stopping) => ends.push(stopping) });
    await client.connect();
    await waitFor(() => statuses.length === 1, 5_000, "the subscription's first status");
    assert.equal(statuses[0].state, "READY");
    daemon.notify(progress("INDEXING", { seq: 2, percent: 10 }));
    daemon.notify(progress("READY", { seq: 3, stopping: "idle for 3600 s" }));
    await waitFor(() => statuses.length === 3, 5_000, "two notifications");
    assert.deepEqual(statuses.map((s) => s.state), ["READY", "INDEXING", "READY"]);
    assert.equal(client.subscribed, true);
    daemon.dropConnections();
    await waitFor(() => ends.length === 1, 5_000, "the end of the connection");
    assert.deepEqual(ends, ["idle for 3600 s"]);
    await client.connect(); // a new connection subscribes again
    await waitFor(() => statuses.length === 4, 5_000, "the new subscription's status");
    assert.equal(daemon.methods().filter((m) => m === "daemon/subscribe").length, 2);
    watching.dispose();
  });
});

describe("modules outside VS Code", () => {
  it("load under plain node: the client, the CLI wrapper, the protocol, and the status and search logic", () => {
    // No stub is installed in this file, and node_modules has no `vscode` package: requiring it would throw.
    for (const name of ["client", "daemon", "protocol", "errors", "status", "search"]) {
      assert.doesNotThrow(() => require(`../src/${name}`), name);
    }
    assert.throws(() => require("vscode"), /Cannot find module 'vscode'/);
  });

});
