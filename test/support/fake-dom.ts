/**
 * A fake browser page for running a small page script under Node (runs only in tests): just the DOM
 * calls the reference page's script makes (create, append, attributes, text, lookup by id), a
 * `fetch` that answers from the test, and `location`. No layout, no events beyond registration.
 * The project has no browser engine to drive; this shows that the script runs and what it builds.
 *
 *     const page = await runPageScript(script, { "data-document": "/v1/openapi.json" }, fetchStub);
 *     page.byId("createDecision")?.text();
 */
import { runInNewContext } from "node:vm";

export class FakeElement {
  readonly children: (FakeElement | string)[] = [];
  readonly attributes: Record<string, string> = {};
  open = false;
  constructor(readonly tagName: string) {}

  setAttribute(name: string, value: string): void {
    this.attributes[name] = String(value);
  }
  getAttribute(name: string): string | null {
    return this.attributes[name] ?? null;
  }
  appendChild<T extends FakeElement | string>(child: T): T {
    this.children.push(child);
    return child;
  }
  set textContent(value: string) {
    this.children.length = 0;
    if (value !== "") this.children.push(value);
  }
  get textContent(): string {
    return this.text();
  }
  get id(): string | undefined {
    return this.attributes.id;
  }
  scrollIntoView(): void {}

  text(): string {
    return this.children.map((child) => (typeof child === "string" ? child : child.text())).join("");
  }
  /** Every element below this one, depth first. */
  *all(): Generator<FakeElement> {
    for (const child of this.children) {
      if (typeof child === "string") continue;
      yield child;
      yield* child.all();
    }
  }
}

export interface FakePage {
  body: FakeElement;
  byId(id: string): FakeElement | undefined;
  /** The error the script threw or logged, if any. */
  errors: unknown[];
}

/** Runs `script` in a page whose body holds the given ids and attributes; resolves once its fetches have settled. */
export async function runPageScript(script: string, bodyAttributes: Record<string, string>, fetch: (url: string) => Promise<{ ok: boolean; status: number; json(): Promise<unknown> }>, ids = ["toc", "reference"]): Promise<FakePage> {
  const body = new FakeElement("BODY");
  for (const [name, value] of Object.entries(bodyAttributes)) body.setAttribute(name, value);
  for (const id of ids) {
    const el = body.appendChild(new FakeElement("DIV"));
    el.setAttribute("id", id);
  }
  const byId = (id: string) => [...body.all()].find((el) => el.id === id);
  const errors: unknown[] = [];
  const pending: Promise<unknown>[] = [];
  const document = {
    body,
    createElement: (tag: string) => new FakeElement(tag.toUpperCase()),
    createTextNode: (text: string) => text,
    getElementById: (id: string) => byId(id) ?? null,
  };
  // Every fetch and every body it reads is waited for, however long the service takes to send it.
  const track = <T>(promise: Promise<T>): Promise<T> => {
    pending.push(promise.catch(() => undefined));
    return promise;
  };
  const trackedFetch = (url: string) => track(fetch(url).then((res) => ({ ...res, json: () => track(res.json()) })));
  runInNewContext(script, { document, window: { addEventListener: () => {} }, location: { hash: "" }, fetch: trackedFetch, console: { error: (e: unknown) => errors.push(e) } });
  for (let settled = -1; settled !== pending.length; ) {
    settled = pending.length;
    await Promise.all(pending);
  }
  // Let the promise chain after the last body (render) run to its end.
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
  return { body, byId, errors };
}
