package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report holds a run's figures and its verdict.
type Report struct {
	Seed    uint64
	Load    LoadStats
	Faults  []Injected
	Exits   []Exit
	Acked   int
	Retried int // acknowledged jobs that took more than one attempt
	// TopicRecords are the job records on the jobs topic; TopicDupJobs the
	// job ids with more than one.
	TopicRecords int
	TopicDupJobs int
	Settled      int
	FailedBy     map[string]int // FAILED jobs by the first error's name
	Lost         []Outcome      // acknowledged, with no final status
	Duplicated   []Outcome      // applied more than once
	Mismatched   []Outcome      // status and log disagree
	Unexpected   map[string]int // a deposit that failed, a withdrawal that did not, by kind and status
	Verify       VerifyResult
	Balances     Balances
	Sync         SyncTally
	Drained      bool
	Drain        time.Duration // from the end of the last fault until every acknowledged job had a result
	DrainLimit   time.Duration
	LastFault    time.Time
	LastSettled  []Entry // the jobs whose results came last
	Dir          string  // where the logs are
}

// NewReport tallies the outcomes.
func NewReport(seed uint64, outcomes []Outcome) *Report {
	r := &Report{Seed: seed, Acked: len(outcomes), FailedBy: map[string]int{}, Unexpected: map[string]int{}}
	for _, o := range outcomes {
		if o.Attempts > 1 {
			r.Retried++
		}
		if !o.Final() {
			r.Lost = append(r.Lost, o)
			continue
		}
		r.Settled++
		if o.Status == "FAILED" {
			r.FailedBy[o.Reason]++
		}
		if o.AppliedTwice() {
			r.Duplicated = append(r.Duplicated, o)
		} else if o.Inconsistent() {
			r.Mismatched = append(r.Mismatched, o)
		}
		if failed := o.Status == "FAILED"; o.Sync == nil && failed != (o.Kind == KindWithdraw) {
			r.Unexpected[o.Kind+" "+o.Status+" "+o.Reason]++
		}
	}
	return r
}

// Failures are the reasons the run fails; none means it passed.
func (r *Report) Failures() []string {
	var f []string
	if n := len(r.Lost); n > 0 {
		f = append(f, fmt.Sprintf("%d acknowledged job(s) lost", n))
	}
	if n := len(r.Duplicated); n > 0 {
		f = append(f, fmt.Sprintf("%d job(s) applied more than once", n))
	}
	if n := len(r.Mismatched); n > 0 {
		f = append(f, fmt.Sprintf("%d job(s) whose status and operations disagree", n))
	}
	if n := len(r.Balances.Off); n > 0 {
		f = append(f, fmt.Sprintf("%d document(s) whose balance is not the sum of their deposits", n))
	}
	f = append(f, r.Sync.Failures()...)
	if !r.Verify.Ran {
		f = append(f, "verify did not run to the end: "+r.Verify.Why)
	} else if r.Verify.Findings > 0 {
		f = append(f, fmt.Sprintf("%d divergent row(s) found by verify", r.Verify.Findings))
	}
	if !r.Drained {
		f = append(f, fmt.Sprintf("not drained %s after the last fault", r.Drain.Round(time.Millisecond)))
	} else if r.Drain > r.DrainLimit {
		f = append(f, fmt.Sprintf("drain %s exceeds the limit %s", r.Drain.Round(time.Millisecond), r.DrainLimit))
	}
	for _, in := range r.Faults {
		if in.Err != nil {
			f = append(f, fmt.Sprintf("fault %s failed: %v", in.Fault, in.Err))
		}
	}
	return f
}

// Print writes the report.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\n== chaos report, seed %d (logs in %s)\n", r.Seed, r.Dir)
	kinds := map[string]int{}
	for _, in := range r.Faults {
		kinds[in.Kind]++
	}
	fmt.Fprintf(w, "faults:      %d (%s)\n", len(r.Faults), joinCounts(kinds))
	fmt.Fprintf(w, "load:        %d submitted, %d attempts, %d retries after 503 or 429, %d after connection errors or timeouts, %d ticks dropped, %d abandoned unacknowledged, %d refused\n",
		r.Load.Submitted, r.Load.Attempts, r.Load.Retries503, r.Load.RetriesNet, r.Load.Dropped, r.Load.Abandoned, r.Load.Rejected)
	if r.Load.Rejected > 0 {
		fmt.Fprintf(w, "             last refusal: %s\n", tail(r.Load.LastReject, 300))
	}
	fmt.Fprintf(w, "acked:       %d (%d after a retry under the same key)\n", r.Acked, r.Retried)
	fmt.Fprintf(w, "jobs topic:  %d records, %d job ids on more than one\n", r.TopicRecords, r.TopicDupJobs)
	fmt.Fprintf(w, "settled:     %d\n", r.Settled)
	fmt.Fprintf(w, "failed:      %s\n", joinCounts(r.FailedBy))
	if len(r.Unexpected) > 0 {
		fmt.Fprintf(w, "unexpected:  %s (a deposit should succeed, an overdraft fail)\n", joinCounts(r.Unexpected))
	}
	fmt.Fprintf(w, "lost:        %d%s\n", len(r.Lost), sample(r.Lost))
	fmt.Fprintf(w, "duplicated:  %d%s\n", len(r.Duplicated), sample(r.Duplicated))
	fmt.Fprintf(w, "mismatched:  %d%s\n", len(r.Mismatched), sample(r.Mismatched))
	if r.Verify.Ran || r.Verify.Findings > 0 {
		fmt.Fprintf(w, "divergent:   %d (verify: %d documents, %d operations, %d jobs; %s)\n",
			r.Verify.Findings, r.Verify.Docs, r.Verify.Ops, r.Verify.Jobs, joinCounts(r.Verify.ByKind))
		for _, s := range r.Verify.Sample {
			fmt.Fprintf(w, "             %s\n", tail(s, 300))
		}
	} else {
		fmt.Fprintf(w, "divergent:   unknown (%s)\n", r.Verify.Why)
	}
	sy := r.Sync
	fmt.Fprintf(w, "loads:       %d on %d replicas: %d stored operations, %d replays only, %d reshuffled, %d refused (MISSING_OPERATIONS); operations %d stored, %d replayed, %d reshuffled\n",
		sy.Loads, sy.Replicas, sy.LoadsStored, sy.LoadsReplayed, sy.LoadsReshuffled, sy.LoadsRefused, sy.OpsStored, sy.OpsReplayed, sy.OpsReshuffled)
	fmt.Fprintf(w, "branches:    %d documents: %d forks, %d promotes applied, %d refused as BranchConflict, %d deposits on their branches\n",
		sy.Branched, sy.Forks, sy.Promotes, sy.Conflicts, sy.BranchDeposits)
	fmt.Fprintf(w, "sync off:    %d\n", len(sy.Off))
	for _, s := range sy.Off[:min(len(sy.Off), 5)] {
		fmt.Fprintf(w, "             %s\n", tail(s, 300))
	}
	floor := ""
	if !r.Balances.Exact {
		floor = ", as floors: some submits were abandoned"
	}
	fmt.Fprintf(w, "balances:    %d documents read back (%d of them sync documents' branches), %d off%s\n", r.Balances.Checked, r.Balances.Sync, len(r.Balances.Off), floor)
	for _, s := range r.Balances.Off[:min(len(r.Balances.Off), 5)] {
		fmt.Fprintf(w, "             %s\n", s)
	}
	drain := r.Drain.Round(time.Millisecond).String()
	if !r.Drained {
		drain = "not drained after " + drain
	}
	fmt.Fprintf(w, "drain:       %s after the last fault (limit %s)\n", drain, r.DrainLimit)
	if n := len(r.LastSettled); n > 0 {
		fmt.Fprintf(w, "             the last fault was over at %s; %d job(s) settled last, e.g.", r.LastFault.Format("15:04:05.000"), n)
		for _, e := range r.LastSettled[:min(n, 3)] {
			fmt.Fprintf(w, " %s (%s, acked at %+.1fs, %d attempts)", e.JobID, e.Kind, e.AckedAt.Sub(r.LastFault).Seconds(), e.Attempts)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "exits:       %d unexpected\n", len(r.Exits))
	for _, e := range r.Exits {
		fmt.Fprintf(w, "  %s %s (%s); its log ended:\n%s\n", e.At.Format("15:04:05.000"), e.Member, e.Status, indent(e.Tail))
	}
	if f := r.Failures(); len(f) > 0 {
		fmt.Fprintf(w, "verdict:     FAIL: %s\n", strings.Join(f, "; "))
	} else {
		fmt.Fprintln(w, "verdict:     PASS")
	}
}

func joinCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sample(os []Outcome) string {
	if len(os) == 0 {
		return ""
	}
	var b strings.Builder
	for _, o := range os[:min(len(os), 5)] {
		fmt.Fprintf(&b, "\n             job %s (%s of %s, acked %s, %d attempts): status %q %s, %d ops (%d distinct)",
			o.JobID, o.Kind, o.DocID, o.AckedAt.Format("15:04:05.000"), o.Attempts, o.Status, o.Reason, o.Written, o.Distinct)
		if o.Err != nil {
			fmt.Fprintf(&b, " [%v]", o.Err)
		}
	}
	return b.String()
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
