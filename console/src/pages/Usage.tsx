/**
 * Usage (runs in the browser): what the account used over the last 7 or 30 UTC days, as a chart of
 * requests and batch records per day (usage-chart.tsx), the totals (tokens, and image credit in
 * dollars), and a table per API key. Calls GET /v1/usage with the signed-in session, as key
 * management does; a range that ends today, as the service counts days (UTC).
 */
import { Box, Button, Card, Code, Flex, Grid, Heading, SegmentedControl, Table, Text } from "@radix-ui/themes";
import { useCallback, useEffect, useRef, useState } from "react";
import { Usage, USAGE_DAYS, type UsageBucket, type UsageCounts } from "../../../contract/usage.ts";
import { call, describe } from "../api.ts";
import { ErrorCallout, PageLink } from "../components.tsx";
import { useConsole } from "../state.ts";
import { UsageChart } from "../usage-chart.tsx";
import { addDays, count, decisions, dollars, usedAnything } from "../usage.ts";

const RANGES = [7, USAGE_DAYS] as const;

interface Report {
  byDay: Usage;
  byKey: Usage;
}

export function UsagePage() {
  const { session } = useConsole();
  const [days, setDays] = useState<number>(USAGE_DAYS);
  const [report, setReport] = useState<Report | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);

  const load = useCallback(async () => {
    const usage = async (query: string) => Usage.parse((await call(`/v1/usage?${query}`, session.accessToken)).plain);
    // The service's default range ends on its today (UTC): a shorter range ends on the same day, whatever this browser's clock says.
    const all = await usage("group_by=day");
    const start = addDays(all.end, 1 - days);
    const range = `start=${start}&end=${all.end}`;
    const [byDay, byKey] = await Promise.all([start === all.start ? all : usage(`group_by=day&${range}`), usage(`group_by=key&${range}`)]);
    return { byDay, byKey };
  }, [session, days]);

  // Only the latest load is shown: one started before the range changed, or before a refresh, is dropped.
  const latest = useRef(0);
  const refresh = useCallback(() => {
    const mine = ++latest.current;
    setLoading(true);
    setError(null);
    load()
      .then((next) => mine === latest.current && setReport(next))
      .catch((err: unknown) => mine === latest.current && setError(describe(err)))
      .finally(() => mine === latest.current && setLoading(false));
  }, [load]);
  useEffect(refresh, [refresh]);

  return (
    <Flex direction="column" gap="4">
      <Heading as="h1" size="6">
        Usage
      </Heading>
      <Text as="p">
        What your account&apos;s API keys used, per UTC day and per key: decisions answered, batch records, tokens and image credit. A decision shows here a moment after it is answered;
        usage is kept {USAGE_DAYS} days.
      </Text>
      <Flex gap="3" align="center" wrap="wrap">
        <SegmentedControl.Root value={String(days)} onValueChange={(value) => setDays(Number(value))} aria-label="Range">
          {RANGES.map((n) => (
            <SegmentedControl.Item key={n} value={String(n)}>
              Last {n} days
            </SegmentedControl.Item>
          ))}
        </SegmentedControl.Root>
        <Button variant="soft" onClick={refresh} loading={loading}>
          Refresh
        </Button>
        {report && (
          <Text size="2" color="gray">
            {report.byDay.start} to {report.byDay.end} (UTC)
          </Text>
        )}
      </Flex>
      <ErrorCallout error={error} />
      {report && (usedAnything(report.byDay.totals) ? <UsageReport report={report} /> : <Empty usage={report.byDay} />)}
    </Flex>
  );
}

function UsageReport({ report }: { report: Report }) {
  const { totals } = report.byDay;
  return (
    <>
      <Card size="2">
        <Heading as="h2" size="4" mb="3">
          Decisions per day
        </Heading>
        <UsageChart days={report.byDay.data} />
      </Card>
      <Totals totals={totals} />
      <KeyTable keys={report.byKey.data} />
    </>
  );
}

function Totals({ totals }: { totals: UsageCounts }) {
  const figures = [
    ["Requests", count(totals.requests)],
    ["Batch records", count(totals.batch_records)],
    ["Input tokens", count(totals.input_tokens)],
    ["Billable input tokens", count(totals.billable_input_tokens)],
    ["Output tokens", count(totals.output_tokens)],
    ["Image credit spent", dollars(totals.image_credit_micro_usd)],
  ] as const;
  return (
    <Box asChild>
      <section aria-labelledby="usage-totals">
        <Heading as="h2" size="4" mb="3" id="usage-totals">
          Totals
        </Heading>
        <Grid asChild columns={{ initial: "2", sm: "3" }} gap="3">
          <dl className="usage-totals" data-testid="usage-totals">
            {figures.map(([name, value]) => (
              <Card key={name}>
                <dt>
                  <Text size="2" color="gray">
                    {name}
                  </Text>
                </dt>
                <dd>
                  <Text size="5" weight="bold">
                    {value}
                  </Text>
                </dd>
              </Card>
            ))}
          </dl>
        </Grid>
        {totals.billable_unreported > 0 && (
          <Text as="p" size="2" mt="2">
            {count(totals.billable_unreported)} answers came from a runtime that reported no billable count: they are not in the billable input tokens (not counted as zero either).
          </Text>
        )}
      </section>
    </Box>
  );
}

/** Per API key, the busiest first; image decisions from the signed-in console have no key. */
function KeyTable({ keys }: { keys: UsageBucket[] }) {
  const sorted = keys.toSorted((a, b) => decisions(b) - decisions(a) || b.image_credit_micro_usd - a.image_credit_micro_usd);
  return (
    <Box asChild>
      <section aria-labelledby="usage-keys">
        <Heading as="h2" size="4" mb="3" id="usage-keys">
          Per API key
        </Heading>
        <Table.Root variant="surface">
          <caption className="visually-hidden">Usage per API key</caption>
          <Table.Header>
            <Table.Row>
              <Table.ColumnHeaderCell>Key</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell className="wide-only">Id</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell align="right">Requests</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell align="right">Batch records</Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell align="right" className="wide-only">
                Input tokens
              </Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell align="right" className="wide-only">
                Output tokens
              </Table.ColumnHeaderCell>
              <Table.ColumnHeaderCell align="right">Image credit</Table.ColumnHeaderCell>
            </Table.Row>
          </Table.Header>
          <Table.Body>
            {sorted.map((key) => (
              <Table.Row key={key.key_id ?? "session"}>
                <Table.RowHeaderCell>{key.key_id ? key.key_name : "Signed-in console (image decisions)"}</Table.RowHeaderCell>
                <Table.Cell className="wide-only">{key.key_id && <Code variant="ghost">{key.key_id}</Code>}</Table.Cell>
                <Table.Cell align="right">{count(key.requests)}</Table.Cell>
                <Table.Cell align="right">{count(key.batch_records)}</Table.Cell>
                <Table.Cell align="right" className="wide-only">
                  {count(key.input_tokens)}
                </Table.Cell>
                <Table.Cell align="right" className="wide-only">
                  {count(key.output_tokens)}
                </Table.Cell>
                <Table.Cell align="right">{dollars(key.image_credit_micro_usd)}</Table.Cell>
              </Table.Row>
            ))}
          </Table.Body>
        </Table.Root>
      </section>
    </Box>
  );
}

function Empty({ usage }: { usage: Usage }) {
  return (
    <Card size="3">
      <Flex direction="column" gap="2">
        <Heading as="h2" size="4">
          No usage yet
        </Heading>
        <Text as="p">
          Nothing was used from {usage.start} to {usage.end}. Decisions, batch records and image decisions show here, per day and per key, a moment after they are answered.
        </Text>
        <Text as="p">
          Create a key under{" "}
          <PageLink to="/console/keys" underline="always">
            API keys
          </PageLink>
          , then make a decision under{" "}
          <PageLink to="/console/try" underline="always">
            Try a decision
          </PageLink>
          .
        </Text>
      </Flex>
    </Card>
  );
}
