/** Small parts several console pages share (runs in the browser). */
import { Box, Button, Callout, Card, Code, Flex, Heading, Link, Text, TextField } from "@radix-ui/themes";
import { useEffect, useId, useRef, useState, type ComponentProps, type ReactNode } from "react";
import { API_KEY_PATTERN } from "../../contract/keys.ts";
import { navigate } from "./router.ts";
import { maskedKey, useConsole } from "./state.ts";

/**
 * A link to another page of the console, moved to without loading the page again (which would
 * forget the API key in use); a click that asks for a new tab or window is left to the browser.
 */
export function PageLink({ to, ...props }: { to: string } & Omit<ComponentProps<typeof Link>, "href" | "onClick">) {
  return (
    <Link
      {...props}
      href={to}
      onClick={(event) => {
        if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
        event.preventDefault();
        navigate(to);
      }}
    />
  );
}

/**
 * Where a page that calls with an API key asks for one: a paste field while none is in use (a key
 * pasted here is in use on every page until forgotten), nothing once one is (the bar under the
 * header shows it).
 */
export function ApiKeyField() {
  const { apiKey, setApiKey } = useConsole();
  const [text, setText] = useState("");
  const [error, setError] = useState<string | null>(null);
  if (apiKey) return null;
  /** Puts the text in use if it is a key; whether it was. */
  const use = (value: string) => {
    if (!API_KEY_PATTERN.test(value.trim())) return false;
    setApiKey(value.trim());
    setText("");
    setError(null);
    return true;
  };
  const refuse = () => setError(text.trim() && !use(text) ? "This is not an API key: a key starts with svc_ and is shown once, when it is created." : null);
  return (
    <Box>
      <Text as="label" htmlFor="api-key" size="2" weight="medium">
        API key
      </Text>
      <TextField.Root
        id="api-key"
        type="password"
        autoComplete="off"
        value={text}
        placeholder="svc_…"
        aria-describedby="api-key-help"
        aria-invalid={error ? true : undefined}
        onChange={(event) => {
          setText(event.target.value);
          if (!use(event.target.value)) setError(null);
        }}
        onBlur={refuse}
        onKeyDown={(event) => {
          // Enter takes the key, and does not submit the page's form with none.
          if (event.key !== "Enter") return;
          event.preventDefault();
          refuse();
        }}
      />
      <Text as="p" size="1" id="api-key-help" color={error ? "red" : undefined} highContrast={Boolean(error)}>
        {error ?? (
          <>
            Paste a key to use it on every page of this console, in this tab&apos;s memory only (never stored). Create one under <PageLink to="/console/keys" underline="always">
              API keys
            </PageLink>.
          </>
        )}
      </Text>
    </Box>
  );
}

/** The API key in use, masked (its public id's start, never its secret), and the way to forget it; a live region, so that a change is announced. */
export function KeyInUse() {
  const { apiKey, apiKeyName, setApiKey } = useConsole();
  return (
    <div role="status" className="key-in-use">
      {apiKey && (
        <Flex align="center" gap="2" wrap="wrap">
          <Text size="2">
            API key in use: {apiKeyName && <strong>{apiKeyName} </strong>}
            <Code variant="ghost" data-testid="key-in-use">
              {maskedKey(apiKey)}
            </Code>
          </Text>
          <Text size="1" color="gray">
            (this tab&apos;s memory only)
          </Text>
          <Button
            size="1"
            variant="soft"
            color="gray"
            highContrast
            onClick={() => {
              setApiKey("");
              // The button goes with the key: focus moves to the page's paste field, where it has one.
              setTimeout(() => document.getElementById("api-key")?.focus());
            }}
          >
            Forget key
          </Button>
        </Flex>
      )}
    </div>
  );
}

/**
 * Copies a secret shown once to the clipboard, and says so on the button; where the browser does not
 * allow it, `onError` is told to ask for a copy by hand. Give it a `key` per secret, so that a new
 * secret starts uncopied.
 */
export function CopyButton({ text, onError }: { text: string; onError(message: string): void }) {
  const [copied, setCopied] = useState(false);
  return (
    <Button
      color="indigo"
      onClick={() =>
        void navigator.clipboard.writeText(text).then(
          () => setCopied(true),
          () => onError("the browser did not allow copying: select the secret and copy it"),
        )
      }
    >
      {copied ? "Copied" : "Copy secret"}
    </Button>
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
