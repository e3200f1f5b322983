/**
 * The few parts of `oidc-provider` (which ships no types) that local/idp-main.ts uses. The
 * configuration stays loosely typed; the provider validates it at construction and refuses to start
 * on a mistake, which the IdP tests exercise.
 */
declare module "oidc-provider" {
  import type { Server } from "node:http";

  export default class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>);
    listen(port: number, host: string, listening?: () => void): Server;
    on(event: string, listener: (ctx: unknown, err: Error) => void): this;
  }

  export const errors: {
    InvalidTarget: new (description?: string) => Error;
  };
}
