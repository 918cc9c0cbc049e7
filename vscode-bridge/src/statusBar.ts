/**
 * The status bar item (the vscode glue over status.ts): paints a BarState, polls on a timer (fast while indexing),
 * and runs `localidx: Show Status` when clicked. Polling sends `index/status`, which counts as activity for the
 * daemon's idle timeout: while the window is open the daemon stays up.
 */

import * as vscode from "vscode";

import { BarState, fromError, pollIntervalMs, render } from "./status";

/** The status bar item: paints a BarState, polls `probe` on a timer, runs Show Status when clicked. */
export class StatusBar implements vscode.Disposable {
  readonly item: vscode.StatusBarItem;
  state: BarState = { kind: "DAEMON_DOWN", detail: "connecting" };
  private timer: NodeJS.Timeout | null = null;
  private refreshing: Promise<BarState> | null = null;
  private disposed = false;

  constructor(
    private readonly probe: () => Promise<BarState>,
    command: string,
  ) {
    this.item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 0);
    this.item.name = "localidx";
    this.item.command = command;
    this.paint({ kind: "DAEMON_DOWN", detail: "connecting" });
    this.item.show();
  }

  paint(state: BarState): void {
    this.state = state;
    const rendered = render(state);
    this.item.text = rendered.text;
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
      if (!this.disposed) {
        this.paint(state);
        this.schedule(pollIntervalMs(state.kind));
      }
      return state;
    })().finally(() => {
      this.refreshing = null;
    });
    return this.refreshing;
  }

  /** Refresh after `delayMs`, in place of the poll already scheduled. */
  schedule(delayMs: number): void {
    if (this.disposed) {
      return;
    }
    if (this.timer) {
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.refresh();
    }, delayMs);
    this.timer.unref?.();
  }

  dispose(): void {
    this.disposed = true;
    if (this.timer) {
      clearTimeout(this.timer);
    }
    this.item.dispose();
  }
}
