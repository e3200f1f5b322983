/**
 * A list call's answer: awaited, it is the first page as the service answered it; iterated with
 * `for await`, it is every item of every page, newest first, each next page fetched only when the
 * loop reaches it (as the SDKs users know do).
 *
 *     const page = await client.batches.list({ limit: 50 });       // { data, has_more, next_cursor }
 *     for await (const batch of client.batches.list()) console.log(batch.id, batch.status);
 *     for await (const page of client.batches.list().pages()) console.log(page.data.length);
 *
 * A list without `next_cursor` (a webhook endpoint's deliveries) names how its next page is found:
 * there, the cursor is the last item's id.
 */
import type { WithRequestId } from "../core.ts";

/** A page of a list: its items, and whether older ones follow. */
export interface ListPage<Item> {
  object: "list";
  data: Item[];
  has_more: boolean;
}

/** A page of a cursor-paginated list: its items, and the cursor of the next (older) page. */
export interface CursorPage<Item> extends ListPage<Item> {
  next_cursor: string | null;
}

/** The cursor of the page after `page`: its `next_cursor` where it has one. */
const nextCursorOf = (page: ListPage<unknown>): string | null => ("next_cursor" in page && typeof page.next_cursor === "string" ? page.next_cursor : null);

export class PagePromise<Item, Page extends ListPage<Item>> implements Promise<WithRequestId<Page>>, AsyncIterable<Item> {
  readonly [Symbol.toStringTag] = "Promise";
  private first: Promise<WithRequestId<Page>> | null = null;

  constructor(
    private readonly fetchPage: (after: string | undefined) => Promise<WithRequestId<Page>>,
    private readonly after: string | undefined,
    private readonly nextCursor: (page: Page) => string | null = nextCursorOf,
  ) {}

  /** The first page, fetched once, whether awaited or iterated first. */
  private firstPage(): Promise<WithRequestId<Page>> {
    this.first ??= this.fetchPage(this.after);
    return this.first;
  }

  then<A = WithRequestId<Page>, B = never>(
    onFulfilled?: ((page: WithRequestId<Page>) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.firstPage().then(onFulfilled, onRejected);
  }

  catch<B = never>(onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<WithRequestId<Page> | B> {
    return this.firstPage().catch(onRejected);
  }

  finally(onFinally?: (() => void) | null): Promise<WithRequestId<Page>> {
    return this.firstPage().finally(onFinally);
  }

  /** Every page from the first, each fetched when the loop asks for it. */
  async *pages(): AsyncGenerator<WithRequestId<Page>> {
    let page = await this.firstPage();
    yield page;
    for (let cursor = this.nextCursor(page); page.has_more && cursor !== null; cursor = this.nextCursor(page)) {
      page = await this.fetchPage(cursor);
      yield page;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Item> {
    for await (const page of this.pages()) yield* page.data;
  }

  /** Every item of every page. */
  async toArray(): Promise<Item[]> {
    const all: Item[] = [];
    for await (const item of this) all.push(item);
    return all;
  }
}
