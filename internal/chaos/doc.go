// Package chaos is doclog's process-level chaos run (`make chaos`,
// docs/reliability.md). It owns everything the run needs and nothing the
// pipeline uses:
//
//   - services: a Kafka broker, a Postgres (fsync on) and, unless one is
//     given, a ClickHouse of the run's own, started with scripts/*.sh;
//   - the fleet: every role as its own `doclog serve` process, supervised
//     like a container runtime would (an exit nobody asked for is restarted
//     and reported);
//   - proxies: loopback TCP proxies that can cut a member off its Postgres or
//     its broker for a while;
//   - the fault schedule, derived from a seed, and the faults themselves;
//   - the load: idempotency-keyed submits retried with the same key, and the
//     ledger of every job ingest acknowledged;
//   - the checks: the drain after the last fault, the ledger against the
//     status API and the log, `doclogctl verify`, and the report.
//
// Run drives one run; chaosrun is the command scripts/chaos.sh invokes, and
// the package's test is the short version `go test ./...` runs.
package chaos
