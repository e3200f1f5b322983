/**
 * What every page of the console shares (runs in the browser): the configuration, the signed-in
 * session and the API key in use, which the pages that call with a key (Models, Try a decision,
 * Batches) all take. The key is memory only: App.tsx holds it for as long as the tab keeps the
 * console loaded (moving between pages keeps it; a reload forgets it), and nothing writes it to
 * storage, a cookie or an address. A module of its own, which App.tsx provides and the pages read,
 * so that no page imports the frame.
 *
 *     const { session, apiKey } = useConsole();
 */
import { createContext, useContext } from "react";
import type { ConsoleConfig } from "../../contract/console.ts";
import { parseApiKey } from "../../contract/keys.ts";
import type { Session } from "./auth.ts";

/** The API key in use: its secret, and its name where the console made it. */
export interface KeyInUse {
  secret: string;
  name: string | null;
}

export interface ConsoleState {
  config: ConsoleConfig;
  session: Session;
  /** The API key pages call with (memory only); empty while none is in use. */
  apiKey: string;
  /** The key's name where the console created it. */
  apiKeyName: string | null;
  /** Puts a key in use for every page; an empty secret forgets it. */
  setApiKey(secret: string, name?: string | null): void;
}

export const ConsoleContext = createContext<ConsoleState | null>(null);

/** The console's shared state; only inside App's provider. */
export const useConsole = (): ConsoleState => useContext(ConsoleContext)!;

/**
 * A key as the console shows it: its public lookup id's start (the Id column of the key list), never
 * any of its secret part.
 *
 *     maskedKey("svc_abcdefgh…_…")  // "svc_abcdefgh…"
 */
export function maskedKey(secret: string): string {
  const id = parseApiKey(secret)?.id;
  return id ? `svc_${id.slice(0, 8)}…` : "svc_…";
}
