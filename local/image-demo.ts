/**
 * `npm run images:demo [login]`: trains the demonstration image model on the running `npm start`
 * stack and answers one image decision with it (developer machine only). Start the stack with both
 * image flags on first:
 *
 *     IMAGE_API=on IMAGE_BROWSER=on npm start
 *     npm run images:demo
 *
 * As the signed-in user `login` (default dev-user), through the public routes only: uploads 120
 * drawings this project makes (local/demo-images.ts: circles, squares, and 40 of none of them) as
 * training assets, writes the training file, trains on the image backbone (svc-image) and waits
 * until the model is API ready; grants the account $1 of image credit (as `npm run account --
 * credit` does); then uploads a new drawing and classifies it at POST /v1/image-decisions. It
 * prints the model id and the curl command for the same decision with an API key.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { grantCredit, parseCredit } from "../ops/accounts.ts";
import { DEMO_QUESTION, DEMO_QUESTION_ID, demoImage, demoImages } from "./demo-images.ts";
import { idpInfoPath, type IdpInfo } from "./idp.ts";
import { runningStack, stackDir } from "./running.ts";
import { getUserAccessToken } from "./user-token.ts";
import { imageTrainingFile, trainImageModel, uploadImage, type LabelledImage } from "./image-api.ts";

const login = process.argv[2] ?? "dev-user";
const stack = runningStack();
const infoPath = idpInfoPath(join(stackDir(), "idp"));
if (!stack || !existsSync(infoPath)) {
  console.error("No local stack is running; start it with `IMAGE_API=on IMAGE_BROWSER=on npm start`.");
  process.exit(1);
}
const base = stack.baseUrl;
const info = JSON.parse(readFileSync(infoPath, "utf8")) as IdpInfo;
const token = await getUserAccessToken({ issuer: info.issuer, clientId: info.clientId, login });
const QUESTIONS = { [DEMO_QUESTION_ID]: DEMO_QUESTION };

try {
  console.error(`Uploading 120 demonstration drawings as training images of ${login}...`);
  const labelled: LabelledImage[] = [];
  for (const image of await demoImages(40)) {
    const customId = `${image.kind}-${image.seed}`;
    labelled.push({ customId, assetId: await uploadImage(base, token, image.png, "training", `${customId}.png`), label: image.label });
    if (labelled.length % 30 === 0) console.error(`  ${labelled.length} / 120`);
  }

  console.error("Training an image model on svc-image...");
  const training = await trainImageModel(base, token, imageTrainingFile(labelled, QUESTIONS));
  if (training.status !== "ready") throw new Error(`the training ended ${training.status}: ${JSON.stringify(training.error ?? training.evaluation)}`);
  const figures = training.evaluation!.questions[0]!;
  console.error(`  ready: ${training.model} (held-out top-1 accuracy ${figures.candidate.toFixed(3)}, chance ${figures.zero_shot.toFixed(3)}, ECE ${figures.ece.toFixed(3)})`);

  const db = new pg.Client({ connectionString: stack.databaseUrl });
  await db.connect();
  try {
    await grantCredit(db, login, parseCredit(["1", "--note", "image demo"]));
  } finally {
    await db.end();
  }
  console.error(`Granted ${login} $1 of image credit.`);

  const assetId = await uploadImage(base, token, await demoImage("circle", 10_000), "prediction", "new-circle.png");
  const res = await fetch(`${base}/v1/image-decisions`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ model: training.model, state: "", images: [{ asset_id: assetId }], questions: QUESTIONS }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`the image decision: HTTP ${res.status} ${text}`);
  console.error("A new drawing of a circle, classified:");
  console.log(text);
  console.error(
    [
      "",
      `The model: ${training.model}. The same decision with an API key ($KEY) and a finalized asset ($ASSET):`,
      `  curl -s ${base}/v1/systemone -H "authorization: Bearer $KEY" -H 'content-type: application/json' \\`,
      `    -d '{"model":"${training.model}","state":"","images":[{"asset_id":"'$ASSET'"}],"questions":${JSON.stringify(QUESTIONS)}}'`,
    ].join("\n"),
  );
} catch (err) {
  console.error(err instanceof Error ? err.message : String(err));
  if (err instanceof Error && / 404 /.test(err.message)) console.error("Are the image flags on? Start the stack with `IMAGE_API=on IMAGE_BROWSER=on npm start`.");
  process.exit(1);
}
