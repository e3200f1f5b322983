/** Small parts several console pages share (runs in the browser). */
import { Box, Button, Callout, Card, Flex, Heading, Text, TextField } from "@radix-ui/themes";
import { useEffect, useId, useRef, useState, type ReactNode } from "react";
import { useConsole } from "./state.ts";

/** The API key a page calls with: memory only, handed over from the Keys page or pasted. */
export function ApiKeyField() {
  const { apiKey, setApiKey } = useConsole();
  return (
    <Box>
      <Text as="label" htmlFor="api-key" size="2" weight="medium">
        API key
      </Text>
      <TextField.Root id="api-key" type="password" autoComplete="off" value={apiKey} placeholder="svc_…" onChange={(event) => setApiKey(event.target.value.trim())} />
      <Text as="p" size="1">
        Kept in this page&apos;s memory only, never stored: create one under API keys.
      </Text>
    </Box>
  );
}

export function ErrorCallout({ error }: { error: string | null }) {
  if (!error) return null;
  return (
    <Callout.Root color="red" role="alert" highContrast>
      <Callout.Text>{error}</Callout.Text>
    </Callout.Root>
  );
}

/** One probability as a labelled bar: the value is written beside the bar, which is decoration. */
export function Bar({ label, value }: { label: string; value: number }) {
  return (
    <Flex align="center" gap="3">
      <Text size="2" style={{ minWidth: 120, overflowWrap: "anywhere" }}>
        {label}
      </Text>
      <div className="bar-track" aria-hidden="true">
        <div className="bar-fill" style={{ width: `${(value * 100).toFixed(1)}%` }} />
      </div>
      <Text size="2" style={{ minWidth: 48, textAlign: "right", fontVariantNumeric: "tabular-nums" }}>
        {value.toFixed(3)}
      </Text>
    </Flex>
  );
}

/**
 * A confirmation before something that cannot be undone, in the browser's own modal <dialog> (focus
 * kept inside, Escape cancels): component libraries' modals inject style elements computed at run
 * time, which the page's policy refuses.
 */
export function ConfirmDialog(props: { title: string; description: string; confirm: string; onConfirm(): void; trigger(open: () => void): ReactNode }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const id = useId();
  const close = () => dialog.current?.close();
  return (
    <>
      {props.trigger(() => dialog.current?.showModal())}
      <dialog ref={dialog} className="confirm-dialog" role="alertdialog" aria-labelledby={`${id}-title`} aria-describedby={`${id}-description`}>
        <Card size="3">
          <Flex direction="column" gap="3">
            <Heading as="h2" size="4" id={`${id}-title`}>
              {props.title}
            </Heading>
            <Text as="p" id={`${id}-description`}>
              {props.description}
            </Text>
            <Flex gap="3" justify="end">
              <Button variant="soft" color="gray" highContrast onClick={close} autoFocus>
                Cancel
              </Button>
              <Button
                color="red"
                onClick={() => {
                  close();
                  props.onConfirm();
                }}
              >
                {props.confirm}
              </Button>
            </Flex>
          </Flex>
        </Card>
      </dialog>
    </>
  );
}

/**
 * An image the API serves behind a credential (a reliability diagram's SVG): fetched with it, shown
 * from a blob: address, released when the component goes.
 */
export function AuthorizedImage({ path, credential, alt }: { path: string; credential: string; alt: string }) {
  const [src, setSrc] = useState<string | null>(null);
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    let url: string | null = null;
    let gone = false;
    fetch(path, { headers: { authorization: `Bearer ${credential}` } })
      .then(async (res) => {
        if (!res.ok) throw new Error(String(res.status));
        const blob = await res.blob();
        if (gone) return;
        url = URL.createObjectURL(blob);
        setSrc(url);
      })
      .catch(() => setFailed(true));
    return () => {
      gone = true;
      if (url) URL.revokeObjectURL(url);
    };
  }, [path, credential]);
  if (failed) return <Text size="2">The diagram could not be read.</Text>;
  return src ? <img src={src} alt={alt} style={{ maxWidth: "100%", height: "auto" }} /> : null;
}
