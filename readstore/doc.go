// Package readstore is doclog's query API over the projections and the
// operation log: documents by id or slug from the document view,
// documents by type and by parent and their relationships from the
// relationship index, a document's operations and its state at a past
// revision from the log (keyframe plus replay with the model SDK, every hash
// checked).
//
// Every read accepts a consistency token — the coordinates a job wrote — and
// waits, bounded, until the source that serves the read has applied every
// coordinate, so a client reads its own writes across services. The waits
// of all requests share one poller per source per Handler
// (internal/coalesce): each tick looks up every waited-for stream of a
// projection in one query, so the database load does not grow with the
// number of waiting clients.
//
// GET /v1/changes is the change feed: one Server-Sent Event per committed
// job per document, from the log's gap-safe tail, resumable from any event's
// id; readstore/feed assembles and filters the events, and the streams that
// wait at the head share one poll of the tail's end.
//
// The projections are reached through Store, whose Postgres implementation
// is readstore/pgread; the log through Log (*log/postgres.Store satisfies
// it). docs/readstore.md documents the API and the token's wire form;
// openapi.yaml is its contract.
package readstore
