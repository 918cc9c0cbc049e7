/** The CLI wrapper against a fake `localidx` executable, and a missing one. */

import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, it } from "node:test";

import { Cli, expandHome } from "../src/daemon";
import { CliError, NotInstalledError } from "../src/errors";
import { FakeCli } from "./helpers";

describe("Cli", () => {
  const fake = new FakeCli({ running: false, socket: "/tmp/x.sock", log: "/tmp/x.log", indexState: "READY", version: "1.2.3" });
  after(() => fake.remove());

  it("says clearly that localidx is not installed when the executable is missing (spawn ENOENT)", async () => {
    const cli = new Cli({ executable: "/nonexistent/bin/localidx", cwd: os.tmpdir() });
    await assert.rejects(cli.status(), (err: unknown) => {
      assert.ok(err instanceof NotInstalledError);
      assert.match(err.message, /localidx is not installed/);
      assert.match(err.message, /localidx\.executablePath/);
      assert.match(err.message, /\/nonexistent\/bin\/localidx/);
      return true;
    });
    const onPath = new Cli({ executable: "localidx-surely-not-installed", cwd: os.tmpdir(), env: { PATH: "/nonexistent" } });
    await assert.rejects(onPath.version(), NotInstalledError);
  });

  it("reads `daemon status --json` even though it exits 1 when no daemon runs", async () => {
    const status = await new Cli({ executable: fake.executable, cwd: os.tmpdir() }).status();
    assert.equal(status.running, false);
    assert.equal(status.socket, "/tmp/x.sock");
    assert.equal(status.log, "/tmp/x.log");
  });

  it("runs the daemon commands in the workspace folder and reads the version", async () => {
    const logged: string[] = [];
    const before = fake.calls().length;
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), "lxv-folder-"));
    const cli = new Cli({ executable: fake.executable, cwd: folder, log: (line) => logged.push(line) });
    assert.equal(await cli.version(), "1.2.3");
    await cli.start();
    assert.equal((await cli.status()).running, true);
    await cli.stop();
    assert.equal((await cli.indexStatus()).state, "READY");
    assert.deepEqual(fake.calls().slice(before), ["--version", "daemon start", "daemon status --json", "daemon stop", "status --json --no-daemon"]);
    assert.equal(fs.realpathSync(fake.lastCwd()), fs.realpathSync(folder));
    fs.rmSync(folder, { recursive: true });
    assert.ok(logged.includes(`$ ${fake.executable} daemon start`), "each command line goes to the output channel");
  });

  it("turns a failing command into a CliError carrying its last line of stderr", async () => {
    fake.setState({ ...fake.state(), startError: "the daemon did not start: no space left" });
    await assert.rejects(new Cli({ executable: fake.executable, cwd: os.tmpdir() }).start(), (err: unknown) => {
      assert.ok(err instanceof CliError);
      assert.equal(err.message, "the daemon did not start: no space left");
      assert.equal(err.exitCode, 1);
      return true;
    });
  });

  it("expands ~/ in the executable path and falls back to `localidx` when the setting is empty", () => {
    assert.equal(expandHome("~/bin/localidx"), path.join(os.homedir(), "bin/localidx"));
    assert.equal(expandHome("/usr/bin/localidx"), "/usr/bin/localidx");
    assert.equal(new Cli({ executable: "  ", cwd: "/" }).executable, "localidx");
  });
});
