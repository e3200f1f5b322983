/**
 * A one-line progress bar on standard error (runs in a user's terminal). It draws only when standard
 * error is a terminal; piped or redirected output gets nothing from it, so logs stay clean.
 *
 *     const progress = new Progress(process.stderr);
 *     progress.update(0.4, "upload 4.0 MiB of 10.0 MiB");
 *     progress.done("uploaded 10.0 MiB");
 */
import { bar } from "./render.ts";

const REDRAW_MS = 100;

export class Progress {
  readonly enabled: boolean;
  private last = 0;
  private drawn = false;

  constructor(
    private readonly stream: NodeJS.WriteStream,
    enabled = stream.isTTY === true,
  ) {
    this.enabled = enabled;
  }

  /** Redraws the line (at most every 100 ms); `fraction` null draws no bar. */
  update(fraction: number | null, text: string, force = false): void {
    if (!this.enabled) return;
    const now = Date.now();
    // The last state of a bar (100%) is always drawn; states in between at most every 100 ms.
    if (!force && fraction !== 1 && this.drawn && now - this.last < REDRAW_MS) return;
    this.last = now;
    this.drawn = true;
    const line = fraction === null ? text : `${bar(fraction, 24)} ${(fraction * 100).toFixed(0).padStart(3)}%  ${text}`;
    const columns = this.stream.columns ?? 80;
    this.stream.write(`\r\u001b[2K${line.slice(0, columns - 1)}`);
  }

  /** Ends the bar's line, with `text` in place of the bar when given. */
  done(text?: string): void {
    if (!this.enabled || !this.drawn) return;
    this.drawn = false;
    this.stream.write(text === undefined ? "\n" : `\r\u001b[2K${text}\n`);
  }
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}
