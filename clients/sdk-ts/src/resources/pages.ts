/**
 * A list call's answer: awaited, it is the first page as the service answered it; iterated with
 * `for await`, it is every item of every page, newest first, each next page fetched only when the
 * loop reaches it (as the SDKs users know do).
 *
 *     const page = await client.batches.list({ limit: 50 });       // { data, has_more, next_cursor }
 *     for await (const batch of client.batches.list()) console.log(batch.id, batch.status);
 *     for await (const page of client.batches.list().pages()) console.log(page.data.length);
 */
import type { WithRequestId } from "../core.ts";

/** A page of a cursor-paginated list: its items, and the cursor of the next (older) page. */
export interface CursorPage<Item> {
  object: "list";
  data: Item[];
  has_more: boolean;
  next_cursor: string | null;
}

export class PagePromise<Item, Page extends CursorPage<Item>> implements Promise<WithRequestId<Page>>, AsyncIterable<Item> {
  readonly [Symbol.toStringTag] = "Promise";
  private first: Promise<WithRequestId<Page>> | null = null;

  constructor(
    private readonly fetchPage: (after: string | undefined) => Promise<WithRequestId<Page>>,
    private readonly after: string | undefined,
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
    while (page.has_more && page.next_cursor !== null) {
      page = await this.fetchPage(page.next_cursor);
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
