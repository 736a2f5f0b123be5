package chaos

import (
	"fmt"

	"github.com/doclog/doclog/executor/place"
	"github.com/doclog/doclog/executor/reduce"
	oplog "github.com/doclog/doclog/log"
)

// The refusals the sync drivers provoke, as GET /v1/jobs/{id} names them.
const (
	nameMissingOperations = place.NameMissingOperations
	nameBranchConflict    = reduce.NameBranchConflict
)

// SyncTally is what the sync drivers' jobs did, and where that differs from
// what each had to do.
type SyncTally struct {
	Replicas, Branched int // documents
	Loads              int // acknowledged load jobs
	// Loads that stored operations, were replays only, reshuffled stored
	// operations, and were refused as MISSING_OPERATIONS.
	LoadsStored, LoadsReplayed, LoadsReshuffled, LoadsRefused int
	// Operations the loads stored, found stored and reshuffled.
	OpsStored, OpsReplayed, OpsReshuffled int64
	Forks                                 int // forks that succeeded
	Promotes, Conflicts                   int // promotes applied, and refused as BranchConflict
	BranchDeposits                        int
	Off                                   []string
}

// CheckSync holds every sync job with a final status to what its driver
// recorded it had to do: succeed or fail with its refusal, and for a load
// store and find stored the operations the driver counted, reshuffling at
// least the stored operations that sort after one it stores (and none when
// none do). notes are what the drivers saw besides (Ledger.Notes).
func CheckSync(outcomes []Outcome, notes []string) SyncTally {
	t := SyncTally{Off: append([]string(nil), notes...)}
	off := func(o *Outcome, format string, args ...any) {
		t.Off = append(t.Off, fmt.Sprintf("%s %s of %s: ", o.Kind, o.JobID, o.DocID)+fmt.Sprintf(format, args...))
	}
	for i := range outcomes {
		o := &outcomes[i]
		if o.Sync == nil {
			continue
		}
		switch o.Kind {
		case KindReplica:
			t.Replicas++
		case KindBranched:
			t.Branched++
		case KindLoad:
			t.Loads++
		}
		if !o.Final() {
			continue // lost: the report counts it
		}
		succeeded := o.succeeded()
		if want := o.Sync.Refusal; (want == "") != succeeded || (want != "" && o.Reason != want) {
			if want == "" {
				want = "success"
			}
			off(o, "ended %s %s, had to end %s", o.Status, o.Reason, want)
			continue
		}
		switch o.Kind {
		case KindLoad:
			if !succeeded {
				t.LoadsRefused++
				continue
			}
			t.tallyLoad(o, off)
		case KindFork:
			t.Forks++
		case KindPromote:
			if succeeded {
				t.Promotes++
			} else {
				t.Conflicts++
			}
		case KindBranchDeposit:
			t.BranchDeposits++
		}
	}
	return t
}

func (t *SyncTally) tallyLoad(o *Outcome, off func(*Outcome, string, ...any)) {
	l, sj := o.Load, o.Sync
	if l == nil {
		off(o, "succeeded without a load result")
		return
	}
	t.OpsStored += l.Stored
	t.OpsReplayed += l.Replayed
	t.OpsReshuffled += l.Reshuffled
	switch {
	case l.Stored > 0:
		t.LoadsStored++
	case l.Replayed > 0:
		t.LoadsReplayed++
	}
	if l.Reshuffled > 0 {
		t.LoadsReshuffled++
	}
	if l.Stored != sj.Stored || l.Replayed != sj.Replayed || l.Superseded != 0 {
		off(o, "stored %d, replayed %d, superseded %d; had to store %d and replay %d", l.Stored, l.Replayed, l.Superseded, sj.Stored, sj.Replayed)
	}
	if l.Reshuffled < sj.Reshuffled || (sj.Reshuffled == 0 && l.Reshuffled != 0) {
		off(o, "reshuffled %d stored operation(s); %d sort after the earliest it stores", l.Reshuffled, sj.Reshuffled)
	}
}

// Failures are the reasons the sync part fails the run: an outcome other
// than the one due, or a kind of sync job that never happened, so the run
// did not exercise it.
func (t *SyncTally) Failures() []string {
	var f []string
	if n := len(t.Off); n > 0 {
		f = append(f, fmt.Sprintf("%d sync job(s) not as due", n))
	}
	for _, c := range []struct {
		n    int
		what string
	}{
		{t.LoadsStored, "load that stored operations"}, {t.LoadsReplayed, "load of replays only"},
		{t.LoadsReshuffled, "load that reshuffled"}, {t.LoadsRefused, "load refused"},
		{t.Forks, "fork"}, {t.Promotes, "promote applied"}, {t.Conflicts, "promote refused as a conflict"},
	} {
		if c.n == 0 {
			f = append(f, "no "+c.what)
		}
	}
	return f
}

func (o *Outcome) succeeded() bool { return o.Status == "WRITE_READY" || o.Status == "READ_READY" }

// docBranch is a document's branch.
type docBranch struct{ doc, branch string }

// syncBalances says what each branch of every sync document must hold,
// from the final statuses of its jobs in the order they were acknowledged
// (one at a time per document): a replica the sum of the distinct
// operations its succeeded loads carried, a branched document what the
// branch model gives after its succeeded jobs.
func syncBalances(outcomes []Outcome) map[docBranch]int64 {
	want := map[docBranch]int64{}
	loaded := map[string]map[string]bool{} // replica → op ids stored
	branched := map[string]*branchState{}
	for i := range outcomes {
		o := &outcomes[i]
		if o.Sync == nil || !o.succeeded() {
			continue
		}
		main := docBranch{o.DocID, oplog.DefaultBranch}
		switch o.Kind {
		case KindReplica:
			loaded[o.DocID] = map[string]bool{}
			want[main] = 0
		case KindLoad:
			for _, op := range o.Sync.Loaded {
				if ids := loaded[o.DocID]; ids != nil && !ids[op.OpID] {
					ids[op.OpID] = true
					want[main] += op.Amount
				}
			}
		case KindBranched:
			branched[o.DocID] = newBranchState()
		default:
			if st := branched[o.DocID]; st != nil {
				st.apply(&o.Entry)
			}
		}
	}
	for doc, st := range branched {
		for branch := range st.balances {
			want[docBranch{doc, branch}] = st.balance(branch)
		}
	}
	return want
}
