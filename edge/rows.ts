/** Reading Postgres rows at the edge (runs in workerd). */

/** A timestamp column as an ISO 8601 string in UTC; null stays null. */
export function iso(value: unknown): string | null {
  return value === null || value === undefined ? null : new Date(value as string).toISOString();
}
