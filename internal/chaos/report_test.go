package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestReportTalliesAndFails(t *testing.T) {
	ok := func(kind, status, reason string, want, ops, unique int) Outcome {
		return Outcome{Entry: Entry{JobID: kind + status, Kind: kind, Ops: want, Attempts: 1}, Status: status, Reason: reason, Written: ops, Distinct: unique}
	}
	outcomes := []Outcome{
		ok(KindDeposit, "WRITE_READY", "", 1, 1, 1),
		ok(KindCreate, "READ_READY", "", 2, 2, 2),
		ok(KindWithdraw, "FAILED", "BusinessRuleViolation", 1, 0, 0),
		ok(KindDeposit, "PENDING", "", 1, 0, 0),             // lost
		ok(KindDeposit, "FAILED", "", 1, 0, 0),              // lost: no reason
		ok(KindDeposit, "WRITE_READY", "", 1, 2, 1),         // applied twice, op id repeated
		ok(KindCreate, "WRITE_READY", "", 2, 1, 1),          // short of operations
		ok(KindDeposit, "FAILED", "ModelNotFound", 1, 0, 0), // unexpected, not a failure of the run
	}
	r := NewReport(1, outcomes)
	r.Verify = VerifyResult{Ran: true}
	r.Drained, r.Drain, r.DrainLimit = true, 3*time.Second, 10*time.Second
	assert.Equal(t, 8, r.Acked)
	assert.Equal(t, 6, r.Settled)
	assert.Len(t, r.Lost, 2)
	assert.Len(t, r.Duplicated, 1)
	assert.Len(t, r.Mismatched, 1)
	assert.Equal(t, map[string]int{"BusinessRuleViolation": 1, "ModelNotFound": 1}, r.FailedBy)
	assert.Equal(t, map[string]int{"deposit FAILED ModelNotFound": 1}, r.Unexpected)
	f := strings.Join(r.Failures(), "; ")
	assert.Contains(t, f, "2 acknowledged job(s) lost")
	assert.Contains(t, f, "1 job(s) applied more than once")
	assert.Contains(t, f, "1 job(s) whose status and operations disagree")
	assert.NotContains(t, f, "drain")

	var out strings.Builder
	r.Print(&out)
	assert.Contains(t, out.String(), "verdict:     FAIL")
}

func TestReportPassesOnlyWhenEverythingHolds(t *testing.T) {
	r := NewReport(2, []Outcome{{Entry: Entry{JobID: "j", Kind: KindDeposit, Ops: 1}, Status: "WRITE_READY", Written: 1, Distinct: 1}})
	r.Drained, r.Drain, r.DrainLimit = true, time.Second, 10*time.Second
	r.Verify = VerifyResult{Ran: true}
	assert.Equal(t, []string{"no load that stored operations", "no load of replays only", "no load that reshuffled", "no load refused",
		"no fork", "no promote applied", "no promote refused as a conflict"}, r.Failures(), "a run that exercised no sync proves nothing of it")
	r.Sync = SyncTally{LoadsStored: 1, LoadsReplayed: 1, LoadsReshuffled: 1, LoadsRefused: 1, Forks: 1, Promotes: 1, Conflicts: 1}
	assert.Empty(t, r.Failures())

	r.Drain = 11 * time.Second
	assert.Equal(t, []string{"drain 11s exceeds the limit 10s"}, r.Failures())
	r.Drain = time.Second
	r.Verify = VerifyResult{Why: "this doclogctl has no verify command"}
	assert.Equal(t, []string{"verify did not run to the end: this doclogctl has no verify command"}, r.Failures())
	r.Verify = VerifyResult{Ran: true, Findings: 4}
	assert.Equal(t, []string{"4 divergent row(s) found by verify"}, r.Failures())
	r.Verify = VerifyResult{Ran: true}
	r.Balances.Off = []string{"d: balance 7, the succeeded deposits sum to 5"}
	assert.Equal(t, []string{"1 document(s) whose balance is not the sum of their deposits"}, r.Failures())
	r.Balances.Off = nil
	r.Sync.Off = []string{"promote j of d: ended WRITE_READY , had to end BranchConflict"}
	assert.Equal(t, []string{"1 sync job(s) not as due"}, r.Failures())
}

// A load's writes are what its placement stored and moved: a reshuffle is
// not a job applied twice, one more operation than that is.
func TestReportLoadWrites(t *testing.T) {
	load := func(written int) Outcome {
		return Outcome{Entry: Entry{JobID: "l", Kind: KindLoad, Ops: 1, Sync: &SyncJob{Stored: 1}}, Status: "WRITE_READY",
			Written: written, Distinct: written, Load: &LoadCounts{Stored: 1, Reshuffled: 2, Skip: 2}}
	}
	r := NewReport(3, []Outcome{load(3)})
	assert.Empty(t, r.Duplicated)
	assert.Empty(t, r.Mismatched)
	assert.Empty(t, r.Unexpected)
	assert.Len(t, NewReport(3, []Outcome{load(4)}).Duplicated, 1)
	assert.Len(t, NewReport(3, []Outcome{load(2)}).Mismatched, 1)
}
