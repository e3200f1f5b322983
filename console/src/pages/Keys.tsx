/**
 * API keys (runs in the browser): the account's keys (the one in use in this console marked), a new
 * key's secret shown once (with a copy button, and a way to put it in use on every page of the console
 * without storing it), and revocation after a confirmation. Calls the key routes with the signed-in
 * session.
 */
import { Badge, Box, Button, Callout, Code, Flex, Heading, Table, Text, TextField } from "@radix-ui/themes";
import { useCallback, useEffect, useState } from "react";
import { CreatedKey, KEY_NAME_MAX, KeyList, parseApiKey, type KeyMetadata } from "../../../contract/keys.ts";
import { call, describe } from "../api.ts";
import { useConsole } from "../state.ts";
import { ConfirmDialog } from "../components.tsx";
import { navigate } from "../router.ts";

export function KeysPage() {
  const { session, apiKey, setApiKey } = useConsole();
  const inUse = parseApiKey(apiKey)?.id;
  const [keys, setKeys] = useState<KeyMetadata[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [name, setName] = useState("");
  const [created, setCreated] = useState<CreatedKey | null>(null);
  const [copied, setCopied] = useState(false);

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
    try {
      const reply = await call("/v1/keys", session.accessToken, { body: JSON.stringify({ name }) });
      setCreated(CreatedKey.parse(reply.plain));
      setCopied(false);
      setName("");
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
      <Text as="p">Keys call the API (decisions, models, batches). A key&apos;s secret is shown once, when it is created; revoking a key refuses its next call.</Text>
      {error && (
        <Callout.Root color="red" role="alert" highContrast>
          <Callout.Text>{error}</Callout.Text>
        </Callout.Root>
      )}
      <form onSubmit={(event) => void create(event)}>
        <Flex gap="2" align="end" wrap="wrap">
          <Box style={{ flex: "1 1 240px" }}>
            <Text as="label" htmlFor="key-name" size="2" weight="medium">
              New key&apos;s name
            </Text>
            <TextField.Root id="key-name" value={name} maxLength={KEY_NAME_MAX} required onChange={(event) => setName(event.target.value)} placeholder="for example: production" />
          </Box>
          <Button type="submit">Create key</Button>
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
              <Button
                color="indigo"
                onClick={() =>
                  void navigator.clipboard.writeText(created.secret).then(
                    () => setCopied(true),
                    () => setError("the browser did not allow copying: select the secret and copy it"),
                  )
                }
              >
                {copied ? "Copied" : "Copy secret"}
              </Button>
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
            <Table.ColumnHeaderCell className="wide-only">Created</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell>
              <span className="visually-hidden">Actions</span>
            </Table.ColumnHeaderCell>
          </Table.Row>
        </Table.Header>
        <Table.Body>
          {keys?.length === 0 && (
            <Table.Row>
              <Table.Cell colSpan={5}>No keys yet.</Table.Cell>
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
                  <Badge color={key.status === "active" ? "green" : "gray"} highContrast>
                    {key.status}
                  </Badge>
                  {key.id === inUse && (
                    <Badge color="indigo" highContrast>
                      in use here
                    </Badge>
                  )}
                </Flex>
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
