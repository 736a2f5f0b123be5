package chaos

import (
	"sync"
	"time"
)

// Job kinds the load submits.
const (
	KindCreate   = "create"   // a ledger document with one account
	KindDeposit  = "deposit"  // succeeds: amounts are small
	KindWithdraw = "withdraw" // meant to fail: an overdraft

	// The sync drivers' jobs (sync.go), on documents nothing else writes.
	KindReplica       = "replica"        // a ledger document written only by load jobs afterwards
	KindLoad          = "load"           // operations of the replica's origin, placed by timestamp
	KindBranched      = "branched"       // a ledger document whose branches are forked and promoted
	KindBranchDeposit = "branch-deposit" // a deposit on one branch of it (main included)
	KindFork          = "fork"
	KindPromote       = "promote"
)

// Entry is one job ingest acknowledged with 202.
type Entry struct {
	Key      string // the Idempotency-Key of every attempt
	JobID    string
	DocID    string
	Kind     string
	Amount   int64
	Ops      int // operations the job writes when it succeeds
	AckedAt  time.Time
	Attempts int
	// Sync is what a sync driver's job must do, nil for the other jobs.
	Sync *SyncJob
}

// SyncJob is what a sync driver knew a job must do when it submitted it:
// every earlier job of the document had its result by then.
type SyncJob struct {
	// Branch is the branch a deposit writes, a fork creates or a promote
	// promotes (onto main).
	Branch string
	// Refusal is the error name the job must fail with, "" when it must
	// succeed.
	Refusal string
	// At is a fork's point on main's global scope.
	At int64
	// Loaded are a load's operations, in the order sent.
	Loaded []RemoteOp
	// Stored and Replayed are what a load must store and find already
	// stored; Reshuffled is the least it must reshuffle (stored operations
	// that sort after one it stores).
	Stored, Replayed, Reshuffled int64
	// Stale marks a promote sent with a tip read before main's last write.
	Stale bool
}

// Ledger is the load's record of acknowledged jobs: what the checks hold the
// pipeline to.
type Ledger struct {
	mu      sync.Mutex
	entries []Entry
	byJob   map[string]int
	notes   []string // what a sync driver saw that contradicts its model
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger { return &Ledger{byJob: map[string]int{}} }

// Add records an acknowledgement. A job acknowledged twice (a retry answered
// after an earlier attempt was) stays one entry.
func (l *Ledger) Add(e Entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.byJob[e.JobID]; ok {
		return
	}
	l.byJob[e.JobID] = len(l.entries)
	l.entries = append(l.entries, e)
}

// Entries returns a copy of every entry.
func (l *Ledger) Entries() []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Entry(nil), l.entries...)
}

// Len is the number of acknowledged jobs.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// Note records a contradiction a sync driver saw outside any job's
// outcome (a tip the read store gave); every note fails the run.
func (l *Ledger) Note(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notes = append(l.notes, s)
}

// Notes returns the notes so far.
func (l *Ledger) Notes() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.notes...)
}
