/**
 * What the batch and training pages share (runs in the browser): a job made from a file (created,
 * its file PUT through the signed upload with the progress shown, submitted), and a job read again
 * every few seconds until it ends.
 */
import { Box, Button, Card, Flex, Progress, Text } from "@radix-ui/themes";
import { useEffect, useRef, useState, type ReactNode } from "react";
import type { Upload } from "../../contract/batches.ts";
import { call, describe, upload } from "./api.ts";
import { ErrorCallout } from "./components.tsx";

/** How often an open job is read again. */
const POLL_MS = 2000;

/** The create, upload and submit of a job at `path` (`/v1/batches`, `/v1/trainings`) with `credential`; its id. */
export async function startJob(path: string, credential: string, create: Record<string, unknown>, file: File, progress: (bytes: number) => void): Promise<string> {
  const created = (await call(path, credential, { body: JSON.stringify({ idempotency_key: crypto.randomUUID(), ...create }) })).plain as { id: string; upload?: Upload };
  if (created.upload) await upload(created.upload.url, created.upload.headers, file, progress);
  await call(`${path}/${created.id}/submit`, credential, { method: "POST" });
  return created.id;
}

/** A file chosen and made into a job by `start`, the upload's progress shown meanwhile. */
export function JobFileForm(props: { inputId: string; label: ReactNode; button: string; disabled?: boolean; children?: ReactNode; start(file: File, progress: (bytes: number) => void): Promise<void> }) {
  const [file, setFile] = useState<File | null>(null);
  const [sent, setSent] = useState<number | null>(null);
  const [error, setError] = useState<string | null>(null);
  const input = useRef<HTMLInputElement>(null);

  async function submit(event: React.FormEvent) {
    event.preventDefault();
    if (!file) return;
    setError(null);
    setSent(0);
    try {
      await props.start(file, setSent);
      setFile(null);
      if (input.current) input.current.value = "";
    } catch (err) {
      setError(describe(err));
    } finally {
      setSent(null);
    }
  }

  const share = file && sent !== null ? (100 * sent) / Math.max(file.size, 1) : 0;
  return (
    <Card>
      <form onSubmit={(event) => void submit(event)}>
        <Flex direction="column" gap="2">
          {props.children}
          <Text as="label" htmlFor={props.inputId} weight="medium">
            {props.label}
          </Text>
          <input ref={input} id={props.inputId} type="file" accept=".jsonl,application/jsonl,application/x-ndjson,text/plain" onChange={(event) => setFile(event.target.files?.[0] ?? null)} />
          {sent !== null && file && (
            <Box>
              <Text as="p" size="2" id={`${props.inputId}-progress`}>
                Uploading: {Math.round(share)} % of {file.size.toLocaleString()} bytes
              </Text>
              <Progress value={share} aria-labelledby={`${props.inputId}-progress`} />
            </Box>
          )}
          <ErrorCallout error={error} />
          <Box>
            <Button type="submit" disabled={!file || sent !== null || props.disabled}>
              {props.button}
            </Button>
          </Box>
        </Flex>
      </form>
    </Card>
  );
}

/**
 * Reads a job now and every few seconds until `ended` says so, then calls `onEnded` once. A new
 * `onEnded` (the parent's refresh, a new function each render) does not restart the reading.
 */
export function usePolledJob<T>(read: () => Promise<T | null>, ended: (job: T) => boolean, onEnded: () => void): void {
  const latest = useRef(onEnded);
  latest.current = onEnded;
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      const job = await read();
      if (stopped) return;
      if (job && ended(job)) latest.current();
      else timer = setTimeout(() => void tick(), POLL_MS);
    };
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [read, ended]);
}
