// Package ingest owns doclog's submit API: the HTTP endpoints that
// turn a client's request into a doclog.job.v1 record on the jobs topic, and
// the job status endpoint that reports what became of it.
//
// The submit path validates everything it can without state — the document
// type and action types against the model registry, each action's scope and
// input against the model's ActionSpec, size limits, and the record contract
// itself — so that bad input is answered with a precise 4xx and never reaches
// the topic. It then produces with the idempotent producer and acks=all and
// answers 202 only after the broker acknowledged: an accepted job is durable
// before the client hears of it. It never touches Postgres, so submitting
// keeps working while the database is down; executors catch up later.
//
// Job status reads the job results the executor writes (through the small
// ResultReader seam that *postgres.Store satisfies). Clients that long-poll
// with ?wait= are all served by one shared poller that looks up every waiting
// job id in one query per tick, so a thousand waiting clients cost one query,
// not a thousand.
//
// See docs/ingest.md for the API's rules (job and action ids, the status of a
// job without a result, limits and error codes) and openapi.yaml for its
// contract.
package ingest
