/** The console's entry (runs in the browser): reads the deployment's settings, completes a sign-in, renders. */
import "@radix-ui/themes/styles.css";
import "./console.css";
import { createRoot } from "react-dom/client";
import { ConsoleConfig, CONSOLE_CONFIG_PATH } from "../../contract/console.ts";
import { App } from "./App.tsx";
import { completeSignIn } from "./auth.ts";

async function start(): Promise<void> {
  const root = createRoot(document.getElementById("root")!);
  let config: ConsoleConfig;
  try {
    config = ConsoleConfig.parse(await (await fetch(CONSOLE_CONFIG_PATH)).json());
  } catch {
    root.render(<p role="alert">The console could not read its settings from this service. Reload the page to try again.</p>);
    return;
  }
  let signInError: string | null = null;
  try {
    const returnTo = await completeSignIn(config);
    if (returnTo) history.replaceState(null, "", returnTo);
  } catch (err) {
    signInError = (err as Error).message;
  }
  root.render(<App config={config} signInError={signInError} />);
}

void start();
