/**
 * The Usage page's chart (runs in the browser): one stacked bar per UTC day, requests under batch
 * records, drawn as inline SVG at the width it is given (measured, so that text keeps its size on a
 * phone and day labels are thinned out rather than overlapped). A day's numbers show on hover, and
 * from the keyboard (the chart takes focus; arrows move between days); the chart is one image to
 * assistive technology, summarised in its label, with the same numbers as a table a button away.
 *
 *     <UsageChart days={usage.data} />   // usage grouped by day alone: every day, oldest first
 */
import { Button, Flex, Table, Text } from "@radix-ui/themes";
import { useId, useLayoutEffect, useRef, useState } from "react";
import type { UsageBucket } from "../../contract/usage.ts";
import { chartSummary, count, countTicks, dayLabel, dayText, decisions, labelEvery } from "./usage.ts";

const HEIGHT = 260;
/** Room for the y axis's title and tick labels (left), the last day label (right), the day labels and the x axis's title (bottom). */
const MARGIN = { top: 12, right: 20, bottom: 48, left: 56 };

export function UsageChart({ days }: { days: UsageBucket[] }) {
  const box = useRef<HTMLDivElement>(null);
  const [width, setWidth] = useState(0);
  const [active, setActive] = useState(days.length - 1);
  const [asTable, setAsTable] = useState(false);
  const readout = useId();
  const table = useId();

  useLayoutEffect(() => {
    const element = box.current!;
    setWidth(element.clientWidth);
    const observer = new ResizeObserver(() => setWidth(element.clientWidth));
    observer.observe(element);
    return () => observer.disconnect();
  }, []);

  const shown = Math.min(active, days.length - 1);
  const ticks = countTicks(Math.max(...days.map(decisions)));
  const top = ticks.at(-1)!;
  const plotWidth = Math.max(width - MARGIN.left - MARGIN.right, 0);
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const band = plotWidth / days.length;
  // A bar narrower than its day leaves a gap between days; a few days on a wide screen are not slabs.
  const barWidth = band > 6 ? Math.min(band * 0.7, 40) : band - 1;
  const every = labelEvery(days.length, band);
  const y = (value: number) => MARGIN.top + plotHeight - (value / top) * plotHeight;
  const baseline = y(0);

  function onKeyDown(event: React.KeyboardEvent) {
    const next = { ArrowLeft: shown - 1, ArrowRight: shown + 1, Home: 0, End: days.length - 1 }[event.key];
    if (next === undefined) return;
    event.preventDefault();
    setActive(Math.max(0, Math.min(days.length - 1, next)));
  }

  return (
    <Flex direction="column" gap="2">
      <Flex justify="between" align="center" gap="3" wrap="wrap">
        <Flex gap="4" wrap="wrap" aria-hidden="true">
          <Text size="2" className="legend-item">
            <span className="legend-swatch requests" /> Requests (real-time decisions)
          </Text>
          <Text size="2" className="legend-item">
            <span className="legend-swatch batch-records" /> Batch records
          </Text>
        </Flex>
        <Button size="1" variant="soft" aria-expanded={asTable} aria-controls={table} onClick={() => setAsTable(!asTable)}>
          {asTable ? "Hide table" : "Show as table"}
        </Button>
      </Flex>
      <div ref={box} className="usage-chart">
        {width > 0 && (
          <svg
            width={width}
            height={HEIGHT}
            role="img"
            aria-label={chartSummary(days)}
            aria-describedby={readout}
            tabIndex={0}
            onKeyDown={onKeyDown}
          >
            {ticks.map((tick) => (
              <g key={tick}>
                <line className="grid" x1={MARGIN.left} x2={width - MARGIN.right} y1={y(tick)} y2={y(tick)} />
                <text x={MARGIN.left - 6} y={y(tick)} textAnchor="end" dominantBaseline="middle">
                  {count(tick)}
                </text>
              </g>
            ))}
            {days.map((day, i) => {
              const x = MARGIN.left + i * band;
              const center = x + band / 2;
              const labelled = (days.length - 1 - i) % every === 0;
              return (
                <g key={day.day} onMouseEnter={() => setActive(i)}>
                  <title>{dayText(day)}</title>
                  {/* The whole column answers the pointer, not only a bar (a day of zero has none). */}
                  <rect className={i === shown ? "column active" : "column"} x={x} y={MARGIN.top} width={band} height={plotHeight} />
                  <rect className="requests" x={center - barWidth / 2} y={y(day.requests)} width={barWidth} height={baseline - y(day.requests)} />
                  <rect className="batch-records" x={center - barWidth / 2} y={y(decisions(day))} width={barWidth} height={y(day.requests) - y(decisions(day))} />
                  {labelled && (
                    <text x={center} y={baseline + 16} textAnchor="middle">
                      {dayLabel(day.day!)}
                    </text>
                  )}
                </g>
              );
            })}
            <line className="axis" x1={MARGIN.left} x2={width - MARGIN.right} y1={baseline} y2={baseline} />
            <text className="axis-title" x={MARGIN.left + plotWidth / 2} y={HEIGHT - 6} textAnchor="middle">
              Day (UTC)
            </text>
            <text className="axis-title" transform={`translate(14 ${MARGIN.top + plotHeight / 2}) rotate(-90)`} textAnchor="middle">
              Decisions
            </text>
          </svg>
        )}
      </div>
      <Text as="p" size="2" id={readout} aria-live="polite" data-testid="usage-readout">
        {dayText(days[shown]!)}
      </Text>
      <div id={table} hidden={!asTable}>
        {asTable && <DayTable days={days} />}
      </div>
    </Flex>
  );
}

/** The chart's numbers, newest day first. */
function DayTable({ days }: { days: UsageBucket[] }) {
  return (
    <Table.Root size="1" variant="surface">
      <caption className="visually-hidden">Usage per day</caption>
      <Table.Header>
        <Table.Row>
          <Table.ColumnHeaderCell>Day (UTC)</Table.ColumnHeaderCell>
          <Table.ColumnHeaderCell align="right">Requests</Table.ColumnHeaderCell>
          <Table.ColumnHeaderCell align="right">Batch records</Table.ColumnHeaderCell>
          <Table.ColumnHeaderCell align="right" className="wide-only">
            Input tokens
          </Table.ColumnHeaderCell>
          <Table.ColumnHeaderCell align="right" className="wide-only">
            Output tokens
          </Table.ColumnHeaderCell>
        </Table.Row>
      </Table.Header>
      <Table.Body>
        {days.toReversed().map((day) => (
          <Table.Row key={day.day}>
            <Table.RowHeaderCell>{day.day}</Table.RowHeaderCell>
            <Table.Cell align="right">{count(day.requests)}</Table.Cell>
            <Table.Cell align="right">{count(day.batch_records)}</Table.Cell>
            <Table.Cell align="right" className="wide-only">
              {count(day.input_tokens)}
            </Table.Cell>
            <Table.Cell align="right" className="wide-only">
              {count(day.output_tokens)}
            </Table.Cell>
          </Table.Row>
        ))}
      </Table.Body>
    </Table.Root>
  );
}
