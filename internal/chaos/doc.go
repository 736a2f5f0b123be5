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
//   - the sync drivers: documents written one job at a time by load jobs
//     (replicas of an origin the driver keeps) or by forks, writes and
//     promotes of branches, each job recorded with what it must do;
//   - the checks: the drain after the last fault, the ledger against the
//     status API and the log, the sync jobs against what they had to do,
//     `doclogctl verify`, the balances read back, and the report.
//
// Run drives one run; chaosrun is the command scripts/chaos.sh invokes, and
// the package's test is the short version `go test ./...` runs.
package chaos
