/** The seeded generator tests and benchmarks make their data with (server-shared/random.ts). */
export { seededRandom } from "../../server-shared/random.ts";
