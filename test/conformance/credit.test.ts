/**
 * Conformance of prepaid image credit to ../shared/spec/decision-service.md: an image request with
 * insufficient credit is 402; credit is reserved before prediction, settled once on success and
 * released on failure. The client side is spec-only (client.ts); the operator grants the credit and
 * reads the balance with its own tools (operator.ts).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { demoImage } from "../../local/demo-images.ts";
import { expectStatus, post, uploadImage } from "./client.ts";
import { account, creditOf, grant, IMAGE_QUESTION, IMAGE_QUESTION_ID, registerImageModel, type Account } from "./operator.ts";

let owner: Account;
let model: string;
let asset: string;

beforeAll(async () => {
  owner = await account();
  model = await registerImageModel(owner);
  asset = await uploadImage(owner.key.secret, await demoImage("square", 2), "square.png");
});

const decide = (questions: unknown = { [IMAGE_QUESTION_ID]: IMAGE_QUESTION }) => post("/v1/systemone", owner.key.secret, { model, state: "", questions, images: [{ asset_id: asset }] });

describe("Image credit", () => {
  it("Errors / Image billing: an image request of an account that has no credit is 402", async () => {
    expectStatus(await decide(), 402);
    expect(await creditOf(owner)).toEqual({ balance: 0, reserved: 0 });
  });

  it("Image billing: credit short of what the request reserves is 402, reserving and charging nothing; once covered, the same request is answered", async () => {
    await grant(owner, 1);
    expectStatus(await decide(), 402);
    expect(await creditOf(owner)).toEqual({ balance: 1, reserved: 0 });
    await grant(owner, 999_999);
    expectStatus(await decide(), 200);
  });

  it("Image billing: a success is settled once (charged, nothing left reserved); a request that fails after its reservation is released", async () => {
    await grant(owner, 1_000_000);
    const before = await creditOf(owner);
    expectStatus(await decide(), 200);
    const charged = await creditOf(owner);
    expect(charged.reserved).toBe(0);
    expect(charged.balance).toBeLessThan(before.balance);
    // The answers in another order than the saved task's: refused once the model's task is read.
    const reordered = { [IMAGE_QUESTION_ID]: { ...IMAGE_QUESTION, criteria: { square: IMAGE_QUESTION.criteria.square, circle: IMAGE_QUESTION.criteria.circle } } };
    expectStatus(await decide(reordered), 422);
    expect(await creditOf(owner)).toEqual(charged);
  });
});
