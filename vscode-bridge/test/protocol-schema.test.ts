/**
 * The TypeScript protocol constants against `localidx protocol schema`, the daemon's own description: method
 * names, each method's parameter names and required list, the search modes, the error codes, the protocol version
 * and the frame limit. If localidx/protocol.py changes, this fails until src/protocol.ts follows.
 */

import * as assert from "node:assert/strict";
import * as os from "node:os";
import { describe, it } from "node:test";

import { Cli } from "../src/daemon";
import { ErrorCode, MAX_FRAME_BYTES, MAX_QUERY_CHARS, METHODS, PROTOCOL_VERSION, SEARCH_MODES } from "../src/protocol";
import { NO_LOCALIDX, findLocalidx } from "./helpers";

interface ParamsSchema {
  properties?: Record<string, { enum?: string[] }>;
  required?: string[];
}

interface Schema {
  protocol_version: number;
  max_frame_bytes: number;
  max_query_chars: number;
  errors: Record<string, string>;
  methods: Record<string, { params: ParamsSchema }>;
  reserved_methods: string[];
}

const executable = findLocalidx();

describe("src/protocol.ts matches `localidx protocol schema`", { skip: executable ? false : NO_LOCALIDX }, () => {
  let schema: Schema;
  const load = async () => (schema ??= (await new Cli({ executable: executable!, cwd: os.tmpdir() }).schema()) as unknown as Schema);

  it("has the same protocol version, frame limit and query limit", async () => {
    await load();
    assert.equal(PROTOCOL_VERSION, schema.protocol_version);
    assert.equal(MAX_FRAME_BYTES, schema.max_frame_bytes);
    assert.equal(MAX_QUERY_CHARS, schema.max_query_chars);
  });

  it("has the same method names", async () => {
    await load();
    assert.deepEqual(Object.keys(METHODS).sort(), Object.keys(schema.methods).sort());
  });

  it("has the same parameter names and required parameters for every method", async () => {
    await load();
    for (const [name, spec] of Object.entries(schema.methods)) {
      const ours = METHODS[name as keyof typeof METHODS];
      assert.deepEqual([...ours.params].sort(), Object.keys(spec.params.properties ?? {}).sort(), `${name} params`);
      assert.deepEqual([...ours.required].sort(), [...(spec.params.required ?? [])].sort(), `${name} required`);
    }
  });

  it("has the same search modes", async () => {
    await load();
    assert.deepEqual([...SEARCH_MODES].sort(), [...(schema.methods["search/query"].params.properties?.mode?.enum ?? [])].sort());
  });

  it("has the same error codes", async () => {
    await load();
    assert.deepEqual(
      Object.values(ErrorCode).sort((a, b) => a - b),
      Object.keys(schema.errors).map(Number).sort((a, b) => a - b),
    );
    assert.equal(schema.errors[String(ErrorCode.INDEX_NOT_READY)], "index not ready");
    assert.equal(schema.errors[String(ErrorCode.VERSION_MISMATCH)], "version mismatch");
  });
});
