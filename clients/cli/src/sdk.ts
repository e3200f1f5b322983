/**
 * The one door to the TypeScript SDK (clients/sdk-ts): its client, which makes every call to the
 * service, and its settings module (the key, the deployment and the saved-credentials file). The
 * build bundles both into the CLI, so it does not depend on the SDK package.
 */
export * from "../../sdk-ts/src/index.ts";
export * from "../../sdk-ts/src/settings.ts";
