package projectors

import "context"

// NewWithHooks is New with fault-injection points for the tests: inTx runs
// in the batch transaction before the checkpoint moves (an error rolls the
// batch back), afterTx after the database commit and before the Kafka
// commit.
func NewWithHooks(cfg Config, inTx func(ctx context.Context) error, afterTx func(ctx context.Context)) (*Runner, error) {
	r, err := New(cfg)
	if err != nil {
		return nil, err
	}
	r.hooks = hooks{inTx: inTx, afterTx: afterTx}
	return r, nil
}

// DocumentTypeReads is how many document types the runner read from the
// log (the reconciler's lookups for a filter by type).
func (r *Runner) DocumentTypeReads() int64 {
	if r.types == nil {
		return 0
	}
	return r.types.reads.Load()
}

// SetLogReaders sets how many log reads one batch has in flight at once
// (BenchmarkRebuild compares one with the default) and returns the
// previous value.
func SetLogReaders(n int) int {
	prev := logReaders
	logReaders = n
	return prev
}

// ReconcileConfirming is a periodic pass of the reconciler, which heals
// only streams the previous periodic pass found behind too.
func (r *Runner) ReconcileConfirming(ctx context.Context) (ReconcileReport, error) {
	return r.reconcileReported(ctx, true)
}
