/**
 * API keys (runs in the browser): the account's keys (the one in use in this console marked) with
 * their status, expiry, scope and models; a new key, optionally for less than everything (an expiry,
 * a scope, up to KEY_MODELS_MAX model names), its secret shown once (with a copy button, and a way to
 * put it in use on every page of the console without storing it); and revocation after a
 * confirmation. Calls the key routes with the signed-in session; what the API refuses (an expiry in
 * the past: 422) is shown as it says it.
 */
import { Badge, Box, Button, Callout, Code, Flex, Heading, Table, Text, TextField } from "@radix-ui/themes";
import { useCallback, useEffect, useState, type ComponentProps } from "react";
import { CreatedKey, KEY_MODELS_MAX, KEY_NAME_MAX, KEY_SCOPES, KeyList, parseApiKey, type CreateKeyRequest, type KeyMetadata, type KeyScope } from "../../../contract/keys.ts";
import { call, describe } from "../api.ts";
import { useConsole } from "../state.ts";
import { ConfirmDialog, CopyButton } from "../components.tsx";
import { navigate } from "../router.ts";

/** A scope in the page's words; no scope is everything an API key can call. */
const SCOPE_WORDS: Record<KeyScope | "everything", string> = {
  everything: "everything",
  decisions: "decisions",
  decisions_and_batches: "decisions and batches",
};

const STATUS_COLORS: Record<KeyMetadata["status"], ComponentProps<typeof Badge>["color"]> = { active: "green", expired: "orange", revoked: "gray" };

/** Comma-separated model names as a list: trimmed, empty ones and repeats dropped. */
const modelNames = (text: string): string[] => [...new Set(text.split(",").map((name) => name.trim()).filter(Boolean))];

export function KeysPage() {
  const { session, apiKey, setApiKey } = useConsole();
  const inUse = parseApiKey(apiKey)?.id;
  const [keys, setKeys] = useState<KeyMetadata[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [name, setName] = useState("");
  /** The expiry as the date-time field holds it (local time, no offset); empty: never. */
  const [expires, setExpires] = useState("");
  const [scope, setScope] = useState<KeyScope | "everything">("everything");
  const [models, setModels] = useState("");
  const [created, setCreated] = useState<CreatedKey | null>(null);

  const load = useCallback(async () => {
    try {
      setKeys(KeyList.parse((await call("/v1/keys", session.accessToken)).plain).keys);
    } catch (err) {
      setError(describe(err));
    }
  }, [session]);
  useEffect(() => void load(), [load]);

  async function create(event: React.FormEvent) {
    event.preventDefault();
    setError(null);
    const request: CreateKeyRequest = { name };
    // The field's local time, sent as RFC 3339 in UTC; whether it is in the future is the API's to say.
    if (expires) request.expires_at = new Date(expires).toISOString();
    if (scope !== "everything") request.scope = scope;
    const names = modelNames(models);
    if (names.length > KEY_MODELS_MAX) {
      setError(`A key may be limited to at most ${KEY_MODELS_MAX} models (${names.length} named).`);
      return;
    }
    if (names.length > 0) request.models = names;
    try {
      const reply = await call("/v1/keys", session.accessToken, { body: JSON.stringify(request) });
      setCreated(CreatedKey.parse(reply.plain));
      setName("");
      setExpires("");
      setScope("everything");
      setModels("");
      await load();
    } catch (err) {
      setError(describe(err));
    }
  }

  async function revoke(key: KeyMetadata) {
    setError(null);
    try {
      await call(`/v1/keys/${key.id}/revoke`, session.accessToken, { method: "POST" });
      await load();
    } catch (err) {
      setError(describe(err));
    }
  }

  return (
    <Flex direction="column" gap="4">
      <Heading as="h1" size="6">
        API keys
      </Heading>
      <Text as="p">
        Keys call the API (decisions, models, batches). A key&apos;s secret is shown once, when it is created; revoking a key refuses its next call. A key may be made for less than
        everything: until a date, for some routes, for some models.
      </Text>
      {error && (
        <Callout.Root color="red" role="alert" highContrast>
          <Callout.Text>{error}</Callout.Text>
        </Callout.Root>
      )}
      <form onSubmit={(event) => void create(event)}>
        <Flex direction="column" gap="3">
          <Flex gap="2" align="end" wrap="wrap">
            <Box style={{ flex: "1 1 240px" }}>
              <Text as="label" htmlFor="key-name" size="2" weight="medium">
                New key&apos;s name
              </Text>
              <TextField.Root id="key-name" value={name} maxLength={KEY_NAME_MAX} required onChange={(event) => setName(event.target.value)} placeholder="for example: production" />
            </Box>
            <Button type="submit">Create key</Button>
          </Flex>
          <Flex gap="3" wrap="wrap">
            <Box style={{ flex: "1 1 200px" }}>
              <Text as="label" htmlFor="key-expires" size="2" weight="medium">
                Expires (optional)
              </Text>
              <TextField.Root id="key-expires" type="datetime-local" value={expires} aria-describedby="key-expires-help" onChange={(event) => setExpires(event.target.value)} />
              <Text as="p" size="1" id="key-expires-help">
                Your local time; never when empty.
              </Text>
            </Box>
            <Box style={{ flex: "1 1 160px" }}>
              <Text as="label" htmlFor="key-scope" size="2" weight="medium" style={{ display: "block" }}>
                May call
              </Text>
              <select id="key-scope" className="native-select" value={scope} onChange={(event) => setScope(event.target.value as KeyScope | "everything")}>
                {(["everything", ...KEY_SCOPES] as const).map((value) => (
                  <option key={value} value={value}>
                    {SCOPE_WORDS[value]}
                  </option>
                ))}
              </select>
            </Box>
            <Box style={{ flex: "2 1 240px" }}>
              <Text as="label" htmlFor="key-models" size="2" weight="medium">
                Models (optional, comma separated)
              </Text>
              <TextField.Root id="key-models" value={models} aria-describedby="key-models-help" onChange={(event) => setModels(event.target.value)} placeholder="for example: svc-shared" />
              <Text as="p" size="1" id="key-models-help">
                Names or aliases as listed under Models, at most {KEY_MODELS_MAX}; any model when empty.
              </Text>
            </Box>
          </Flex>
        </Flex>
      </form>
      {created && (
        <Callout.Root color="green" role="status" highContrast>
          <Flex direction="column" gap="2">
            <Callout.Text>
              Key <strong>{created.name}</strong> created. Copy its secret now: it is not shown again.
            </Callout.Text>
            <Code size="3" highContrast style={{ wordBreak: "break-all" }} data-testid="new-secret">
              {created.secret}
            </Code>
            <Flex gap="2" wrap="wrap">
              <CopyButton key={created.id} text={created.secret} onError={setError} />
              <Button
                color="indigo"
                onClick={() => {
                  setApiKey(created.secret, created.name);
                  setCreated(null);
                  navigate("/console/try");
                }}
              >
                Use it in Try a decision
              </Button>
              <Button variant="soft" color="gray" highContrast onClick={() => setCreated(null)}>
                Done
              </Button>
            </Flex>
          </Flex>
        </Callout.Root>
      )}
      <Table.Root variant="surface">
          <caption className="visually-hidden">API keys</caption>
        <Table.Header>
          <Table.Row>
            <Table.ColumnHeaderCell>Name</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell className="wide-only">Id</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell>Status</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell className="wide-only">Expires</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell className="wide-only">May call</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell className="wide-only">Models</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell className="narrow-only">Limits</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell className="wide-only">Created</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell>
              <span className="visually-hidden">Actions</span>
            </Table.ColumnHeaderCell>
          </Table.Row>
        </Table.Header>
        <Table.Body>
          {keys?.length === 0 && (
            <Table.Row>
              <Table.Cell colSpan={9}>No keys yet.</Table.Cell>
            </Table.Row>
          )}
          {keys?.map((key) => (
            <Table.Row key={key.id}>
              <Table.RowHeaderCell>{key.name}</Table.RowHeaderCell>
              <Table.Cell className="wide-only">
                <Code variant="ghost">{key.id}</Code>
              </Table.Cell>
              <Table.Cell>
                <Flex gap="1" wrap="wrap">
                  <Badge color={STATUS_COLORS[key.status]} highContrast>
                    {key.status}
                  </Badge>
                  {key.id === inUse && (
                    <Badge color="indigo" highContrast>
                      in use here
                    </Badge>
                  )}
                </Flex>
              </Table.Cell>
              <Table.Cell className="wide-only">{key.expires_at ? new Date(key.expires_at).toLocaleString() : "never"}</Table.Cell>
              <Table.Cell className="wide-only">{SCOPE_WORDS[key.scope ?? "everything"]}</Table.Cell>
              <Table.Cell className="wide-only" style={{ overflowWrap: "anywhere" }}>
                {key.models?.join(", ") ?? "any"}
              </Table.Cell>
              <Table.Cell className="narrow-only" style={{ overflowWrap: "anywhere" }}>
                {limits(key).map((line) => (
                  <div key={line}>{line}</div>
                ))}
              </Table.Cell>
              <Table.Cell className="wide-only">{new Date(key.created_at).toLocaleString()}</Table.Cell>
              <Table.Cell>{key.status === "active" && <RevokeButton keyName={key.name} onConfirm={() => void revoke(key)} />}</Table.Cell>
            </Table.Row>
          ))}
        </Table.Body>
      </Table.Root>
    </Flex>
  );
}

/** A key's expiry, scope and models in a few words, for the phone's one column; "none" for a key that can do everything. */
function limits(key: KeyMetadata): string[] {
  const lines = [
    key.expires_at && `until ${new Date(key.expires_at).toLocaleString()}`,
    key.scope && `${SCOPE_WORDS[key.scope]} only`,
    key.models && `models: ${key.models.join(", ")}`,
  ].filter((line): line is string => Boolean(line));
  return lines.length > 0 ? lines : ["none"];
}

function RevokeButton({ keyName, onConfirm }: { keyName: string; onConfirm(): void }) {
  return (
    <ConfirmDialog
      title={`Revoke ${keyName}?`}
      description="Every call with this key is refused from now on. This cannot be undone."
      confirm="Revoke key"
      onConfirm={onConfirm}
      trigger={(open) => (
        <Button color="red" variant="soft" aria-label={`Revoke ${keyName}`} onClick={open}>
          Revoke
        </Button>
      )}
    />
  );
}
