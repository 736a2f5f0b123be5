// Command balances-worker runs and operates the ledger_balances projector
// (package balances) against a doclog deployment: serve, migrate,
// projector list|lag|rebuild and quarantine list|lift, with doclog's flags,
// DOCLOG_* variables and config file (package worker).
//
//	balances-worker migrate --database-url postgres://...
//	balances-worker serve --database-url postgres://... --kafka-seeds 127.0.0.1:9092
package main

import (
	"example.com/doclog-projector/balances"

	"github.com/doclog/doclog/worker"
)

func main() { worker.Main(balances.Spec()) }
