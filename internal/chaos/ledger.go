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
}

// Ledger is the load's record of acknowledged jobs: what the checks hold the
// pipeline to.
type Ledger struct {
	mu      sync.Mutex
	entries []Entry
	byJob   map[string]int
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
