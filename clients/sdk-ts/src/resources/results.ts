/**
 * A batch's results, read page by page as they are iterated: each page holds up to
 * LIMITS.bulkResultsPage records and the cursor of the next one.
 *
 *     for await (const record of client.batches.results(id)) {
 *       if ("response" in record) console.log(record.custom_id, record.response.answers);
 *       else console.log(record.custom_id, record.error.code);
 *     }
 *     const all = await client.batches.results(id).toArray();
 */
import type { DecisionResponse } from "../decisions.ts";

/** One record of a batch's results: its answer, or why it has none. */
export type ResultRecord = { custom_id: string; response: DecisionResponse } | { custom_id: string; error: { status: number; code: string; message: string } };

export interface ResultsPage {
  object: "list";
  data: ResultRecord[];
  /** Pass as `after` for the next page; null on the last page. */
  next_cursor: number | null;
}

export class ResultStream implements AsyncIterable<ResultRecord> {
  constructor(
    private readonly fetchPage: (after: number) => Promise<ResultsPage>,
    private readonly firstAfter = 0,
  ) {}

  /** Every page from the first, fetched one at a time as the loop asks for it. */
  async *pages(): AsyncGenerator<ResultsPage> {
    let after: number | null = this.firstAfter;
    while (after !== null) {
      const page: ResultsPage = await this.fetchPage(after);
      yield page;
      after = page.next_cursor;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<ResultRecord> {
    for await (const page of this.pages()) yield* page.data;
  }

  /** Every record, in input order. */
  async toArray(): Promise<ResultRecord[]> {
    const all: ResultRecord[] = [];
    for await (const record of this) all.push(record);
    return all;
  }
}
