/**
 * Webhooks (runs in the browser): the account's endpoints, newest first; a new one (its URL, the
 * events it is told of, a description), its signing secret shown once after the create and after each
 * rotation (with a copy button); a rotation and a deletion, each after a confirmation; and an
 * endpoint's delivery log, newest first, a page at a time. Calls the webhook routes with the
 * signed-in session, as key management does; what the API refuses (a URL it does not allow: 422, the
 * account's last endpoint taken: 409) is shown next to the form, as it says it.
 */
import { Badge, Box, Button, Callout, Card, Checkbox, Code, Flex, Heading, Table, Text, TextField } from "@radix-ui/themes";
import { useCallback, useEffect, useState, type ComponentProps } from "react";
import {
  WEBHOOK_EVENTS,
  type WebhookEventType,
  WEBHOOK_LIMITS,
  WebhookDeliveryList,
  WebhookEndpointList,
  WebhookEndpointWithSecret,
  type CreateWebhookRequest,
  type WebhookDelivery,
  type WebhookEndpoint,
} from "../../../contract/webhooks.ts";
import { call, describe } from "../api.ts";
import { ConfirmDialog, CopyButton, ErrorCallout } from "../components.tsx";
import { useConsole } from "../state.ts";

const PREVIOUS_SECRET_HOURS = WEBHOOK_LIMITS.previousSecretMs / 3_600_000;

const STATUS_COLORS: Record<WebhookDelivery["status"], ComponentProps<typeof Badge>["color"]> = { pending: "indigo", delivered: "green", failed: "red" };

const time = (at: string | null) => (at ? new Date(at).toLocaleString() : "");

/** A secret the API has just shown: after the create, or after a rotation. */
interface Shown {
  endpoint: WebhookEndpointWithSecret;
  rotated: boolean;
}

export function WebhooksPage() {
  const { session } = useConsole();
  const [endpoints, setEndpoints] = useState<WebhookEndpoint[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [shown, setShown] = useState<Shown | null>(null);
  const [open, setOpen] = useState<WebhookEndpoint | null>(null);

  const load = useCallback(async () => {
    try {
      setEndpoints(WebhookEndpointList.parse((await call("/v1/webhooks", session.accessToken)).plain).data);
    } catch (err) {
      setError(describe(err));
    }
  }, [session]);
  useEffect(() => void load(), [load]);

  async function rotate(endpoint: WebhookEndpoint) {
    setError(null);
    try {
      const reply = await call(`/v1/webhooks/${endpoint.id}/rotate_secret`, session.accessToken, { body: "{}" });
      setShown({ endpoint: WebhookEndpointWithSecret.parse(reply.plain), rotated: true });
      await load();
    } catch (err) {
      setError(describe(err));
    }
  }

  async function remove(endpoint: WebhookEndpoint) {
    setError(null);
    try {
      await call(`/v1/webhooks/${endpoint.id}`, session.accessToken, { method: "DELETE" });
      if (shown?.endpoint.id === endpoint.id) setShown(null);
      if (open?.id === endpoint.id) setOpen(null);
      await load();
    } catch (err) {
      setError(describe(err));
    }
  }

  return (
    <Flex direction="column" gap="4">
      <Heading as="h1" size="6">
        Webhooks
      </Heading>
      <Text as="p">
        An endpoint is sent a signed POST when a batch or a training it subscribes to ends, retried for about a day until it answers 2xx. Its signing secret is shown once, when
        it is added and when it is rotated.
      </Text>
      <NewEndpoint
        onCreated={async (endpoint) => {
          setShown({ endpoint, rotated: false });
          await load();
        }}
      />
      {shown && (
        <Callout.Root color="green" role="status" highContrast>
          <Flex direction="column" gap="2">
            <Callout.Text>
              {shown.rotated ? (
                <>
                  Secret of <strong style={{ overflowWrap: "anywhere" }}>{shown.endpoint.url}</strong> rotated: the previous one also signs for {PREVIOUS_SECRET_HOURS} hours.
                </>
              ) : (
                <>
                  Endpoint <strong style={{ overflowWrap: "anywhere" }}>{shown.endpoint.url}</strong> added.
                </>
              )}{" "}
              Copy its signing secret now: it is shown only now, never again.
            </Callout.Text>
            <Code size="3" highContrast style={{ wordBreak: "break-all" }} data-testid="webhook-secret">
              {shown.endpoint.secret}
            </Code>
            <Flex gap="2" wrap="wrap">
              <CopyButton key={shown.endpoint.secret} text={shown.endpoint.secret} onError={setError} />
              <Button variant="soft" color="gray" highContrast onClick={() => setShown(null)}>
                Done
              </Button>
            </Flex>
          </Flex>
        </Callout.Root>
      )}
      <ErrorCallout error={error} />
      <Table.Root variant="surface">
        <caption className="visually-hidden">Webhook endpoints</caption>
        <Table.Header>
          <Table.Row>
            <Table.ColumnHeaderCell>URL</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell>Events</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell className="wide-only">Description</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell className="wide-only">Created</Table.ColumnHeaderCell>
            <Table.ColumnHeaderCell>
              <span className="visually-hidden">Actions</span>
            </Table.ColumnHeaderCell>
          </Table.Row>
        </Table.Header>
        <Table.Body>
          {endpoints?.length === 0 && (
            <Table.Row>
              <Table.Cell colSpan={5}>No endpoints yet.</Table.Cell>
            </Table.Row>
          )}
          {endpoints?.map((endpoint) => (
            <Table.Row key={endpoint.id}>
              <Table.RowHeaderCell style={{ overflowWrap: "anywhere" }}>{endpoint.url}</Table.RowHeaderCell>
              <Table.Cell>{endpoint.events.join(", ")}</Table.Cell>
              <Table.Cell className="wide-only">{endpoint.description}</Table.Cell>
              <Table.Cell className="wide-only">
                {time(endpoint.created_at)}
                {endpoint.secret_rotated_at && (
                  <Text as="div" size="1" color="gray">
                    secret rotated {time(endpoint.secret_rotated_at)}
                  </Text>
                )}
              </Table.Cell>
              <Table.Cell>
                <Flex gap="2" direction={{ initial: "column", sm: "row" }} align="start" wrap="wrap">
                  <Button variant="soft" aria-label={`Deliveries to ${endpoint.url}`} aria-pressed={open?.id === endpoint.id} onClick={() => setOpen(open?.id === endpoint.id ? null : endpoint)}>
                    Deliveries
                  </Button>
                  <ConfirmDialog
                    title="Rotate this endpoint's secret?"
                    description={`A new secret signs every delivery to ${endpoint.url} from now on; the current one also signs for ${PREVIOUS_SECRET_HOURS} hours more, so that the receiver can switch. The new secret is shown once.`}
                    confirm="Rotate secret"
                    onConfirm={() => void rotate(endpoint)}
                    trigger={(show) => (
                      <Button variant="soft" color="gray" highContrast aria-label={`Rotate secret of ${endpoint.url}`} onClick={show}>
                        Rotate secret
                      </Button>
                    )}
                  />
                  <ConfirmDialog
                    title="Delete this endpoint?"
                    description={`Nothing more is sent to ${endpoint.url}, and its pending deliveries are dropped. This cannot be undone.`}
                    confirm="Delete endpoint"
                    onConfirm={() => void remove(endpoint)}
                    trigger={(show) => (
                      <Button color="red" variant="soft" aria-label={`Delete ${endpoint.url}`} onClick={show}>
                        Delete
                      </Button>
                    )}
                  />
                </Flex>
              </Table.Cell>
            </Table.Row>
          ))}
        </Table.Body>
      </Table.Root>
      {open && <Deliveries key={open.id} endpoint={open} />}
    </Flex>
  );
}

/** The form that adds an endpoint; the API's refusal is shown under it. */
function NewEndpoint({ onCreated }: { onCreated(endpoint: WebhookEndpointWithSecret): Promise<void> }) {
  const { session } = useConsole();
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState<WebhookEventType[]>([]);
  const [description, setDescription] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [sending, setSending] = useState(false);

  async function create(event: React.FormEvent) {
    event.preventDefault();
    setError(null);
    setSending(true);
    const request: CreateWebhookRequest = { url, events };
    if (description.trim()) request.description = description;
    try {
      const reply = await call("/v1/webhooks", session.accessToken, { body: JSON.stringify(request) });
      setUrl("");
      setEvents([]);
      setDescription("");
      await onCreated(WebhookEndpointWithSecret.parse(reply.plain));
    } catch (err) {
      setError(describe(err));
    } finally {
      setSending(false);
    }
  }

  /** The events ticked, in the contract's order. */
  const tick = (name: string, on: boolean) => setEvents(WEBHOOK_EVENTS.filter((e) => (e === name ? on : events.includes(e))));

  return (
    <Card>
      <form onSubmit={(event) => void create(event)}>
        <Flex direction="column" gap="3">
          <Heading as="h2" size="4">
            Add an endpoint
          </Heading>
          <Box>
            <Text as="label" htmlFor="webhook-url" size="2" weight="medium">
              Endpoint URL
            </Text>
            <TextField.Root
              id="webhook-url"
              type="url"
              value={url}
              required
              maxLength={WEBHOOK_LIMITS.urlChars}
              aria-describedby="webhook-url-help"
              onChange={(event) => setUrl(event.target.value)}
              placeholder="https://example.com/hooks"
            />
            <Text as="p" size="1" id="webhook-url-help">
              HTTPS to a public address.
            </Text>
          </Box>
          <fieldset style={{ border: 0, padding: 0, margin: 0 }}>
            <legend>
              <Text size="2" weight="medium">
                Events
              </Text>
            </legend>
            <Flex gap="3" wrap="wrap" mt="1">
              {WEBHOOK_EVENTS.map((name) => (
                <Text as="label" size="2" key={name}>
                  <Flex gap="2" align="center">
                    <Checkbox checked={events.includes(name)} onCheckedChange={(on) => tick(name, on === true)} />
                    {name}
                  </Flex>
                </Text>
              ))}
            </Flex>
          </fieldset>
          <Box>
            <Text as="label" htmlFor="webhook-description" size="2" weight="medium">
              Description (optional)
            </Text>
            <TextField.Root id="webhook-description" value={description} maxLength={WEBHOOK_LIMITS.descriptionChars} onChange={(event) => setDescription(event.target.value)} />
          </Box>
          <Box>
            <Button type="submit" loading={sending}>
              Add endpoint
            </Button>
          </Box>
          <ErrorCallout error={error} />
        </Flex>
      </form>
    </Card>
  );
}

/** What the receiver last answered: its status code, why the attempt failed, or nothing yet. */
function lastAnswer(delivery: WebhookDelivery): string {
  const parts = [delivery.last_status_code === null ? null : String(delivery.last_status_code), delivery.last_error === "http_status" ? null : delivery.last_error];
  return parts.filter(Boolean).join(", ") || (delivery.attempts === 0 ? "not tried yet" : "");
}

/** An endpoint's delivery log, newest first: its first page, read again on Refresh, and more pages on request. */
function Deliveries({ endpoint }: { endpoint: WebhookEndpoint }) {
  const { session } = useConsole();
  const [rows, setRows] = useState<WebhookDelivery[] | null>(null);
  const [hasMore, setHasMore] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);

  /** The first page (`after` none), or the page after the last row shown. */
  const read = useCallback(
    async (after: string | null) => {
      setError(null);
      setLoading(true);
      try {
        const query = after ? `?after=${encodeURIComponent(after)}` : "";
        const page = WebhookDeliveryList.parse((await call(`/v1/webhooks/${endpoint.id}/deliveries${query}`, session.accessToken)).plain);
        setRows((shown) => (after ? [...(shown ?? []), ...page.data] : page.data));
        setHasMore(page.has_more);
      } catch (err) {
        setError(describe(err));
      } finally {
        setLoading(false);
      }
    },
    [endpoint, session],
  );
  useEffect(() => void read(null), [read]);

  return (
    <Box asChild>
      <section aria-labelledby="webhook-deliveries">
        <Flex direction="column" gap="3">
          <Flex gap="3" align="center" justify="between" wrap="wrap">
            <Heading as="h2" size="4" id="webhook-deliveries" style={{ overflowWrap: "anywhere" }}>
              Deliveries to {endpoint.url}
            </Heading>
            <Button variant="soft" onClick={() => void read(null)} loading={loading}>
              Refresh
            </Button>
          </Flex>
          <ErrorCallout error={error} />
          <Text as="p" size="2" aria-live="polite">
            {rows && (rows.length === 0 ? "No deliveries yet: one is made when an event it subscribes to happens." : `${rows.length} ${rows.length === 1 ? "delivery" : "deliveries"} shown, newest first.`)}
          </Text>
          {rows && rows.length > 0 && (
            <Table.Root variant="surface" size="1">
              <caption className="visually-hidden">Deliveries</caption>
              <Table.Header>
                <Table.Row>
                  <Table.ColumnHeaderCell>Event</Table.ColumnHeaderCell>
                  <Table.ColumnHeaderCell className="wide-only">Job</Table.ColumnHeaderCell>
                  <Table.ColumnHeaderCell>Status</Table.ColumnHeaderCell>
                  <Table.ColumnHeaderCell align="right">Attempts</Table.ColumnHeaderCell>
                  <Table.ColumnHeaderCell>Last answer</Table.ColumnHeaderCell>
                  <Table.ColumnHeaderCell className="wide-only">Created</Table.ColumnHeaderCell>
                  <Table.ColumnHeaderCell className="wide-only">Last attempt</Table.ColumnHeaderCell>
                  <Table.ColumnHeaderCell className="wide-only">Finished or next attempt</Table.ColumnHeaderCell>
                </Table.Row>
              </Table.Header>
              <Table.Body>
                {rows.map((delivery) => (
                  <Table.Row key={delivery.id}>
                    <Table.RowHeaderCell>{delivery.event_type}</Table.RowHeaderCell>
                    <Table.Cell className="wide-only">
                      <Code variant="ghost">{delivery.job_id}</Code>
                    </Table.Cell>
                    <Table.Cell>
                      <Badge color={STATUS_COLORS[delivery.status]} highContrast>
                        {delivery.status}
                      </Badge>
                    </Table.Cell>
                    <Table.Cell align="right">{delivery.attempts}</Table.Cell>
                    <Table.Cell>{lastAnswer(delivery)}</Table.Cell>
                    <Table.Cell className="wide-only">{time(delivery.created_at)}</Table.Cell>
                    <Table.Cell className="wide-only">{time(delivery.last_attempt_at)}</Table.Cell>
                    <Table.Cell className="wide-only">{delivery.finished_at ? time(delivery.finished_at) : delivery.next_attempt_at && `next ${time(delivery.next_attempt_at)}`}</Table.Cell>
                  </Table.Row>
                ))}
              </Table.Body>
            </Table.Root>
          )}
          {hasMore && rows && (
            <Box>
              <Button variant="soft" onClick={() => void read(rows.at(-1)!.id)} loading={loading}>
                Load more
              </Button>
            </Box>
          )}
        </Flex>
      </section>
    </Box>
  );
}
