// StatePoller: poll a workspace's memory state cheaply with conditional reads.

import type { CallOptions, MakaClient } from "./client.js";
import type { LocalMemoryState, ParamsOf } from "./generated.js";

/**
 * Each poll after the first asks `read_state` with `ifRevision` (the revision of the state
 * last seen): while nothing in MEMORY.md, PENDING.md or the settings changed, the daemon
 * answers `{notModified: true, revision}` instead of the whole file.
 *
 * ```ts
 * const poller = new StatePoller(client, { workspace, includeEntries: true });
 * if (await poller.poll()) render(poller.state!);
 * ```
 */
export class StatePoller {
  /** The latest full state (undefined before the first poll). */
  state: LocalMemoryState | undefined;

  constructor(
    readonly client: MakaClient,
    readonly params: Omit<ParamsOf<"read_state">, "ifRevision">,
  ) {}

  /** True when the state changed since the last poll (always on the first). */
  async poll(options?: CallOptions): Promise<boolean> {
    const params =
      this.state === undefined ? this.params : { ...this.params, ifRevision: this.state.revision };
    const reply = await this.client.call("read_state", params, options);
    if ("notModified" in reply && this.state !== undefined) return false;
    if ("notModified" in reply) throw new Error("notModified without an earlier state");
    this.state = reply;
    return true;
  }
}
