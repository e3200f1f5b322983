/**
 * A new image model from the browser (runs in the browser; IMAGE_BROWSER), on the Training page: the
 * question and its answers, images picked per answer and for "none of these", each uploaded as a
 * training asset and finalized as soon as it is picked (a few at a time: the account's completions run
 * LIMITS.imageCompletionsAtOnce at once), the count of ready images with failures named and retryable,
 * then the training started from the file image-training.ts writes. The page follows the training as
 * any other (jobs.tsx). Session calls only.
 */
import { Box, Button, Callout, Card, Flex, Heading, Progress, Text, TextField } from "@radix-ui/themes";
import { useEffect, useRef, useState, type ReactNode } from "react";
import { QUESTION_ID_MAX } from "../../../contract/decision.ts";
import { LIMITS } from "../../../contract/limits.ts";
import { describe } from "../api.ts";
import { ErrorCallout } from "../components.tsx";
import { imageTrainingFile, missingForTraining, type ImageStage, type PickedImage } from "../image-training.ts";
import { uploadAsset } from "../images.ts";
import { useConsole } from "../state.ts";

/** Where the Image decisions page links to: this form. */
export const IMAGE_MODEL_ANCHOR = "image-model";

interface Picked extends PickedImage {
  key: number;
  file: File;
  error: string | null;
}

interface Answer {
  key: number;
  name: string;
}

const ACCEPT = "image/jpeg,image/png,.jpg,.jpeg,.png";
const busy = (stage: ImageStage) => stage === "uploading" || stage === "finalizing";

let nextKey = 1;
const newAnswer = (): Answer => ({ key: nextKey++, name: "" });

export function NewImageModel({ start }: { start(file: File): Promise<void> }) {
  const { session } = useConsole();
  const [question, setQuestion] = useState("");
  const [instructions, setInstructions] = useState("");
  const [answers, setAnswers] = useState<Answer[]>(() => Array.from({ length: LIMITS.imageOutcomes.min }, newAnswer));
  const [images, setImages] = useState<Picked[]>([]);
  const [starting, setStarting] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const card = useRef<HTMLDivElement>(null);

  useEffect(() => {
    if (location.hash === `#${IMAGE_MODEL_ANCHOR}`) card.current?.scrollIntoView();
  }, []);

  const update = (key: number, change: Partial<Picked>) => setImages((all) => all.map((image) => (image.key === key ? { ...image, ...change } : image)));

  // Whenever an upload ends or images are picked, the next waiting ones start, a few at a time.
  useEffect(() => {
    const free = LIMITS.imageCompletionsAtOnce - images.filter((image) => busy(image.stage)).length;
    for (const image of images.filter((i) => i.stage === "waiting").slice(0, Math.max(free, 0))) {
      update(image.key, { stage: "uploading" });
      uploadAsset(image.file, session.accessToken, "training", (stage) => update(image.key, { stage })).then(
        (assetId) => update(image.key, { stage: "ready", assetId }),
        (err: unknown) => update(image.key, { stage: "failed", error: describe(err) }),
      );
    }
  }, [images, session]);

  /** The answer index of each image, as the task has them now (an answer's images go with it). */
  const indexed: Picked[] = images.map((image) => ({ ...image, answer: image.answer === null ? null : answers.findIndex((a) => a.key === image.answer) }));
  const task = { question, instructions, answers: answers.map((a) => a.name) };
  const missing = missingForTraining(task, indexed);
  const ready = images.filter((image) => image.stage === "ready").length;
  const failed = images.filter((image) => image.stage === "failed");

  const pick = (group: number | null, files: File[]) => {
    const picked = files.map((file) => ({ key: nextKey++, answer: group, file, filename: file.name, stage: "waiting" as const, assetId: null, error: null }));
    setImages((all) => [...all, ...picked]);
  };
  const drop = (keep: (image: Picked) => boolean) => setImages((all) => all.filter(keep));

  async function train() {
    setError(null);
    setStarting(true);
    try {
      await start(new File([imageTrainingFile(task, indexed)], "images.jsonl", { type: "application/jsonl" }));
      setQuestion("");
      setInstructions("");
      setAnswers(Array.from({ length: LIMITS.imageOutcomes.min }, newAnswer));
      setImages([]);
    } catch (err) {
      setError(describe(err));
    } finally {
      setStarting(false);
    }
  }

  return (
    <Card ref={card} id={IMAGE_MODEL_ANCHOR}>
      <Flex direction="column" gap="3">
        <Heading as="h2" size="4">
          New image model from your photos
        </Heading>
        <Text as="p" size="2">
          Name one question and its answers ({LIMITS.imageOutcomes.min} to {LIMITS.imageOutcomes.max}), then add photos of each answer and photos of none of them, at least{" "}
          {LIMITS.trainingExamplesPerOutcome} of each (more make a better model). Photos upload as you add them.
        </Text>
        <Flex gap="3" wrap="wrap">
          <Box style={{ flex: "1 1 200px" }}>
            <Text as="label" htmlFor="image-question" size="2" weight="medium">
              Question
            </Text>
            <TextField.Root id="image-question" value={question} maxLength={QUESTION_ID_MAX} placeholder="for example: shape" onChange={(event) => setQuestion(event.target.value)} />
          </Box>
          <Box style={{ flex: "3 1 260px" }}>
            <Text as="label" htmlFor="image-instructions" size="2" weight="medium">
              What it asks (optional)
            </Text>
            <TextField.Root id="image-instructions" value={instructions} placeholder="for example: Which shape is drawn?" maxLength={LIMITS.imageQuestionTextChars} onChange={(event) => setInstructions(event.target.value)} />
          </Box>
        </Flex>
        {answers.map((answer, i) => (
          <ImageGroup
            key={answer.key}
            id={`image-answer-${i + 1}`}
            title={
              <>
                <Text as="label" htmlFor={`image-answer-${i + 1}-name`} size="2" weight="medium">
                  Answer {i + 1}
                </Text>
                <TextField.Root
                  id={`image-answer-${i + 1}-name`}
                  value={answer.name}
                  placeholder={i === 0 ? "for example: circle" : undefined}
                  onChange={(event) => setAnswers(answers.map((a) => (a.key === answer.key ? { ...a, name: event.target.value } : a)))}
                />
              </>
            }
            name={answer.name.trim() || `answer ${i + 1}`}
            images={images.filter((image) => image.answer === answer.key)}
            onPick={(files) => pick(answer.key, files)}
            onClear={() => drop((image) => image.answer !== answer.key)}
            onRemove={
              answers.length > LIMITS.imageOutcomes.min
                ? () => {
                    setAnswers(answers.filter((a) => a.key !== answer.key));
                    drop((image) => image.answer !== answer.key);
                  }
                : undefined
            }
          />
        ))}
        <Box>
          <Button type="button" variant="soft" disabled={answers.length >= LIMITS.imageOutcomes.max} onClick={() => setAnswers([...answers, newAnswer()])}>
            Add an answer
          </Button>
        </Box>
        <ImageGroup
          id="image-none"
          title={
            <Text as="p" size="2" weight="medium">
              None of these: photos that show none of the answers, from which the model learns to say it does not know
            </Text>
          }
          name="none of these"
          images={images.filter((image) => image.answer === null)}
          onPick={(files) => pick(null, files)}
          onClear={() => drop((image) => image.answer !== null)}
        />
        {images.length > 0 && (
          <Box>
            <Text as="p" size="2" id="image-upload-progress" aria-live="polite">
              {ready} of {images.length} photos uploaded and ready
              {images.some((image) => busy(image.stage) || image.stage === "waiting") ? ", uploading…" : ""}
              {failed.length > 0 ? `, ${failed.length} failed` : ""}
            </Text>
            <Progress value={(100 * ready) / images.length} aria-labelledby="image-upload-progress" />
          </Box>
        )}
        {failed.length > 0 && (
          <Callout.Root color="red" role="alert" highContrast>
            <Flex direction="column" gap="2">
              <Callout.Text>
                {failed.length === 1 ? "A photo" : `${failed.length} photos`} could not be uploaded:
              </Callout.Text>
              <ul className="failures">
                {failed.slice(0, 20).map((image) => (
                  <li key={image.key}>
                    {image.filename}: {image.error}
                  </li>
                ))}
                {failed.length > 20 && <li>and {failed.length - 20} more</li>}
              </ul>
              <Flex gap="2" wrap="wrap">
                <Button type="button" onClick={() => setImages((all) => all.map((image) => (image.stage === "failed" ? { ...image, stage: "waiting", error: null } : image)))}>
                  Retry failed photos
                </Button>
                <Button type="button" variant="soft" color="gray" highContrast onClick={() => drop((image) => image.stage !== "failed")}>
                  Leave them out
                </Button>
              </Flex>
            </Flex>
          </Callout.Root>
        )}
        <ErrorCallout error={error} />
        <Flex gap="3" align="center" wrap="wrap">
          <Button type="button" size="3" disabled={missing !== null || starting} aria-describedby="image-training-missing" onClick={() => void train()}>
            {starting ? "Starting…" : "Start training"}
          </Button>
          <Text as="p" size="2" id="image-training-missing">
            {missing ?? `${ready} photos ready: the training is followed below once started.`}
          </Text>
        </Flex>
      </Flex>
    </Card>
  );
}

/** One answer's photos (or none of these'): a picker of several, how many are ready, and ways to clear them or remove the answer. */
function ImageGroup(props: { id: string; name: string; title: ReactNode; images: Picked[]; onPick(files: File[]): void; onClear(): void; onRemove?: () => void }) {
  const { images } = props;
  const ready = images.filter((image) => image.stage === "ready").length;
  const least = LIMITS.trainingExamplesPerOutcome;
  return (
    <Box className="image-group">
      <Flex gap="3" align="end" wrap="wrap">
        <Box style={{ flex: "1 1 220px" }}>{props.title}</Box>
        <Box style={{ flex: "1 1 220px" }}>
          <Text as="label" htmlFor={`${props.id}-photos`} size="2" style={{ display: "block" }}>
            Photos of {props.name}
          </Text>
          <input
            id={`${props.id}-photos`}
            type="file"
            multiple
            accept={ACCEPT}
            onChange={(event) => {
              // Copied before the input is emptied (its FileList empties with it), so that the same files may be picked again.
              props.onPick([...(event.target.files ?? [])]);
              event.target.value = "";
            }}
          />
        </Box>
      </Flex>
      <Flex gap="3" align="center" wrap="wrap" mt="1">
        <Text size="2">
          {images.length === 0 ? "No photos yet" : `${ready} of ${images.length} ready`}
          {ready < least ? ` (at least ${least} needed)` : ""}
        </Text>
        {images.length > 0 && (
          <Button type="button" size="1" variant="ghost" onClick={props.onClear} aria-label={`Clear photos of ${props.name}`}>
            Clear photos
          </Button>
        )}
        {props.onRemove && (
          <Button type="button" size="1" variant="ghost" color="red" onClick={props.onRemove} aria-label={`Remove answer ${props.name}`}>
            Remove answer
          </Button>
        )}
      </Flex>
    </Box>
  );
}
