/**
 * A browser for tests, over plain HTTP (runs only in tests): it opens a sign-in address that a
 * program printed, walks the local identity provider's real pages (sign-in form, consent form) with
 * their cookies, and follows the final redirect to the loopback callback, so the program's own
 * listener receives the code, exactly as a person's browser would deliver it.
 *
 *     const page = await browseSignIn(printedUrl, { login: "alice" });
 *     page.url;    // http://127.0.0.1:<port>/callback?code=...&state=...&iss=...
 *     page.status; // what the program's listener answered
 */

interface Page {
  /** The address the walk ended at (the callback). */
  url: string;
  status: number;
  text: string;
}

/** Cookies by name and path, as a browser keeps them for one origin. */
class Cookies {
  private readonly jar = new Map<string, { name: string; value: string; path: string }>();

  keep(res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      const [pair = "", ...attributes] = line.split(";").map((part) => part.trim());
      const name = pair.slice(0, pair.indexOf("="));
      const value = pair.slice(pair.indexOf("=") + 1);
      const path = attributes.find((a) => a.toLowerCase().startsWith("path="))?.slice(5) || "/";
      const expired = attributes.some((a) => /^max-age=0$/i.test(a) || (/^expires=/i.test(a) && Date.parse(a.slice(8)) <= Date.now()));
      if (expired) this.jar.delete(`${name} ${path}`);
      else this.jar.set(`${name} ${path}`, { name, value, path });
    }
  }

  for(url: URL): string {
    return [...this.jar.values()]
      .filter((c) => url.pathname === c.path || url.pathname.startsWith(c.path.endsWith("/") ? c.path : `${c.path}/`))
      .map((c) => `${c.name}=${c.value}`)
      .join("; ");
  }
}

/** The sign-in or consent form of a page: where it posts and its hidden `prompt`. */
function form(html: string, base: URL): { action: URL; prompt: string } | null {
  const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
  const prompt = /name="prompt" value="([^"]+)"/.exec(html)?.[1];
  return action && prompt ? { action: new URL(action.replaceAll("&amp;", "&"), base), prompt } : null;
}

export async function browseSignIn(address: string, opts: { login: string; maxSteps?: number }): Promise<Page> {
  const cookies = new Cookies();
  let next: { url: URL; body?: URLSearchParams } = { url: new URL(address) };
  for (let step = 0; step < (opts.maxSteps ?? 20); step++) {
    const loopback = next.url.hostname === "127.0.0.1" && next.url.pathname === "/callback";
    const res = await fetch(next.url, {
      method: next.body ? "POST" : "GET",
      body: next.body,
      headers: loopback ? {} : { cookie: cookies.for(next.url) },
      redirect: "manual",
    });
    if (loopback) return { url: next.url.toString(), status: res.status, text: await res.text() };
    cookies.keep(res);
    const location = res.headers.get("location");
    if (res.status >= 300 && res.status < 400 && location) {
      await res.body?.cancel();
      next = { url: new URL(location, next.url) };
      continue;
    }
    const html = await res.text();
    const found = res.status === 200 ? form(html, next.url) : null;
    if (!found) throw new Error(`the sign-in page ${next.url.pathname} answered ${res.status} without a form`);
    const fields: Record<string, string> = found.prompt === "login" ? { prompt: "login", login: opts.login, password: "local" } : { prompt: found.prompt };
    next = { url: found.action, body: new URLSearchParams(fields) };
  }
  throw new Error("the sign-in took too many steps");
}
