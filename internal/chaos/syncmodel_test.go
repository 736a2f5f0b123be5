package chaos

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/executor/place"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/ledger"
	"github.com/doclog/doclog/model/modeltest"
)

// The origin's hashes are the ledger model's: a load that continues the
// replica's head has each one checked against the state it re-derives.
func TestSyncLedgerHashIsTheModels(t *testing.T) {
	reg, err := model.NewRegistry(ledger.Model())
	require.NoError(t, err)
	d := modeltest.Created(t, reg, ledger.DocumentType)
	d.Must(oplog.ScopeGlobal, ledger.ActionOpenAccount, map[string]any{"accountId": ledgerAccount})
	ops := d.Ops[oplog.ScopeGlobal]
	assert.Equal(t, ops[len(ops)-1].Hash, ledgerHash(0))
	sum := int64(0)
	for _, amount := range []int64{5, 100, 1} {
		d.Must(oplog.ScopeGlobal, ledger.ActionDeposit, map[string]any{"accountId": ledgerAccount, "amount": amount})
		sum += amount
		ops := d.Ops[oplog.ScopeGlobal]
		assert.Equal(t, ops[len(ops)-1].Hash, ledgerHash(sum), "after depositing %d in all", sum)
	}
}

// The replica driver's predictions hold against the placement rules
// themselves: 400 loads decided as the driver decides them, each planned by
// executor/place on the replica's stream as stored so far, store and replay
// what the origin model says, reshuffle at least (and only when) it says,
// carry the origin's hash wherever the plan checks one, and leave the
// replica holding exactly the operations loaded.
func TestSyncOriginPredictsPlacement(t *testing.T) {
	for driver := range uint64(8) {
		t.Run(fmt.Sprint(driver), func(t *testing.T) { originPredictsPlacement(t, rand.New(rand.NewPCG(19, 1000+driver))) })
	}
}

func originPredictsPlacement(t *testing.T, rng *rand.Rand) {
	stream := oplog.StreamKey{DocumentID: "r", Scope: oplog.ScopeGlobal, Branch: oplog.DefaultBranch}
	now := int64(1_764_460_800_000)
	o := &origin{prefix: "t", openedMs: now}
	stored := []oplog.Operation{{OpID: "open", Index: 0, TimestampUtcMs: now - 1}}
	amounts := map[string]int64{}
	seen := map[string]int{}
	var maxSkip int64
	for n := range 400 {
		now += int64(10 + rng.IntN(50))
		ops, refusal := o.nextLoad(rng, now)
		in := make([]place.Incoming, len(ops))
		for i, op := range ops {
			require.Greater(t, op.TimestampUtcMs, o.openedMs, "load %d: every operation sorts after the account's opening", n)
			amounts[op.OpID] = op.Amount
			in[i] = place.Incoming{OpID: op.OpID, Index: op.Index, Hash: op.Hash,
				Action: oplog.Action{ID: op.ActionID, Type: ledger.ActionDeposit, Scope: oplog.ScopeGlobal, TimestampUtcMs: op.TimestampUtcMs}}
		}
		plan, err := place.Load(stream, place.Whole(stored), in, place.DefaultMaxSkipThreshold)
		if refusal != "" {
			var missing *place.MissingOperationsError
			require.ErrorAs(t, err, &missing, "load %d", n)
			seen["refused"]++
			continue
		}
		require.NoError(t, err, "load %d", n)
		wantStored, wantReplayed, atLeast := o.expect(ops)
		moved := int64(plan.Moved)
		require.Equal(t, wantStored, int64(len(plan.Tail))-moved, "load %d stores", n)
		require.Equal(t, wantReplayed, int64(len(plan.Replays)), "load %d replays", n)
		require.GreaterOrEqual(t, moved, atLeast, "load %d reshuffles", n)
		require.Equal(t, atLeast == 0, moved == 0, "load %d reshuffles only when one stored sorts after one it stores", n)
		switch {
		case moved > 0:
			seen["reshuffled"]++
		case wantStored > 0:
			seen["appended"]++
		default:
			seen["replays"]++
		}
		maxSkip = max(maxSkip, plan.Skip)
		for k, e := range plan.Tail {
			op := oplog.Operation{OpID: e.OpID, Index: plan.Revision + int64(k), TimestampUtcMs: e.Action.TimestampUtcMs, Action: e.Action}
			if k == 0 {
				op.Skip = plan.Skip
			}
			stored = append(stored, op)
			if e.Check != "" {
				seen["checked"]++
				require.Equal(t, e.Check, ledgerHash(effectiveSum(stored, amounts)), "load %d: the origin's hash of %s is the replica's state", n, e.OpID)
			}
		}
		o.stored(ops)
	}
	for _, what := range []string{"refused", "reshuffled", "appended", "replays", "checked"} {
		assert.Positive(t, seen[what], "loads that %s", what)
	}
	var want int64
	for i := range o.ops[:o.held] {
		want += o.ops[i].Amount
	}
	assert.Equal(t, want, effectiveSum(stored, amounts), "the replica holds every operation loaded, once")
	t.Logf("%v; %d operations stored for %d held, the largest skip %d", seen, len(stored), o.held, maxSkip)
}

// effectiveSum is the balance a replay of the stream gives.
func effectiveSum(stored []oplog.Operation, amounts map[string]int64) int64 {
	var sum int64
	for _, i := range place.Effective(stored) {
		sum += amounts[stored[i].OpID]
	}
	return sum
}

// The branch model: a fork copies main's prefix, a promote makes main hold
// the branch's states (superseding main's own since the sync point), and
// the next promote brings only what came after it.
func TestSyncBranchState(t *testing.T) {
	b := newBranchState()
	main := oplog.DefaultBranch
	b.deposit(main, 10)
	b.deposit(main, 20) // main: 0, 10, 30
	b.fork("b1", 2)     // b1: 0, 10
	assert.Equal(t, int64(10), b.balance("b1"))
	b.deposit("b1", 1)
	b.deposit(main, 300)
	assert.Equal(t, int64(1), b.promoted("b1"))
	b.promote("b1")
	assert.Equal(t, []int64{0, 10, 30, 330, 11}, b.balances[main], "main holds b1's state after the promote")
	assert.Equal(t, int64(4), b.skipAt, "the promote's first operation supersedes main's own")
	assert.Equal(t, int64(11), b.balance(main))
	b.deposit("b1", 4)
	assert.Equal(t, int64(1), b.promoted("b1"), "only what came after the last promote")
	b.promote("b1")
	assert.Equal(t, int64(15), b.balance(main))
	assert.Equal(t, int64(4), b.skipAt, "a fast-forward supersedes nothing")
	assert.Equal(t, int64(6), b.tip(main))
}

// syncBalances replays the succeeded jobs of each sync document in order;
// a load's replays and a refused job change nothing.
func TestSyncBalances(t *testing.T) {
	ok := func(kind, doc string, sj *SyncJob, amount int64) Outcome {
		return Outcome{Entry: Entry{Kind: kind, DocID: doc, Amount: amount, Sync: sj}, Status: "WRITE_READY"}
	}
	op := func(id string, amount int64) RemoteOp { return RemoteOp{OpID: id, Amount: amount} }
	refused := ok(KindPromote, "d", &SyncJob{Branch: "b1", Refusal: nameBranchConflict}, 0)
	refused.Status = "FAILED"
	got := syncBalances([]Outcome{
		ok(KindReplica, "r", &SyncJob{}, 0),
		ok(KindLoad, "r", &SyncJob{Loaded: []RemoteOp{op("x", 5), op("y", 7)}}, 0),
		ok(KindLoad, "r", &SyncJob{Loaded: []RemoteOp{op("y", 7)}}, 0),
		ok(KindBranched, "d", &SyncJob{}, 0),
		ok(KindBranchDeposit, "d", &SyncJob{Branch: "main"}, 3),
		ok(KindFork, "d", &SyncJob{Branch: "b1", At: 2}, 0),
		ok(KindBranchDeposit, "d", &SyncJob{Branch: "b1"}, 4),
		ok(KindBranchDeposit, "d", &SyncJob{Branch: "main"}, 100),
		refused,
		ok(KindPromote, "d", &SyncJob{Branch: "b1"}, 0),
		ok(KindDeposit, "plain", nil, 9), // the ordinary traffic's: CheckBalances adds those
	})
	assert.Equal(t, map[docBranch]int64{{"r", "main"}: 12, {"d", "main"}: 7, {"d", "b1"}: 7}, got)
}

// CheckSync counts each kind of sync job, fails the run when one never
// happened, and names every job that did not end as its driver said.
func TestSyncCheckCountsAndFails(t *testing.T) {
	job := func(kind, status, reason string, sj *SyncJob, l *LoadCounts) Outcome {
		return Outcome{Entry: Entry{JobID: kind + status, Kind: kind, DocID: "d", Sync: sj}, Status: status, Reason: reason, Load: l}
	}
	all := []Outcome{
		job(KindReplica, "WRITE_READY", "", &SyncJob{}, nil),
		job(KindLoad, "WRITE_READY", "", &SyncJob{Stored: 2, Replayed: 1}, &LoadCounts{Stored: 2, Replayed: 1}),
		job(KindLoad, "WRITE_READY", "", &SyncJob{Replayed: 2}, &LoadCounts{Replayed: 2}),
		job(KindLoad, "WRITE_READY", "", &SyncJob{Stored: 1, Reshuffled: 2}, &LoadCounts{Stored: 1, Reshuffled: 3, Skip: 3}),
		job(KindLoad, "FAILED", nameMissingOperations, &SyncJob{Refusal: nameMissingOperations}, nil),
		job(KindBranched, "WRITE_READY", "", &SyncJob{}, nil),
		job(KindFork, "WRITE_READY", "", &SyncJob{Branch: "b1"}, nil),
		job(KindPromote, "FAILED", nameBranchConflict, &SyncJob{Branch: "b1", Refusal: nameBranchConflict, Stale: true}, nil),
		job(KindPromote, "WRITE_READY", "", &SyncJob{Branch: "b1"}, nil),
	}
	tally := CheckSync(all, nil)
	assert.Empty(t, tally.Failures())
	assert.Equal(t, 3, tally.Loads-tally.LoadsRefused, "loads that succeeded")
	assert.Equal(t, []int{2, 1, 1, 1, 1, 1, 1}, []int{tally.LoadsStored, tally.LoadsReplayed, tally.LoadsReshuffled, tally.LoadsRefused, tally.Forks, tally.Promotes, tally.Conflicts})
	assert.Equal(t, []int64{3, 3, 3}, []int64{tally.OpsStored, tally.OpsReplayed, tally.OpsReshuffled})

	bad := CheckSync(append(all[:4:4],
		job(KindPromote, "WRITE_READY", "", &SyncJob{Branch: "b1", Refusal: nameBranchConflict, Stale: true}, nil), // a stale promote applied
		job(KindLoad, "WRITE_READY", "", &SyncJob{Stored: 1}, &LoadCounts{Stored: 1, Reshuffled: 1}),               // a reshuffle nobody sorted after
		job(KindLoad, "WRITE_READY", "", &SyncJob{Stored: 1, Replayed: 1}, &LoadCounts{Stored: 2}),                 // a replay stored again
	), []string{"d: the read store says main's global tip is 3, the driver's model 4"})
	assert.Len(t, bad.Off, 4)
	assert.Equal(t, []string{"4 sync job(s) not as due", "no load refused", "no fork", "no promote applied", "no promote refused as a conflict"}, bad.Failures())
}
