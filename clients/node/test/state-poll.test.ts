// StatePoller against a real makad: conditional reads, a change seen on the next poll.

import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { MakaClient, StatePoller } from "../src/index.js";
import { Daemon } from "./helpers/daemon.js";

let daemon: Daemon;
let client: MakaClient;

before(async () => {
  daemon = await Daemon.start();
  client = new MakaClient({ socketPath: daemon.socketPath });
});

after(async () => {
  await client.close();
  await daemon.dispose();
});

describe("StatePoller", () => {
  it("answers unchanged polls with notModified and sees an edit on the next poll", async () => {
    const workspace = join(daemon.root, "poll-ws");
    mkdirSync(join(workspace, "memory"), { recursive: true });
    writeFileSync(join(workspace, "memory", "MEMORY.md"), "# Maka Memory\n\n## First\n\nOne fact.\n");
    const poller = new StatePoller(client, { workspace, includeEntries: true, includeContent: false });
    assert.equal(await poller.poll(), true);
    const first = poller.state!;
    assert.equal(first.entryCount, 1);
    assert.equal(first.content, undefined); // includeContent: false
    assert.equal(await poller.poll(), false);
    assert.equal(poller.state, first);
    const raw = await client.call("read_state", { workspace, ifRevision: first.revision });
    assert.deepEqual(raw, { notModified: true, revision: first.revision });
    await client.call("add_entry", { workspace, title: "Second", content: "Another fact." });
    assert.equal(await poller.poll(), true);
    assert.equal(poller.state!.entryCount, 2);
    assert.ok(poller.state!.revision > first.revision);
  });
});
