/**
 * What every page of the console shares (runs in the browser): the configuration, the signed-in
 * session and the API key pages call with (memory only: App.tsx holds it, and it is gone on reload).
 * A module of its own, which App.tsx provides and the pages read, so that no page imports the frame.
 *
 *     const { session, apiKey } = useConsole();
 */
import { createContext, useContext } from "react";
import type { ConsoleConfig } from "../../contract/console.ts";
import type { Session } from "./auth.ts";

export interface ConsoleState {
  config: ConsoleConfig;
  session: Session;
  /** The API key pages call with: memory only. */
  apiKey: string;
  setApiKey(key: string): void;
}

export const ConsoleContext = createContext<ConsoleState | null>(null);

/** The console's shared state; only inside App's provider. */
export const useConsole = (): ConsoleState => useContext(ConsoleContext)!;
