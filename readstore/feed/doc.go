// Package feed owns the read store's change feed below HTTP: the events it
// assembles from the log's gap-safe tail (one per committed job per
// document), their resumable positions, the filters a subscriber chooses,
// a reader that holds one page of the tail (or one transaction, when a
// transaction is larger) at a time, and the hub that polls the end of the
// tail once per interval for every subscriber waiting at the head.
//
// readstore serves it as GET /v1/changes (Server-Sent Events);
// docs/readstore.md, "Change feed", is the contract.
package feed
