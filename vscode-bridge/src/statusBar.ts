/**
 * The status bar item (the vscode glue over status.ts): paints a BarState and runs `localidx: Show Status` when
 * clicked. While the bridge's connection is subscribed (`live`), states arrive as notifications and nothing polls:
 * an open window never keeps the daemon busy, so it can release its memory and idle out. Without a subscription
 * (no daemon, or one too old to offer it) it polls on a timer, fast while indexing; never once the daemon stopped
 * because it was idle.
 */

import * as vscode from "vscode";

import { BarState, fromError, pollIntervalMs, render, starting } from "./status";

/** The status bar item: paints a BarState, polls `probe` on a timer, runs Show Status when clicked. */
export class StatusBar implements vscode.Disposable {
  readonly item: vscode.StatusBarItem;
  state: BarState = starting();
  private timer: NodeJS.Timeout | null = null;
  private refreshing: Promise<BarState> | null = null;
  private disposed = false;
  /** States arrive from a subscription: no polling. */
  live = false;

  constructor(
    private readonly probe: () => Promise<BarState>,
    command: string | vscode.Command,
    /** Shown before the state when the window has several folders (each has its own item). */
    private readonly label = "",
  ) {
    this.item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 0);
    this.item.name = label ? `localidx (${label})` : "localidx";
    this.item.command = command;
    // Nothing has failed yet: the bridge's start-up decides what comes next.
    this.paint(starting());
    this.item.show();
  }

  /** Paint a state that came from the subscription; stops polling. */
  pushed(state: BarState): void {
    this.live = true;
    this.cancel();
    this.paint(state);
  }

  /** The subscription ended: poll again (unless the daemon stopped because it was idle). */
  unsubscribed(state?: BarState): void {
    this.live = false;
    if (state) {
      this.paint(state);
      const interval = pollIntervalMs(state.kind);
      if (interval !== null) {
        this.schedule(interval);
      }
    } else {
      void this.refresh();
    }
  }

  paint(state: BarState): void {
    this.state = state;
    const rendered = render(state);
    this.item.text = this.label ? rendered.text.replace("localidx:", `localidx ${this.label}:`) : rendered.text;
    this.item.tooltip = rendered.tooltip;
    this.item.backgroundColor =
      rendered.background === "none" ? undefined : new vscode.ThemeColor(`statusBarItem.${rendered.background}Background`);
  }

  /** Ask now, paint, and schedule the next poll; concurrent calls share one probe. */
  refresh(): Promise<BarState> {
    if (this.refreshing) {
      return this.refreshing;
    }
    this.refreshing = (async () => {
      let state: BarState;
      try {
        state = await this.probe();
      } catch (err) {
        state = fromError(err);
      }
      if (!this.disposed && !this.live) {
        this.paint(state);
        const interval = pollIntervalMs(state.kind);
        if (interval !== null) {
          this.schedule(interval);
        }
      }
      return state;
    })().finally(() => {
      this.refreshing = null;
    });
    return this.refreshing;
  }

  /** Refresh after `delayMs`, in place of the poll already scheduled. */
  schedule(delayMs: number): void {
    if (this.disposed || this.live) {
      return;
    }
    this.cancel();
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.refresh();
    }, delayMs);
    this.timer.unref?.();
  }

  private cancel(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
  }

  dispose(): void {
    this.disposed = true;
    this.cancel();
    this.item.dispose();
  }
}
