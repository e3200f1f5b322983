/**
 * Every limit of the specification, written once. Edge, sidecar, runtime, CLI and SDKs import these;
 * a number that appears in the spec must not be retyped anywhere else.
 */
export const LIMITS = {
  /** Decision request body, bytes. */
  decisionBodyBytes: 1024 * 1024,
  /** Body of a key or batch creation ({name} or {idempotency_key}), bytes. */
  controlBodyBytes: 16 * 1024,
  /** Body of an action route that takes none (revoke, submit, cancel), bytes. */
  actionBodyBytes: 1024,
  /** Maximum nesting depth of any JSON request body. */
  jsonDepth: 32,
  /** Tokens in one rendered model pass (prompt included). */
  tokensPerPass: 4096,
  /** Input tokens reserved across one request, all passes together. */
  reservedInputTokensPerRequest: 65_536,
  choiceOptions: { min: 2, max: 255 },
  /** Options one model pass offers; a larger choice is read in chunks plus one final pass over the leaders. */
  choiceOptionsPerPass: 26,
  /**
   * A choice of at most this many options is read twice, its options in key order and reversed, and
   * the two readings averaged: a choice's options have no order (key order only breaks ties), so its
   * answer should not follow where an option is listed. Ordered alternatives are a score's levels.
   */
  choiceBothOrdersMaxOptions: 8,
  scoreLevels: { min: 2, max: 10 },
  bulkFileBytes: 25 * 1024 * 1024,
  bulkFileRecords: 10_000,
  /** Each non-purged batch reserves this much input storage until cleanup. */
  batchStorageReservationBytes: 25 * 1024 * 1024,
  batchLifetimeMs: 24 * 60 * 60 * 1000,
  bulkResultsPage: 20,
  signedUploadValidityMs: 2 * 60 * 60 * 1000,
  /** A grant the edge signs for the bulk worker to read or delete one object. */
  workerGrantMs: 10 * 60 * 1000,
  /** A job worker's claim on a job (a batch, a training) lasts this long, renewed this often while its step runs. */
  jobLeaseMs: 120_000,
  jobLeaseRenewMs: 30_000,
  bulkTransientAttempts: 3,
  /**
   * Runtime time one bulk claim fills: it takes as many consecutive records as ran in about this long
   * (at least one, at most bulkClaimRecords), run as one execution, so millisecond GPU passes do not
   * wait for a lane handover and a commit per record. The execution hands the lane to real time
   * between records (sidecar/bulk/records.ts), so real time does not wait for all of them.
   */
  bulkExecutionMs: 30,
  bulkClaimRecords: 16,
  /**
   * A submitted job wakes the job workers of at most this many sidecars (edge/wake.ts); the others
   * find it at their next idle poll. Well under a Worker's subrequest limit.
   */
  wakeSidecars: 32,
  bulkDataRetentionMs: 7 * 24 * 60 * 60 * 1000,
  batchMetadataRetentionMs: 30 * 24 * 60 * 60 * 1000,
  /** A training file (labelled examples of one task), bytes and examples. */
  trainingFileBytes: 25 * 1024 * 1024,
  trainingFileExamples: 10_000,
  /** Examples a training file needs of every outcome of every question (each true and false, option, level). */
  trainingExamplesPerOutcome: 10,
  /** Unfinished training jobs an account may have at once. */
  activeTrainings: 3,
  /**
   * Training jobs whose file and examples an account may keep at once: unfinished ones, and finished
   * ones within their data period. A cancelled, failed or expired job's data is deleted at the next
   * cleanup (within cleanupIntervalMs: nothing of it is served), which frees its place.
   */
  storedTrainings: 20,
  /** The Retry-After of a job create refused by an account limit (active batches or trainings, batch storage): slots free as jobs end. */
  jobLimitRetryMs: 60_000,
  /** A training job not finished this long after it was created expires. */
  trainingLifetimeMs: 24 * 60 * 60 * 1000,
  /** A training file and its examples are deleted this long after the job ends; trained models stay until retired. */
  trainingDataRetentionMs: 30 * 24 * 60 * 60 * 1000,
  /** Image vertical: one still JPEG or PNG source, and its canonical RGB PNG, each at most 10 MiB. */
  imageSourceBytes: 10 * 1024 * 1024,
  imageCanonicalBytes: 10 * 1024 * 1024,
  /** Decoded size of a photo: pixels, and pixels along either edge. */
  imagePixels: 16_000_000,
  imageEdgePixels: 8192,
  /**
   * The canonical PNG is scaled down (never up) to at most this many pixels: raw RGB is 3 bytes a
   * pixel and PNG adds at most a byte a row and a few per 64 KiB, so it always fits
   * imageCanonicalBytes, and it stays well above any model input (at most 400,000 pixels).
   */
  imageCanonicalPixels: 3_000_000,
  imageFilenameChars: 255,
  /** How long an image's signed PUT stays valid. */
  imageUploadValidityMs: 15 * 60 * 1000,
  /** A runtime's (or the preprocessing sidecar's) read of an image: at most this, and never past the asset's life or the lease it serves. */
  imageReadGrantMs: 10 * 60 * 1000,
  /** The lease a completion holds while the sidecar preprocesses the image. */
  imageFinalizeLeaseMs: 60_000,
  /**
   * Per account, checked under its lock whatever the credential: image assets kept at once (until
   * their files are deleted), assets created in any minute, and completions the sidecars preprocess
   * at once (one account's large photos cannot hold up every other account's completions).
   */
  imageAssetsStored: 20_000,
  imageAssetsPerMinute: 1_200,
  imageCompletionsAtOnce: 2,
  /** Prediction assets, and training assets no job has taken, live this long from creation. */
  imagePredictionRetentionMs: 24 * 60 * 60 * 1000,
  /** Training assets live this long after their job is terminal. */
  imageTrainingRetentionMs: 30 * 24 * 60 * 60 * 1000,
  /** An image model's input (the processor budget): at least and at most this many pixels. */
  imageInputPixels: { min: 65_536, max: 400_000 },
  /** Visual tokens an image decision may process (its actual model context). */
  imageVisualTokens: 4096,
  /** An image decision's question: 2-16 named answers, the instructions and each description at most this many characters. */
  imageOutcomes: { min: 2, max: 16 },
  imageQuestionTextChars: 2000,
  /**
   * How long an image decision's credit reservation lives unless settled or released: longer than
   * any decision (a lane wait and a runtime call), so only an edge that died in between leaves one
   * for the sidecar's sweep to release.
   */
  imageCreditHoldMs: 5 * 60_000,
  /** Image models (trainings with a result) GET /v1/image-models lists, newest first. */
  imageModelsListed: 100,
  cleanupIntervalMs: 60_000,
  httpConnectionsPerService: 32,
  toolRequestTimeoutMs: 60_000,
  /** Execution wait before a queued decision answers 504. */
  laneWaitMs: 30_000,
  /** Real-time executions that may run before a waiting bulk execution. */
  realtimeBeforeBulk: 4,
  /** Pending executions per lane beyond the one running. */
  pendingPerLane: 1,
  /** A runtime pass that has not answered by then is failed (a hung runtime must not hold the GPU lane forever). */
  runtimePassTimeoutMs: 120_000,
} as const;

/** The alias every account may use for the shared base model. */
export const SHARED_ALIAS = "svc-shared";

/** The image backbone image models are trained on (an image training's base model, by default). */
export const IMAGE_BASE_ALIAS = "svc-image";

/** Request id header read by the third-party clients on every response, errors included. */
export const REQUEST_ID_HEADER = "x-typesafe-request-id";
