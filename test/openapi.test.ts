/**
 * The OpenAPI document and the reference page, against the real stack: the served document is valid
 * OpenAPI 3.1, names exactly the routes the Worker registers (less an explicit list of non-public
 * ones), tells the truth about credentials, and the answers of real calls conform to its schemas,
 * statuses, error codes and headers. The page works with nothing but the service's own files.
 */
import { createHash } from "node:crypto";
import { Validator as JsonSchemaValidator, type Schema } from "@cfworker/json-schema";
import { Validator as OpenApiValidator } from "@seriousme/openapi-schema-validator";
import { beforeAll, describe, expect, it } from "vitest";
import { Batch } from "../contract/batches.ts";
import { REQUEST_ID_HEADER, SHARED_ALIAS } from "../contract/limits.ts";
import { DOCS_PATH, OPENAPI_PATH, openApiDocument } from "../contract/openapi.ts";
import { setSettings } from "../ops/accounts.ts";
import { call, newAccount, remember, signIn, stack, withDb, type Reply } from "./support/api.ts";
import { lines, poll, submitted } from "./support/bulk.ts";
import { runPageScript } from "./support/fake-dom.ts";

type Doc = ReturnType<typeof openApiDocument>;
type Operation = { security: Record<string, string[]>[]; responses: Record<string, ResponseObject>; parameters?: { name: string; in: string }[] };
type ResponseObject = { headers?: Record<string, unknown>; content?: Record<string, { schema: Record<string, unknown> }>; "x-error-codes"?: string[] };

/**
 * Routes the Worker registers that are not public API, and why. Everything else must be in the
 * document, and everything in the document must be registered.
 */
const NOT_PUBLIC = new Set([
  // The root banner: a liveness answer naming the API prefix, not an operation.
  "GET /",
  // The health probe for load balancers and operators (contract/health.ts), not the customer API.
  "GET /health",
  // The reference page's own script and stylesheet (the page itself, GET /docs, is documented).
  "GET /docs/reference.js",
  "GET /docs/reference.css",
  // The storage endpoint a signed upload URL points at: the URL is the credential, its address is
  // whatever `upload.url` says (R2 in production), so it is not a route of this API.
  "GET /storage/*",
  "PUT /storage/*",
  "DELETE /storage/*",
  // The web console (a page for people, with its own settings and built files), not an API operation.
  "GET /console",
  "GET /console/config.json",
  "GET /console/*",
  // Sidecar-only, behind the shared sidecar secret.
  "POST /internal/grants",
]);

/**
 * The Worker's app module. Imported by a computed path: its types need the Workers runtime types
 * (edge/tsconfig.json), which this project's Node-side type check does not load.
 */
const EDGE_APP = "../edge/app.ts";
type EdgeApp = { createApp(): { routes: { method: string; path: string }[] } };

/** `GET /v1/batches/{id}` for every handler the Hono app registers (middleware left out). */
async function workerRoutes(): Promise<Set<string>> {
  const { createApp } = (await import(EDGE_APP)) as EdgeApp;
  return new Set(
    createApp()
      .routes.filter((route) => route.method !== "ALL")
      .map((route) => `${route.method} ${route.path.replace(/:([A-Za-z0-9_]+)/g, "{$1}")}`),
  );
}

function documentRoutes(doc: Doc): Set<string> {
  return new Set(Object.entries(doc.paths).flatMap(([path, methods]) => Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`)));
}

let served: Doc;

beforeAll(async () => {
  const reply = await call<Doc>(OPENAPI_PATH);
  expect(reply.status).toBe(200);
  served = reply.body;
});

const operation = (method: string, path: string) => served.paths[path]?.[method.toLowerCase()] as Operation | undefined;

/** The schema of a response body, its component `$ref` resolved (components are self-contained). */
function bodySchema(schema: Record<string, unknown>): Schema {
  const ref = schema.$ref;
  if (typeof ref !== "string") return schema as Schema;
  const name = ref.replace("#/components/schemas/", "");
  const component = served.components.schemas[name];
  expect(component, `${ref} is in components`).toBeDefined();
  return component as Schema;
}

/** Asserts that a real reply is one the document describes for `method path`: status, body schema, error code, headers. */
function expectConforms(method: string, path: string, reply: Reply<unknown>): void {
  const op = operation(method, path);
  expect(op, `${method} ${path} is documented`).toBeDefined();
  const response = op!.responses[String(reply.status)];
  expect(response, `${method} ${path} documents status ${reply.status}: ${JSON.stringify(reply.body)}`).toBeDefined();
  const schema = response!.content?.["application/json"]?.schema;
  expect(schema, `${method} ${path} ${reply.status} has a JSON body`).toBeDefined();
  const result = new JsonSchemaValidator(bodySchema(schema!), "2020-12", false).validate(reply.body);
  expect(result.errors.map((e) => `${e.instanceLocation}: ${e.error}`), JSON.stringify(reply.body).slice(0, 500)).toEqual([]);
  expect(result.valid).toBe(true);
  if (reply.status >= 400) {
    expect(response!["x-error-codes"]).toContain((reply.body as { error: { code: string } }).error.code);
  }
  expect(Object.keys(response!.headers ?? {})).toContain(REQUEST_ID_HEADER);
  expect(reply.headers.get(REQUEST_ID_HEADER)).toMatch(/^req_/);
  for (const name of ["retry-after", "retry-after-ms", "x-ratelimit-limit-requests", "x-ratelimit-limit-tokens"]) {
    if (reply.headers.has(name)) expect(Object.keys(response!.headers ?? {}), `${name} on ${reply.status} is documented`).toContain(name);
  }
}

describe("GET /v1/openapi.json", () => {
  it("is served without credentials, as the contract generates it", async () => {
    const reply = await call(OPENAPI_PATH);
    expect(reply.status).toBe(200);
    expect(reply.headers.get("content-type")).toMatch(/^application\/json/);
    // The shared test stack runs with both image flags on (test/support/global-stack.ts).
    expect(reply.body).toEqual(JSON.parse(JSON.stringify(openApiDocument({ images: true }))));
  });

  it("is a valid OpenAPI 3.1 document", async () => {
    const validator = new OpenApiValidator();
    const result = await validator.validate(structuredClone(served));
    expect(result.errors ?? [], JSON.stringify(result.errors ?? []).slice(0, 2000)).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
    expect(served.openapi).toMatch(/^3\.1\./);
  });

  it("names exactly the routes the Worker registers, less the listed non-public ones", async () => {
    const registered = await workerRoutes();
    for (const route of NOT_PUBLIC) expect(registered, `${route} is still registered (else drop it from NOT_PUBLIC)`).toContain(route);
    const publicRoutes = [...registered].filter((route) => !NOT_PUBLIC.has(route)).sort();
    expect([...documentRoutes(served)].sort()).toEqual(publicRoutes);
  });

  it("publishes the component schemas clients check their models against", () => {
    for (const name of ["DecisionRequest", "DecisionResponse", "ModelList", "Batch", "BatchList", "ResultsPage", "ErrorEnvelope", "CreatedKey", "KeyList", "CreateBatchRequest"]) {
      expect(served.components.schemas, name).toHaveProperty(name);
    }
  });

  it("gives every error response the envelope, its codes, and the rate-limit headers the edge sends", () => {
    for (const [path, methods] of Object.entries(served.paths)) {
      for (const [method, op] of Object.entries(methods) as [string, Operation][]) {
        for (const [status, response] of Object.entries(op.responses)) {
          if (Number(status) < 400) continue;
          const where = `${method} ${path} ${status}`;
          expect(response.content?.["application/json"]?.schema, where).toEqual({ $ref: "#/components/schemas/ErrorEnvelope" });
          expect(response["x-error-codes"]?.length, where).toBeGreaterThan(0);
          if (status === "429") expect(Object.keys(response.headers ?? {}), where).toEqual(expect.arrayContaining(["retry-after", "retry-after-ms"]));
        }
        if (op.security.length > 0) expect(op.responses, `${method} ${path}`).toHaveProperty("401");
      }
    }
  });

  it("tells the truth about credentials: public routes answer without one, the others ask for the kind they name", async () => {
    const fill = (path: string) => path.replace("{id}", "00000000-0000-4000-8000-000000000000").replace("{model}", SHARED_ALIAS);
    for (const [path, methods] of Object.entries(served.paths)) {
      for (const [method, op] of Object.entries(methods) as [string, Operation][]) {
        const reply = await call(fill(path), { method: method.toUpperCase(), ...(method === "post" ? { body: {} } : {}) });
        if (op.security.length === 0) {
          expect(reply.status, `${method} ${path}`).toBe(200);
          continue;
        }
        expect(reply.status, `${method} ${path}`).toBe(401);
        expect((reply.body as { error: { message: string } }).error.message).toMatch(Object.keys(op.security[0]!)[0] === "apiKey" ? /API key/ : /user access token/);
      }
    }
  });
});

describe("GET /docs", () => {
  it("loads with no credentials and no external URL: its page, script and stylesheet come from the service", async () => {
    const page = await fetch(`${stack().baseUrl}${DOCS_PATH}`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(page.headers.get("content-security-policy")).toMatch(/default-src 'none'/);
    expect(page.headers.get("content-security-policy")).not.toMatch(/https?:|\*/);
    const html = await page.text();
    const assets = [...html.matchAll(/\b(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(assets.length).toBeGreaterThanOrEqual(3);
    const files: Record<string, string> = { [DOCS_PATH]: html };
    for (const asset of assets) {
      // Same origin: a path of this service, never another host.
      expect(asset).toMatch(/^\/[^/]/);
      const res = await fetch(new URL(asset, stack().baseUrl));
      expect(res.status, asset).toBe(200);
      // The document is data the page renders, not something it loads from elsewhere.
      if (asset !== OPENAPI_PATH) files[asset] = await res.text();
    }
    expect(assets).toContain(OPENAPI_PATH);
    expect(Object.keys(files).length).toBeGreaterThanOrEqual(3);
    for (const [name, text] of Object.entries(files)) {
      expect(text.match(/https?:\/\/|\/\/[a-z0-9.-]+\.[a-z]{2,}\/|@import|url\(/i)?.[0], `an external reference in ${name}`).toBeUndefined();
    }
  });

  it("its script lists every operation, its errors and every schema of the served document", async () => {
    const html = await (await fetch(`${stack().baseUrl}${DOCS_PATH}`)).text();
    const documentPath = /data-document="([^"]+)"/.exec(html)?.[1];
    expect(documentPath).toBe(OPENAPI_PATH);
    const scriptPath = /<script src="([^"]+)"/.exec(html)?.[1];
    const script = await (await fetch(new URL(scriptPath!, stack().baseUrl))).text();
    const fetched: string[] = [];
    const page = await runPageScript(script, { "data-document": documentPath! }, async (url) => {
      fetched.push(url);
      const res = await fetch(new URL(url, stack().baseUrl));
      return { ok: res.ok, status: res.status, json: () => res.json() };
    });
    expect(fetched).toEqual([OPENAPI_PATH]);
    expect(page.errors).toEqual([]);
    for (const [path, methods] of Object.entries(served.paths)) {
      for (const [method, op] of Object.entries(methods) as [string, Operation & { operationId: string }][]) {
        const section = page.byId(op.operationId);
        expect(section, `${method} ${path} is rendered`).toBeDefined();
        expect(section!.text()).toContain(path);
        for (const status of Object.keys(op.responses)) expect(section!.text()).toContain(status);
        for (const code of Object.values(op.responses).flatMap((r) => r["x-error-codes"] ?? [])) expect(section!.text()).toContain(code);
      }
    }
    for (const name of Object.keys(served.components.schemas)) expect(page.byId(`schema-${name}`), name).toBeDefined();
    expect(page.byId("reference")!.text()).toContain("retry-after-ms");
  });
});

describe("real answers conform to the document", () => {
  let account: Awaited<ReturnType<typeof newAccount>>;
  const ticket = {
    state: { ticket: "The invoice was charged twice this month." },
    questions: {
      urgent: { type: "noul", instructions: "Is it about money?" },
      topic: { type: "choice", criteria: { billing: "payments", bug: null } },
      severity: { type: "score", criteria: ["none", "some", "severe"] },
    },
  };

  beforeAll(async () => {
    account = await newAccount();
  });

  it("a decision, and its errors", async () => {
    expectConforms("POST", "/v1/systemone", await call("/v1/systemone", { token: account.key.secret, body: { model: SHARED_ALIAS, ...ticket } }));
    expectConforms("POST", "/v1/systemone", await call("/v1/systemone", { token: account.key.secret, body: { model: "no-such-model", ...ticket } }));
    expectConforms("POST", "/v1/systemone", await call("/v1/systemone", { token: account.key.secret, body: { state: 7, questions: {} } }));
    expectConforms("POST", "/v1/systemone", await call("/v1/systemone", { token: account.userToken, body: ticket }));
  });

  it("models, sign-in and keys", async () => {
    expectConforms("GET", "/v1/models", await call("/v1/models", { token: account.key.secret }));
    expectConforms("GET", "/v1/sign-in", await call("/v1/sign-in"));
    const { token } = await signIn();
    const created = await call<{ secret: string }>("/v1/keys", { token, body: { name: "openapi" } });
    remember(created.body.secret);
    remember(createHash("sha256").update(created.body.secret).digest("hex"));
    expect(created.status).toBe(201);
    expectConforms("POST", "/v1/keys", created);
    expectConforms("GET", "/v1/keys", await call("/v1/keys", { token }));
    expectConforms("POST", "/v1/keys/{id}/revoke", await call("/v1/keys/nosuchkey/revoke", { token, body: {} }));
    expectConforms("GET", "/v1/usage", await call("/v1/usage?group_by=day,key", { token: account.userToken }));
    expectConforms("GET", "/v1/usage", await call("/v1/usage?group_by=week", { token: account.userToken }));
  });

  it("a batch from creation to its results", async () => {
    const create = await call<Batch>("/v1/batches", { token: account.key.secret, body: { idempotency_key: `openapi-${Date.now()}`, input_bytes: 100 } });
    expect(create.status).toBe(201);
    remember(new URL(create.body.upload!.url).searchParams.get("X-Amz-Signature")!);
    expectConforms("POST", "/v1/batches", create);
    expectConforms("POST", "/v1/batches/{id}/submit", await call(`/v1/batches/${create.body.id}/submit`, { token: account.key.secret, body: {} }));
    expectConforms("POST", "/v1/batches/{id}/cancel", await call(`/v1/batches/${create.body.id}/cancel`, { token: account.key.secret, body: {} }));

    const id = await submitted(account, lines([{ custom_id: "ok", body: ticket }, { custom_id: "bad", body: { state: 7, questions: {} } }]));
    expectConforms("GET", "/v1/batches/{id}/results", await call(`/v1/batches/${id}/results`, { token: account.key.secret }));
    expect((await poll(account, id)).status).toBe("completed");
    expectConforms("GET", "/v1/batches/{id}", await call(`/v1/batches/${id}`, { token: account.key.secret }));
    expectConforms("GET", "/v1/batches", await call("/v1/batches?limit=5", { token: account.key.secret }));
    const page = await call<{ data: unknown[] }>(`/v1/batches/${id}/results`, { token: account.key.secret });
    expect(page.body.data).toHaveLength(2);
    expectConforms("GET", "/v1/batches/{id}/results", page);
    expectConforms("GET", "/v1/batches/{id}", await call("/v1/batches/00000000-0000-4000-8000-000000000000", { token: account.key.secret }));
  });

  it("a refusal by quota, with its rate-limit headers", async () => {
    const limited = await newAccount();
    await withDb((db) => setSettings(db, limited.accountId, { requests_per_second: 1 }));
    const replies = await Promise.all(Array.from({ length: 4 }, () => call("/v1/models", { token: limited.key.secret })));
    const refused = replies.find((reply) => reply.status === 429);
    expect(refused, "one of four requests within two seconds is refused").toBeDefined();
    expect(refused!.headers.get("x-ratelimit-limit-requests")).toBe("1");
    expectConforms("GET", "/v1/models", refused!);
  });
});
