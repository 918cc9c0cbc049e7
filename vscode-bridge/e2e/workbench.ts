/**
 * What a person does in VS Code, done through a real browser on a real code-server: run a command from the command
 * palette, type into and read the quick pick, read the status bar, the notifications and the active editor, press
 * a notification's button. Everything is read from what the page shows (the DOM), never from the extension's
 * insides. The status bar's localidx texts are recorded from page load on, so a test can ask what was ever shown.
 */

import type { Locator, Page } from "playwright-core";

export const TIMEOUT_MS = 90_000;

/** A quick pick row as the user sees it: its label (the symbol), its description (`path:lines`) and its place. */
export interface Row {
  index: number;
  label: string;
  description: string;
}

/** Records every text the localidx status bar item shows, from the page's first paint (run before its scripts). */
export const RECORD_STATUS = `
  window.__lxStatus = [];
  const record = () => {
    for (const item of document.querySelectorAll(".statusbar-item")) {
      const text = (item.textContent || "").trim();
      if (text.includes("localidx") && window.__lxStatus[window.__lxStatus.length - 1] !== text) {
        window.__lxStatus.push(text);
      }
    }
  };
  new MutationObserver(record).observe(document, { subtree: true, childList: true, characterData: true });
`;

export class Workbench {
  constructor(readonly page: Page) {}

  get quickInput(): Locator {
    return this.page.locator(".quick-input-widget");
  }

  get quickInputBox(): Locator {
    return this.quickInput.locator(".quick-input-box input");
  }

  /** The localidx status bar item's text, e.g. "localidx: READY" ("" while it is not shown). */
  async status(): Promise<string> {
    const texts = await this.page.locator(".statusbar-item").allTextContents();
    return texts.map((t) => t.trim()).find((t) => t.startsWith("localidx")) ?? "";
  }

  /** Every text the localidx item showed since the page loaded (RECORD_STATUS). */
  async statusHistory(): Promise<string[]> {
    return this.page.evaluate(() => (window as unknown as { __lxStatus: string[] }).__lxStatus.slice());
  }

  async clearStatusHistory(): Promise<void> {
    await this.page.evaluate(() => {
      (window as unknown as { __lxStatus: string[] }).__lxStatus.length = 0;
    });
  }

  /** Wait until the localidx item shows `text`; the error says what it showed instead. */
  async waitForStatus(text: string | RegExp, timeoutMs = TIMEOUT_MS): Promise<string> {
    const matches = (s: string) => (typeof text === "string" ? s.includes(text) : text.test(s));
    const shown = await waitUntil(async () => {
      const s = await this.status();
      return matches(s) ? s : undefined;
    }, timeoutMs);
    if (shown === undefined) {
      throw new Error(`the status bar never showed ${String(text)}; it shows ${JSON.stringify(await this.status())}`);
    }
    return shown;
  }

  /** Open the workbench on `folder` and wait until it is drawn. */
  async open(baseUrl: string, folder: string): Promise<void> {
    await this.page.goto(`${baseUrl}?folder=${encodeURIComponent(folder)}`);
    await this.page.locator(".monaco-workbench .part.statusbar").waitFor({ timeout: TIMEOUT_MS });
  }

  /** Run a command as a person does: F1, type its title, pick exactly that entry. */
  async command(title: string): Promise<void> {
    await this.closeQuickInput();
    await this.page.keyboard.press("F1");
    await this.quickInputBox.waitFor({ state: "visible", timeout: TIMEOUT_MS });
    await this.quickInputBox.fill(`>${title}`);
    // The row's label is the title, and ", recently used" once it was run.
    const entry = this.quickInput.locator(`.monaco-list-row[aria-label="${title}"], .monaco-list-row[aria-label^="${title}, "]`);
    await entry.first().waitFor({ timeout: TIMEOUT_MS });
    await entry.first().click();
  }

  /** Close the quick input if one is open. */
  async closeQuickInput(): Promise<void> {
    if (await this.quickInput.isVisible()) {
      await this.page.keyboard.press("Escape");
      await this.quickInput.waitFor({ state: "hidden", timeout: 10_000 });
    }
  }

  /** The quick pick's rows as rendered, in the order shown (top first). */
  async rows(): Promise<Row[]> {
    const rows = await this.quickInput.locator(".quick-input-list .monaco-list-row").evaluateAll((elements) =>
      elements.map((row) => ({
        index: Number(row.getAttribute("data-index")),
        label: (row.querySelector(".label-name")?.textContent ?? "").trim(),
        description: (row.querySelector(".label-description")?.textContent ?? "").trim(),
      })),
    );
    return rows.sort((a, b) => a.index - b.index);
  }

  /** The quick input's title (e.g. "localidx: Search"), "" when none is shown. */
  async quickInputTitle(): Promise<string> {
    if (!(await this.quickInput.isVisible())) {
      return "";
    }
    return ((await this.quickInput.locator(".quick-input-title").textContent()) ?? "").trim();
  }

  /** The texts of the notifications on screen. */
  async notifications(): Promise<string[]> {
    const toasts = await this.page.locator(".notification-toast .notification-list-item-message").allTextContents();
    return toasts.map((t) => t.trim());
  }

  /** Wait for a notification whose text matches; returns its text. */
  async waitForNotification(text: RegExp, timeoutMs = TIMEOUT_MS): Promise<string> {
    const found = await waitUntil(async () => (await this.notifications()).find((t) => text.test(t)), timeoutMs);
    if (found === undefined) {
      throw new Error(`no notification matched ${text}; shown: ${JSON.stringify(await this.notifications())}`);
    }
    return found;
  }

  /** The severity icon of the notification whose text matches: "error", "warning" or "info". */
  async notificationSeverity(text: RegExp): Promise<string> {
    const toast = this.page.locator(".notification-toast", { has: this.page.locator(".notification-list-item-message", { hasText: text }) });
    const icon = (await toast.first().locator(".notification-list-item-icon").getAttribute("class")) ?? "";
    return /codicon-error/.test(icon) ? "error" : /codicon-warning/.test(icon) ? "warning" : "info";
  }

  /** Press the button labelled `button` on the notification whose text matches. */
  async pressNotificationButton(text: RegExp, button: string): Promise<void> {
    const toast = this.page.locator(".notification-toast", { has: this.page.locator(".notification-list-item-message", { hasText: text }) });
    await toast.first().getByRole("button", { name: button, exact: true }).click();
  }

  /** Close every notification toast on screen. */
  async clearNotifications(): Promise<void> {
    await this.command("Notifications: Clear All Notifications");
  }

  /** The title of the active editor tab ("" when none). */
  async activeTab(): Promise<string> {
    const tab = this.page.locator(".tabs-container .tab.active .monaco-icon-label-container");
    return (await tab.count()) ? ((await tab.first().innerText()) ?? "").replace(/\s+/g, "") : "";
  }

  /** The editor's cursor report in the status bar, e.g. "Ln 6, Col 27 (154 selected)". */
  async cursor(): Promise<string> {
    const texts = await this.page.locator(".statusbar-item").allTextContents();
    return texts.map((t) => t.trim()).find((t) => /^Ln \d+, Col \d+/.test(t)) ?? "";
  }

  /** Open a file of the workspace with Quick Open (Ctrl+P). */
  async openFile(relativePath: string): Promise<void> {
    await this.closeQuickInput();
    await this.page.keyboard.press("Control+P");
    await this.quickInputBox.waitFor({ state: "visible", timeout: TIMEOUT_MS });
    await this.quickInputBox.fill(relativePath);
    const name = relativePath.split("/").pop()!;
    await this.quickInput.locator(".monaco-list-row", { hasText: name }).first().waitFor({ timeout: TIMEOUT_MS });
    await this.page.keyboard.press("Enter");
    await waitUntil(async () => ((await this.activeTab()) === name ? true : undefined), TIMEOUT_MS);
    await this.page.locator(".editor-instance .monaco-editor textarea").first().waitFor({ timeout: TIMEOUT_MS });
  }

  /** Select whole lines `first`..`last` (1-based) of the active editor with Go to Line and Shift+Down. */
  async selectLines(first: number, last: number): Promise<void> {
    await this.page.keyboard.press("Control+G");
    await this.quickInputBox.waitFor({ state: "visible", timeout: TIMEOUT_MS });
    await this.quickInputBox.fill(`:${first}`);
    await this.page.keyboard.press("Enter");
    await this.quickInput.waitFor({ state: "hidden", timeout: TIMEOUT_MS });
    await this.page.keyboard.press("Home");
    await this.page.keyboard.press("Home");
    for (let line = first; line < last; line++) {
      await this.page.keyboard.press("Shift+Down");
    }
    await this.page.keyboard.press("Shift+End");
    const selected = await waitUntil(async () => ((await this.cursor()).startsWith(`Ln ${last},`) ? true : undefined), TIMEOUT_MS);
    if (!selected) {
      throw new Error(`could not select lines ${first}-${last}: the cursor is at ${await this.cursor()}`);
    }
  }
}

/** Poll `probe` until it returns something other than undefined, or the time is up (then undefined). */
export async function waitUntil<T>(probe: () => Promise<T | undefined>, timeoutMs: number, everyMs = 250): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) {
      return value;
    }
    if (Date.now() > deadline) {
      return undefined;
    }
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
