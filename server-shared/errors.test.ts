/**
 * What a caught error leaves in a log (`loggable`): errors made by the real parts that quote what a
 * request sent (Postgres refusing a value, JSON.parse refusing a text, a ServiceError naming a field)
 * are logged without it; a network failure keeps what an operator needs.
 */
import { Pool } from "@neondatabase/serverless";
import { createServer, type AddressInfo } from "node:net";
import ws from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stack } from "../test/support/api.ts";
import { loggable, ServiceError } from "./errors.ts";
import { neonRoute, useNeonRoute } from "./neon-route.ts";

const CUSTOMER = "Refund my order 4111-1111";

let pool: Pool;
beforeAll(() => {
  useNeonRoute(neonRoute(stack().databaseUrl, stack().neonBridge), ws);
  pool = new Pool({ connectionString: stack().databaseUrl, max: 1 });
});
afterAll(async () => {
  await pool?.end();
});

/** The error `run` throws (it must throw). */
async function thrown(run: () => Promise<unknown> | unknown): Promise<unknown> {
  try {
    await run();
  } catch (err) {
    return err;
  }
  throw new Error("expected a throw");
}

describe("loggable", () => {
  it("gives a Postgres error's SQLSTATE, never the value its message quotes", async () => {
    const err = await thrown(() => pool.query("SELECT $1::integer", [CUSTOMER]));
    expect((err as Error).message).toContain(CUSTOMER); // what a log of the message would have held
    const line = loggable(err);
    expect(line).toMatch(/^postgres ERROR 22P02/);
    expect(line).not.toContain("4111");
  });

  it("gives a SyntaxError's name only, a ServiceError's code and operator note", async () => {
    const parse = await thrown(() => JSON.parse(`${CUSTOMER} {`));
    expect((parse as Error).message).toContain("Refund"); // V8 quotes the text it could not parse
    expect(loggable(parse)).toBe("SyntaxError (its text not logged)");
    expect(loggable(new ServiceError("invalid_request", `questions.${CUSTOMER}: unknown type`))).toBe("invalid_request");
    expect(loggable(new ServiceError("unavailable", `no ${CUSTOMER}`, "release r1 is not served here"))).toBe("unavailable: release r1 is not served here");
    expect(loggable(CUSTOMER)).toBe("a thrown string");
  });

  it("keeps a network failure's message and its system code", async () => {
    // A port nothing listens on: one just freed.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    const err = await thrown(() => fetch(`http://127.0.0.1:${port}/`));
    expect(loggable(err)).toMatch(/^TypeError: fetch failed \(ECONNREFUSED\)$/);
    expect(loggable(new Error("a bug in the step"))).toBe("Error: a bug in the step");
  });
});
