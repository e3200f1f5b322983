/**
 * Conformance of image assets and image decisions to ../shared/spec/decision-service.md, as a client
 * that creates an asset with `purpose`, `filename`, `source_bytes` and the file's SHA-256 (named
 * `sha256`, the project's name: the specification does not show it), PUTs to exactly the returned URL
 * with exactly its headers, completes it, and names it by its ID alone in a decision with one choice
 * question. The image model is registered by the operator (operator.ts), with credit granted.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { demoImage } from "../../local/demo-images.ts";
import { expectOk, expectStatus, get, obj, post, putUpload, readChoice, sha256Hex, SpecDecision, uploadImage, uploadIn, type Json } from "./client.ts";
import { account, grant, IMAGE_QUESTION, IMAGE_QUESTION_ID, registerImageModel, runtimeAddresses, type Account } from "./operator.ts";

const ANSWERS = Object.keys(IMAGE_QUESTION.criteria);
const QUESTIONS = { [IMAGE_QUESTION_ID]: IMAGE_QUESTION };

let owner: Account;
let model: string;
let photo: Uint8Array;
let asset: string;

beforeAll(async () => {
  owner = await account();
  [model, photo] = await Promise.all([registerImageModel(owner), demoImage("circle", 1)]);
  await grant(owner, 1_000_000);
  asset = await uploadImage(owner.key.secret, photo, "circle.png");
});

const decide = (body: Record<string, unknown>, token = owner.key.secret) => post("/v1/systemone", token, { model, state: "", questions: QUESTIONS, images: [{ asset_id: asset }], ...body });

describe("Image assets", () => {
  it("Image asset: create with purpose, filename, source_bytes and the SHA-256 gives an asset ID, a PUT URL and headers; the PUT with exactly those, then complete, finalize it", async () => {
    const created = await post("/v1/image-assets", owner.key.secret, { purpose: "prediction", filename: "circle.png", source_bytes: photo.byteLength, sha256: sha256Hex(photo) });
    expectOk(created);
    const id = obj(created.body).id;
    expect(typeof id).toBe("string");
    const upload = uploadIn(created.body);
    expect(upload.url).not.toContain(owner.key.secret);
    const put = await putUpload(upload, photo);
    expect(put.ok, `${put.status}: ${await put.text()}`).toBe(true);
    const completed = await post(`/v1/image-assets/${id}/complete`, owner.key.secret, {});
    expectOk(completed);
    expect(obj(completed.body).id).toBe(id);
  });

  it("Authentication rule 4: image asset creation and finalization accept the signed-in session as well as the owner's API key", async () => {
    const id = await uploadImage(owner.userToken, photo, "from-the-session.png");
    expectStatus(await decide({ images: [{ asset_id: id }] }), 200);
  });

  it("Authentication rule 4 / Errors: image asset routes refuse a missing or invalid credential with 401", async () => {
    const body = { purpose: "prediction", filename: "a.png", source_bytes: photo.byteLength, sha256: sha256Hex(photo) };
    expectStatus(await post("/v1/image-assets", undefined, body), 401);
    expectStatus(await post("/v1/image-assets", "not-a-key", body), 401);
    expectStatus(await post(`/v1/image-assets/${asset}/complete`, undefined, {}), 401);
  });

  it("Image limits / Errors: a truncated or undecodable file fails before any GPU work, with 422 (invalid image)", async () => {
    for (const [filename, bytes] of [
      ["truncated.png", photo.subarray(0, photo.byteLength - 100)],
      ["not-an-image.png", new TextEncoder().encode("this is no image at all")],
    ] as const) {
      const created = await post("/v1/image-assets", owner.key.secret, { purpose: "prediction", filename, source_bytes: bytes.byteLength, sha256: sha256Hex(bytes) });
      expectOk(created);
      const put = await putUpload(uploadIn(created.body), bytes);
      expect(put.ok, `${put.status}: ${await put.text()}`).toBe(true);
      const completed = await post(`/v1/image-assets/${obj(created.body).id}/complete`, owner.key.secret, {});
      // Refused when it is finalized, or else when a decision names it.
      const refused = completed.status >= 200 && completed.status < 300 ? await decide({ images: [{ asset_id: obj(created.body).id }] }) : completed;
      expect(refused.status, `${filename}: ${refused.text}`).toBe(422);
    }
  });
});

describe("Image decisions", () => {
  it("Image decision: POST /v1/systemone with images:[{asset_id}] and one choice question answers it: conditional probabilities of the answers, unknown_probability and confidence", async () => {
    const reply = await decide({});
    expectStatus(reply, 200);
    const response = SpecDecision.parse(reply.body);
    expect(Object.keys(response.answers)).toEqual([IMAGE_QUESTION_ID]);
    const answer = response.answers[IMAGE_QUESTION_ID] as Json;
    // Known-answer probabilities are conditional on a known answer: they sum to 1 on their own.
    const choice = readChoice(answer, ANSWERS);
    expect(choice.selected).toBe("circle");
    const unknown = obj(answer).unknown_probability;
    expect(typeof unknown).toBe("number");
    expect(unknown as number).toBeGreaterThan(0);
    expect(unknown as number).toBeLessThan(1);
    expect(choice.numbers.filter((n) => n !== unknown).some((n) => n >= 0 && n <= 1)).toBe(true);
    // Runtime addresses, their secrets' names and signed read URLs are never returned.
    for (const address of await runtimeAddresses()) expect(reply.text).not.toContain(address);
    expect(reply.text).not.toMatch(/https?:\/\//);
  });

  it("Image assets: an external URL or an encoded image in place of an asset ID is 422", async () => {
    const png = Buffer.from(photo).toString("base64");
    for (const images of [
      [{ asset_id: "https://example.com/circle.png" }],
      [{ asset_id: `data:image/png;base64,${png.slice(0, 200)}` }],
      [{ asset_id: png.slice(0, 200) }],
      [{ url: "https://example.com/circle.png" }],
    ]) {
      const reply = await decide({ images });
      expect(reply.status, `${JSON.stringify(images).slice(0, 80)}: ${reply.text}`).toBe(422);
    }
  });

  it("Image limits: one choice question with 2-16 named answers, one image; anything else is 422", async () => {
    const other = { type: "choice", instructions: "Which colour?", criteria: { red: null, blue: null } };
    for (const body of [
      { questions: { ...QUESTIONS, colour: other } },
      { questions: { [IMAGE_QUESTION_ID]: { type: "noul", instructions: IMAGE_QUESTION.instructions } } },
      { questions: { [IMAGE_QUESTION_ID]: { ...IMAGE_QUESTION, criteria: { circle: IMAGE_QUESTION.criteria.circle } } } },
      { questions: { [IMAGE_QUESTION_ID]: { ...IMAGE_QUESTION, criteria: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`a${i}`, null])) } } },
      { images: [{ asset_id: asset }, { asset_id: asset }] },
    ]) {
      const reply = await decide(body);
      expect(reply.status, `${JSON.stringify(body).slice(0, 120)}: ${reply.text}`).toBe(422);
    }
  });

  it("Image model: a request must use the exact saved question and its outcome order; a mismatch is 422", async () => {
    const [first, second] = ANSWERS as [string, string];
    const reordered = { ...IMAGE_QUESTION, criteria: { [second]: IMAGE_QUESTION.criteria[second as "square"], [first]: IMAGE_QUESTION.criteria[first as "circle"] } };
    for (const questions of [
      { [IMAGE_QUESTION_ID]: reordered },
      { other_id: IMAGE_QUESTION },
      { [IMAGE_QUESTION_ID]: { ...IMAGE_QUESTION, instructions: "Which figure is it?" } },
    ]) {
      const reply = await decide({ questions });
      expect(reply.status, `${JSON.stringify(questions).slice(0, 120)}: ${reply.text}`).toBe(422);
    }
  });

  it("Errors: 404 for an image or a model unavailable to the account", async () => {
    const stranger = await account();
    await grant(stranger, 1_000_000);
    const theirs = await uploadImage(stranger.key.secret, photo);
    // Another account's model, and the owner's model with another account's or an unknown asset.
    expectStatus(await decide({ images: [{ asset_id: theirs }] }, stranger.key.secret), 404);
    expectStatus(await decide({ images: [{ asset_id: theirs }] }), 404);
    expectStatus(await decide({ images: [{ asset_id: crypto.randomUUID() }] }), 404);
  });

  it("Endpoints: GET /v1/image-models is a session route, and creates no keys", async () => {
    const keysBefore = (await get("/v1/keys", owner.userToken)).text;
    expectStatus(await get("/v1/image-models", owner.userToken), 200);
    expectStatus(await get("/v1/image-models", owner.key.secret), 401);
    expect((await get("/v1/keys", owner.userToken)).text).toBe(keysBefore);
  });
});
