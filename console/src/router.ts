/** The console's routes (runs in the browser): paths under /console, moved between with the History API. */
import { useEffect, useState } from "react";

export const PAGES = [
  { path: "/console/keys", title: "API keys" },
  { path: "/console/models", title: "Models" },
  { path: "/console/try", title: "Try a decision" },
] as const;

export function navigate(path: string): void {
  history.pushState(null, "", path);
  dispatchEvent(new PopStateEvent("popstate"));
}

/** The current path, following navigation. */
export function usePath(): string {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const update = () => setPath(location.pathname);
    addEventListener("popstate", update);
    return () => removeEventListener("popstate", update);
  }, []);
  return path;
}
