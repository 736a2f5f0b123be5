package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	oplog "github.com/doclog/doclog/log"
)

// Sync is the part of the load that exercises sync, beside the ordinary
// traffic and through the same submits (Load.send: one Idempotency-Key per
// job, retried with it). It drives documents nothing else writes, each by
// one driver that submits a job, waits for its result, and only then
// decides the next, so what every job must do is known when it is
// submitted and goes into the ledger with it (Entry.Sync):
//
//   - replicas: a ledger document then written only by load jobs carrying
//     the operations of its origin, another replica's stream the driver
//     keeps (syncmodel.go), some stamped before what the document already
//     stores so that placement reshuffles, some loads replays only, and
//     some with a gap in their indexes, refused as MISSING_OPERATIONS;
//   - branched documents: deposits on main, a fork at an index near main's
//     tip (after main's latest skip), deposits on the branch and on main, a promote onto main with the
//     tip read from the read store, some first with a tip read before
//     main's last deposit, which must end BranchConflict, and sometimes a
//     second promote of more of the branch.
type Sync struct {
	Load     *Load
	ReadURL  string // the read store's base URL, for the branches' tips
	Replicas int    // drivers of replica documents
	Branched int    // drivers of branched documents
	// Pause is the time between a result and a driver's next submit.
	Pause time.Duration

	client *http.Client
}

// Run drives the documents until stop is done; the job in flight then may
// retry and wait for its result until deadline.
func (s *Sync) Run(stop, deadline context.Context) {
	s.client = &http.Client{Timeout: 15 * time.Second}
	var wg sync.WaitGroup
	for n := range s.Replicas + s.Branched {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := &driver{s: s, n: n, rng: rand.New(rand.NewPCG(s.Load.Seed, 1000+uint64(n))), stop: stop, deadline: deadline}
			if n < s.Replicas {
				d.replica()
			} else {
				d.branched()
			}
		}()
	}
	wg.Wait()
}

// driver is one document's sequence of jobs.
type driver struct {
	s        *Sync
	n        int
	rng      *rand.Rand
	stop     context.Context
	deadline context.Context
}

// do submits one job (e.Sync says what it must do) and waits for its final
// status; ok is false when the driver must stop: the load stopped, the job
// was not acknowledged, or it did not end as it had to (the checks report
// that from the ledger).
func (d *driver) do(path string, body any, e Entry) (Entry, bool) {
	if d.stop.Err() != nil {
		return e, false
	}
	e.Key = d.s.Load.key()
	acked, ok := d.s.Load.send(d.deadline, job{path: path, body: body, e: e})
	if !ok {
		return e, false
	}
	res, err := waitJob(d.deadline, d.s.client, d.s.Load.URL, acked.JobID)
	if err != nil {
		return acked, false
	}
	succeeded := res.Status == string(oplog.JobWriteReady) || res.Status == string(oplog.JobReadReady)
	if want := e.Sync.Refusal; (want == "" && !succeeded) || (want != "" && res.Reason != want) {
		return acked, false
	}
	_ = sleep(d.stop, d.s.Pause)
	return acked, true
}

func createBody() map[string]any {
	return map[string]any{
		"documentType": "doclog/ledger",
		"actions":      []any{map[string]any{"type": "OPEN_ACCOUNT", "scope": "global", "input": map[string]any{"accountId": ledgerAccount}}},
	}
}

// replica creates a document and loads its origin's operations into it.
func (d *driver) replica() {
	created, ok := d.do("/v1/documents", createBody(), Entry{Kind: KindReplica, Ops: 2, Sync: &SyncJob{}})
	if !ok {
		return
	}
	o := &origin{prefix: fmt.Sprintf("chaos-%d-replica-%d", d.s.Load.Seed, d.n), openedMs: created.AckedAt.UnixMilli()}
	for {
		ops, refusal := o.nextLoad(d.rng, time.Now().UnixMilli())
		sj := &SyncJob{Refusal: refusal}
		if sj.Refusal == "" {
			sj.Stored, sj.Replayed, sj.Reshuffled = o.expect(ops)
		}
		sj.Loaded = ops
		e := Entry{DocID: created.DocID, Kind: KindLoad, Ops: int(sj.Stored), Sync: sj}
		if _, ok := d.do("/v1/documents/"+url.PathEscape(created.DocID)+"/load", loadBody(ops), e); !ok {
			return
		}
		if sj.Refusal == "" {
			o.stored(ops)
		}
	}
}

func loadBody(ops []RemoteOp) map[string]any {
	out := make([]any, len(ops))
	for i, op := range ops {
		out[i] = map[string]any{
			"opId": op.OpID, "index": op.Index, "skip": 0, "hash": op.Hash,
			"action": map[string]any{
				"id": op.ActionID, "type": "DEPOSIT", "scope": "global", "timestampUtcMs": op.TimestampUtcMs,
				"input": map[string]any{"accountId": ledgerAccount, "amount": op.Amount},
			},
		}
	}
	return map[string]any{"documentType": "doclog/ledger", "operations": out}
}

// branched creates a document and, round after round, forks a branch of
// main, writes on both, and promotes the branch onto main.
func (d *driver) branched() {
	created, ok := d.do("/v1/documents", createBody(), Entry{Kind: KindBranched, Ops: 2, Sync: &SyncJob{}})
	if !ok {
		return
	}
	doc := created.DocID
	st := newBranchState()
	main := oplog.DefaultBranch
	deposit := func(branch string) bool {
		amount := int64(1 + d.rng.IntN(100))
		e := Entry{DocID: doc, Kind: KindBranchDeposit, Amount: amount, Ops: 1, Sync: &SyncJob{Branch: branch}}
		body := mutate(doc, "DEPOSIT", amount)
		body["branch"] = branch
		if _, ok := d.do("/v1/jobs", body, e); !ok {
			return false
		}
		st.deposit(branch, amount)
		return true
	}
	promote := func(branch string, tip map[string]int64, stale bool) bool {
		sj := &SyncJob{Branch: branch, Stale: stale}
		if stale {
			sj.Refusal = nameBranchConflict
		}
		e := Entry{DocID: doc, Kind: KindPromote, Ops: int(st.promoted(branch)), Sync: sj}
		body := map[string]any{"documentType": "doclog/ledger", "onto": main, "expectedTip": tip}
		if _, ok := d.do("/v1/documents/"+url.PathEscape(doc)+"/branches/"+url.PathEscape(branch)+"/promote", body, e); !ok {
			return false
		}
		if !stale {
			st.promote(branch)
		}
		return true
	}
	// tips reads main's tip from the read store, as a client about to
	// promote does; one that differs from the model stops the driver (its
	// promotes would conflict) and fails the run.
	tips := func() (map[string]int64, bool) {
		t, err := readTips(d.deadline, d.s.client, d.s.ReadURL, doc, main)
		if err != nil {
			return nil, false
		}
		if t[oplog.ScopeGlobal] != st.tip(main) {
			d.s.Load.Ledger.Note(fmt.Sprintf("%s: the read store says main's global tip is %d, the driver's model %d", doc, t[oplog.ScopeGlobal], st.tip(main)))
			return nil, false
		}
		return t, true
	}
	for range 1 + d.rng.IntN(2) {
		if !deposit(main) {
			return
		}
	}
	for round := 1; ; round++ {
		branch := fmt.Sprintf("b%d", round)
		tip := st.tip(main)
		at := max(st.skipAt+1, tip-int64(d.rng.IntN(3)))
		fork := Entry{DocID: doc, Kind: KindFork, Ops: int(at) + 1, Sync: &SyncJob{Branch: branch, At: at}}
		body := map[string]any{"documentType": "doclog/ledger", "branch": branch, "at": map[string]int64{oplog.ScopeGlobal: at}}
		if _, ok := d.do("/v1/documents/"+url.PathEscape(doc)+"/branches", body, fork); !ok {
			return
		}
		st.fork(branch, at)
		for range d.rng.IntN(3) {
			on := branch
			if d.rng.IntN(3) == 0 {
				on = main
			}
			if !deposit(on) {
				return
			}
		}
		if !deposit(branch) { // the branch moved since its sync point: there is something to promote
			return
		}
		for promotes := 0; promotes == 0 || d.rng.IntN(3) == 0; promotes++ {
			if promotes > 0 && !deposit(branch) {
				return
			}
			if d.rng.IntN(2) == 0 {
				old, ok := tips()
				if !ok || !deposit(main) || !promote(branch, old, true) {
					return
				}
			}
			t, ok := tips()
			if !ok || !promote(branch, t, false) {
				return
			}
		}
	}
}

// jobResult is the part of GET /v1/jobs/{id} the checks read.
type jobResult struct {
	Status string
	Reason string // the first error's name
	Load   *LoadCounts
}

// LoadCounts is what a load job's placement did, summed over its streams.
type LoadCounts struct {
	Stored, Replayed, Superseded, Reshuffled, Skip int64
}

// waitJob polls a job's status until it is final or ctx ends.
func waitJob(ctx context.Context, client *http.Client, base, id string) (jobResult, error) {
	for {
		res, err := jobStatusWait(ctx, client, base, id, 5*time.Second)
		if err == nil && res.final() {
			return res, nil
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("waiting for the result of %s: %w", id, ctx.Err())
		}
		_ = sleep(ctx, 200*time.Millisecond)
	}
}

func (r jobResult) final() bool {
	switch oplog.JobStatus(r.Status) {
	case oplog.JobWriteReady, oplog.JobReadReady, oplog.JobFailed:
		return true
	}
	return false
}

// readTips reads a branch's tips from the read store's branch list.
func readTips(ctx context.Context, client *http.Client, base, doc, branch string) (map[string]int64, error) {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, 200*time.Millisecond); err != nil {
				return nil, err
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/documents/"+url.PathEscape(doc)+"/branches", nil)
		if err != nil {
			return nil, fmt.Errorf("building a branch list request: %w", err)
		}
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		var body struct {
			Branches []struct {
				Branch string           `json:"branch"`
				Tips   map[string]int64 `json:"tips"`
			} `json:"branches"`
		}
		derr := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || derr != nil {
			continue
		}
		for _, b := range body.Branches {
			if b.Branch == branch {
				return b.Tips, nil
			}
		}
		return nil, fmt.Errorf("listing the branches of %s: no branch %s", doc, branch)
	}
}
