// Workload W1, fixed, driven through the Powerhouse reactor's public API, so
// that scripts/bench-reference.sh can set the reference's figure beside
// doclog's on the same Postgres server in one run.
//
// The reactor's own harness (packages/reactor/bench in its repository) is a
// k6 load against an HTTP host in Docker Compose for a fixed time, on drive
// documents, and reads its figure from Prometheus; it runs no fixed
// workload. This driver composes the reactor the way that host does
// (ReactorBuilder, Kysely over a pg pool, the drive document model, the
// in-process executor, the default read models) and runs W1 instead:
//
//   - D documents (drives) are created first, and the run waits until each
//     creation is READ_READY, so the measured phase starts idle;
//   - each document then receives R rounds of K actions: mode single sends
//     one action per job, each document's next job as soon as execute()
//     has accepted the previous one (the reactor's acknowledgement, as
//     doclog's closed loop waits for ingest's 202), all documents at once;
//     mode batch sends one job of K actions per document and round;
//   - the action is SET_DRIVE_NAME, the reference harness's own action: it
//     replaces one field of the document's global state, so the state stays
//     the same size however long the run, as doclog's MERGE_PATCH over K
//     keys does;
//   - a job is READ_READY when the reactor emits JOB_READ_READY for it on
//     its event bus: the reactor's read models that run before readiness
//     (the document view and the document indexer, its defaults) have
//     indexed the job's operations, and reads with the job's consistency
//     token no longer wait. JobStatus.READ_READY in the job tracker is set
//     from the same event.
//
// Operations/s to READ_READY is the run's operations over the time from the
// first submission to the last JOB_READ_READY, as doclogctl bench counts.
//
// Usage: node w1.mjs --database-url URL [--documents 200] [--actions 50]
//   [--rounds 1] [--mode single|batch] [--drain-seconds 600]
// The run creates a database of its own on the server of URL and drops it
// after. It prints one JSON object on stdout.
import { parseArgs } from "node:util";
import {
  ReactorBuilder,
  ReactorEventTypes,
} from "@powerhousedao/reactor";
import {
  driveDocumentModelModule,
  setDriveName,
} from "@powerhousedao/shared/document-drive";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";

const { values: opts } = parseArgs({
  options: {
    "database-url": { type: "string" },
    documents: { type: "string", default: "200" },
    actions: { type: "string", default: "50" },
    rounds: { type: "string", default: "1" },
    mode: { type: "string", default: "single" },
    "drain-seconds": { type: "string", default: "600" },
    "pool-size": { type: "string", default: "16" },
  },
});
const D = Number(opts.documents);
const K = Number(opts.actions);
const R = Number(opts.rounds);
const mode = opts.mode;
if (!opts["database-url"] || !(D > 0) || !(K > 0) || !(R > 0) || !["single", "batch"].includes(mode)) {
  console.error("usage: node w1.mjs --database-url URL [--documents D] [--actions K] [--rounds R] [--mode single|batch]");
  process.exit(2);
}

const serverURL = new URL(opts["database-url"]);
const dbName = `doclog_reference_${process.pid}_${Date.now()}`;

async function admin(sql) {
  const c = new pg.Client({ connectionString: serverURL.toString() });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

const ms = (t) => Number(t) / 1e6;

async function main() {
  await admin(`CREATE DATABASE ${dbName}`);
  const runURL = new URL(serverURL);
  runURL.pathname = "/" + dbName;
  const pool = new pg.Pool({ connectionString: runURL.toString(), max: Number(opts["pool-size"]) });
  let module;
  try {
    module = await new ReactorBuilder()
      .withKysely(new Kysely({ dialect: new PostgresDialect({ pool }) }))
      .withDocumentModelSources([driveDocumentModelModule])
      .buildModule();
    const { reactor, eventBus } = module;

    // JOB_READ_READY and JOB_FAILED, by job id, timed on arrival.
    const waiters = new Map();
    const readyAt = new Map();
    const failed = new Map();
    const settle = (id) => {
      const w = waiters.get(id);
      if (w) {
        waiters.delete(id);
        w();
      }
    };
    eventBus.subscribe(ReactorEventTypes.JOB_READ_READY, (_t, e) => {
      readyAt.set(e.jobId, process.hrtime.bigint());
      settle(e.jobId);
    });
    eventBus.subscribe(ReactorEventTypes.JOB_FAILED, (_t, e) => {
      failed.set(e.jobId, String(e.error?.message ?? e.error));
      settle(e.jobId);
    });
    const settled = (id) =>
      readyAt.has(id) || failed.has(id)
        ? Promise.resolve()
        : new Promise((resolve) => waiters.set(id, resolve));

    // Setup, unmeasured: create the documents, wait until they are readable.
    const docs = [];
    const creations = [];
    for (let d = 0; d < D; d++) {
      const doc = driveDocumentModelModule.utils.createDocument();
      docs.push(doc.header.id);
      creations.push(reactor.create(doc).then((info) => settled(info.id)));
    }
    await Promise.all(creations);
    if (failed.size > 0) {
      throw new Error(`creating the documents failed: ${[...failed.values()][0]}`);
    }
    readyAt.clear();

    // Measured phase.
    const jobs = []; // { id, ops, submitted }
    let submitFailures = 0;
    let lastSubmitError = "";
    const start = process.hrtime.bigint();
    await Promise.all(
      docs.map(async (id) => {
        for (let r = 0; r < R; r++) {
          const rounds = mode === "single" ? [...Array(K).keys()].map((k) => [k]) : [[...Array(K).keys()]];
          for (const ks of rounds) {
            const actions = ks.map((k) => setDriveName({ name: `k${k}-r${r}` }));
            const submitted = process.hrtime.bigint();
            try {
              const info = await reactor.execute(id, "main", actions);
              jobs.push({ id: info.id, ops: actions.length, submitted });
            } catch (err) {
              submitFailures++;
              lastSubmitError = String(err?.message ?? err);
            }
          }
        }
      }),
    );
    const submitDone = process.hrtime.bigint();
    const drainDeadline = Date.now() + Number(opts["drain-seconds"]) * 1000;
    let drained = true;
    for (const j of jobs) {
      const left = drainDeadline - Date.now();
      const timedOut = await Promise.race([
        settled(j.id).then(() => false),
        new Promise((resolve) => setTimeout(() => resolve(true), Math.max(left, 0)).unref()),
      ]);
      if (timedOut) {
        drained = false;
        break;
      }
    }

    let last = start;
    let ops = 0;
    let readyJobs = 0;
    const lat = [];
    for (const j of jobs) {
      const at = readyAt.get(j.id);
      if (at === undefined) continue;
      readyJobs++;
      ops += j.ops;
      if (at > last) last = at;
      lat.push(ms(at - j.submitted));
    }
    lat.sort((a, b) => a - b);
    const pct = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.ceil((p / 100) * lat.length) - 1)] : 0);
    const seconds = ms(last - start) / 1000;
    const submittedOps = jobs.reduce((n, j) => n + j.ops, 0);
    const out = {
      reactor: "@powerhousedao/reactor",
      mode,
      documents: D,
      actionsPerDocument: K,
      rounds: R,
      action: "SET_DRIVE_NAME on powerhouse/document-drive",
      endPoint: "JOB_READ_READY (document view and document indexer indexed)",
      submitted: { jobs: jobs.length, operations: submittedOps },
      submitSeconds: ms(submitDone - start) / 1000,
      submitFailures,
      lastSubmitError: lastSubmitError || undefined,
      failed: failed.size,
      drained,
      readReady: {
        jobs: readyJobs,
        operations: ops,
        seconds,
        opsPerSec: seconds > 0 ? ops / seconds : 0,
        jobsPerSec: seconds > 0 ? readyJobs / seconds : 0,
        latencyP50Ms: pct(50),
        latencyP95Ms: pct(95),
        latencyP99Ms: pct(99),
        latencyMaxMs: lat.length ? lat[lat.length - 1] : 0,
      },
      node: process.version,
    };
    process.stdout.write(JSON.stringify(out, null, 2) + "\n");
    if (!drained || failed.size > 0 || submitFailures > 0) process.exitCode = 3;
  } finally {
    // The read models that run after readiness may still be indexing the
    // last jobs; let them finish before the pool ends.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    try {
      await module?.reactor?.kill?.();
    } catch {
      // the pool is ended below either way
    }
    await pool.end().catch(() => {});
    await admin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  }
}

main().catch((err) => {
  console.error("w1.mjs:", err?.stack ?? err);
  process.exit(1);
});
