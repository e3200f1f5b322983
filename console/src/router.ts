/** The console's routes (runs in the browser): paths under /console, moved between with the History API. */
import { useEffect, useState } from "react";

/** Every page; `images` ones exist only where the deployment takes image decisions from a session (IMAGE_BROWSER). */
export const PAGES = [
  { path: "/console/keys", title: "API keys" },
  { path: "/console/models", title: "Models" },
  { path: "/console/try", title: "Try a decision" },
  { path: "/console/batches", title: "Batches" },
  { path: "/console/trainings", title: "Training" },
  { path: "/console/images", title: "Image decisions", images: true },
  { path: "/console/usage", title: "Usage" },
  { path: "/console/webhooks", title: "Webhooks" },
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
