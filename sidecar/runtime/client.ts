/**
 * How the sidecar reaches a model runtime. `RuntimeClient` is the adapter interface: the HTTP client
 * below speaks this project's runtime protocol (server-shared/runtime-protocol.ts); another engine (a vLLM
 * OpenAI-compatible server, say) is added as another implementation of the same three calls.
 * `ImageRuntimeClient` is an image runtime's (an ONNX backbone, or a multimodal engine on a GPU host).
 */
import { createHash } from "node:crypto";
import type { SecretReader } from "../../server-shared/secrets.ts";
import { z } from "zod";
import { ErrorEnvelope } from "../../contract/errors.ts";
import { ServiceError } from "../../server-shared/errors.ts";
import { LIMITS } from "../../contract/limits.ts";
import { checkServiceUrl } from "../../contract/urls.ts";
import {
  Identity,
  EmbedResponse,
  ImageFeaturesResponse,
  RUNTIME_PATHS,
  ScoreGroupResponse,
  ScoreResponse,
  TokenizeResponse,
  type EmbedRequest,
  type ImageFeaturesCall,
  type ScoreGroupRequest,
  type ScoreRequest,
  type TokenizeRequest,
} from "../../server-shared/runtime-protocol.ts";
import type { RegistryEntry } from "../../server-shared/registry.ts";
import type { Timings } from "../../server-shared/timing.ts";

export interface RuntimeClient {
  identity(signal?: AbortSignal): Promise<Identity>;
  tokenize(request: TokenizeRequest, signal?: AbortSignal): Promise<TokenizeResponse>;
  score(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResponse>;
  /** Several passes in one call, each answered as `score` answers it (runtime-protocol.ts `/v1/score-group`). */
  scoreGroup(request: ScoreGroupRequest, signal?: AbortSignal): Promise<ScoreGroupResponse>;
  /** The text's sentence embedding (a runtime with a sentence encoder: Identity `encoder`). */
  embed(request: EmbedRequest, signal?: AbortSignal): Promise<EmbedResponse>;
}

/** An image runtime's calls. */
export interface ImageRuntimeClient {
  identity(signal?: AbortSignal): Promise<Identity>;
  imageFeatures(request: ImageFeaturesCall, signal?: AbortSignal): Promise<ImageFeaturesResponse>;
}

/**
 * A runtime call that failed. The caller sees 503 `unavailable`; the operator log names the runtime's
 * status (0 when it was not reached) and its error code, never request content.
 */
export class RuntimeError extends ServiceError {
  override readonly name = "RuntimeError";
  constructor(
    readonly detail: string,
    readonly runtimeStatus: number,
    readonly runtimeCode: string,
  ) {
    super("unavailable", "the model runtime is unavailable; retry shortly", `runtime call failed (${runtimeCode}, status ${runtimeStatus}): ${detail}`);
  }
}

export class HttpRuntimeClient implements RuntimeClient, ImageRuntimeClient {
  private readonly base: URL;

  constructor(
    url: string,
    private readonly secret: string,
    /** Every call fails after this long: a hung runtime must not hold the GPU lane forever. */
    private readonly timeoutMs: number = LIMITS.runtimePassTimeoutMs,
  ) {
    this.base = checkServiceUrl(url, "runtime");
  }

  identity(signal?: AbortSignal): Promise<Identity> {
    return this.call(RUNTIME_PATHS.identity, undefined, Identity, signal);
  }

  tokenize(request: TokenizeRequest, signal?: AbortSignal): Promise<TokenizeResponse> {
    return this.call(RUNTIME_PATHS.tokenize, request, TokenizeResponse, signal);
  }

  score(request: ScoreRequest, signal?: AbortSignal): Promise<ScoreResponse> {
    return this.call(RUNTIME_PATHS.score, request, ScoreResponse, signal);
  }

  async scoreGroup(request: ScoreGroupRequest, signal?: AbortSignal): Promise<ScoreGroupResponse> {
    const response = await this.call(RUNTIME_PATHS.scoreGroup, request, ScoreGroupResponse, signal);
    if (response.results.length !== request.passes.length) {
      throw new RuntimeError(`runtime answered ${response.results.length} of a group's ${request.passes.length} passes`, 200, "malformed");
    }
    return response;
  }

  embed(request: EmbedRequest, signal?: AbortSignal): Promise<EmbedResponse> {
    return this.call(RUNTIME_PATHS.embed, request, EmbedResponse, signal);
  }

  imageFeatures(request: ImageFeaturesCall, signal?: AbortSignal): Promise<ImageFeaturesResponse> {
    return this.call(RUNTIME_PATHS.imageFeatures, request, ImageFeaturesResponse, signal);
  }

  private async call<T>(path: string, body: unknown, schema: z.ZodType<T>, signal?: AbortSignal): Promise<T> {
    let res: Response;
    try {
      res = await fetch(new URL(path, this.base), {
        method: body === undefined ? "GET" : "POST",
        headers: { authorization: `Bearer ${this.secret}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        redirect: "error",
        signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(this.timeoutMs)]) : AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      const reason = err instanceof Error && err.name === "TimeoutError" ? `no answer within ${this.timeoutMs} ms` : err instanceof Error ? err.message : String(err);
      throw new RuntimeError(`runtime unreachable: ${reason}`, 0, "unreachable");
    }
    const json: unknown = await res.json().catch(() => undefined);
    if (!res.ok) {
      const envelope = ErrorEnvelope.safeParse(json);
      const reason = envelope.success ? envelope.data.error : { code: "runtime_error", message: `HTTP ${res.status}` };
      // The one runtime refusal that is the caller's to know: an image needing more visual tokens than the runtime takes.
      if (res.status === 413 && reason.code === "context_too_large") throw new ServiceError("context_too_large", reason.message);
      throw new RuntimeError(`runtime answered ${res.status}: ${reason.message}`, res.status, reason.code);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) throw new RuntimeError(`runtime sent a malformed ${path} response`, res.status, "malformed");
    return parsed.data;
  }
}

/** `inner`, adding the time of each call to `timings` under its name (identity, tokenize, score (a group call too), embed). */
export function timedClient(inner: RuntimeClient, timings: Timings): RuntimeClient {
  return {
    identity: (signal) => timings.time("identity", () => inner.identity(signal)),
    tokenize: (request, signal) => timings.time("tokenize", () => inner.tokenize(request, signal)),
    score: (request, signal) => timings.time("score", () => inner.score(request, signal)),
    scoreGroup: (request, signal) => timings.time("score", () => inner.scoreGroup(request, signal)),
    embed: (request, signal) => timings.time("embed", () => inner.embed(request, signal)),
  };
}

/**
 * The client for a registry entry, with the secret read from the variable its `token_env` names (or
 * the file `<token_env>_FILE` names; the first of a rotation list is sent).
 */
/**
 * `client` with its passes' kept prefixes owned by `accountId`: the runtime reuses a kept prefix only
 * for a pass of the same owner, so an account's pass never runs faster because another account sent
 * the same state just before (runtime-protocol.ts `prefix_owner`). The owner is a digest of the id:
 * the runtime learns no account.
 */
export function ownedBy(client: RuntimeClient, accountId: string): RuntimeClient {
  const owner = createHash("sha256").update(`prefix-owner\u0000${accountId}`).digest("hex").slice(0, 32);
  return {
    identity: (signal) => client.identity(signal),
    tokenize: (request, signal) => client.tokenize(request, signal),
    score: (request, signal) => client.score({ ...request, prefix_owner: owner }, signal),
    scoreGroup: (request, signal) => client.scoreGroup({ ...request, passes: request.passes.map((pass) => ({ ...pass, prefix_owner: owner })) }, signal),
    embed: (request, signal) => client.embed(request, signal),
  };
}

export function runtimeClientFor(entry: Pick<RegistryEntry, "url" | "token_env">, secrets: SecretReader): HttpRuntimeClient {
  let secret: string | undefined;
  try {
    secret = secrets.list(entry.token_env)?.send;
  } catch (err) {
    throw new RuntimeError(`runtime secret of ${entry.token_env}: ${(err as Error).message}`, 0, "no_secret");
  }
  if (!secret) throw new RuntimeError(`runtime secret variable ${entry.token_env} (or ${entry.token_env}_FILE) is not set on this sidecar`, 0, "no_secret");
  return new HttpRuntimeClient(entry.url, secret);
}
