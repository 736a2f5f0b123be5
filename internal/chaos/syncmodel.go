package chaos

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// The sync drivers' models of their documents: what a replica's origin
// holds and what a load of it must store, and what each branch of a
// branched document holds after forks, writes and promotes. The drivers use
// them to decide each job and what it must do; the checks use the same
// models on the jobs' final statuses to say what the documents must hold.

// ledgerAccount is the one account of every document of the run.
const ledgerAccount = "a"

// RemoteOp is one operation of a replica's origin: a deposit another
// replica of the document stored at Index of its global scope, with the hash
// of its state after it.
type RemoteOp struct {
	OpID, ActionID string
	Index          int64
	TimestampUtcMs int64
	Amount         int64
	Hash           string
}

func compareRemote(a, b *RemoteOp) int {
	return cmp.Or(cmp.Compare(a.TimestampUtcMs, b.TimestampUtcMs), cmp.Compare(a.OpID, b.OpID))
}

// origin is the replica a replica document syncs from: its global scope
// after the account's opening (index 0, which both hold), a stream its own
// jobs wrote in no particular timestamp order. A load always starts at or
// before the first operation the document lacks, as a sync sends from the
// first operation its peer lacks, so what the document holds is a prefix of
// the origin: held operations.
type origin struct {
	prefix   string // of operation ids
	openedMs int64  // every operation sorts after the account's opening
	ops      []RemoteOp
	held     int
	sum      int64
}

// ledgerHash is the hash of a sync document's global scope holding one open
// account with balance: what the origin's stream holds after each deposit,
// whatever their order, since deposits commute.
func ledgerHash(balance int64) string {
	h, _, err := model.Hash(map[string]any{
		"accounts":      map[string]any{ledgerAccount: map[string]any{"id": ledgerAccount, "name": "", "balance": float64(balance), "closed": false}},
		"transferCount": 0.0,
	})
	if err != nil {
		panic(fmt.Sprintf("hashing a ledger state: %v", err)) // a literal map of strings, numbers and booleans always hashes
	}
	return h
}

// backdateDepth is how many of the latest operations the document holds a
// backdated one may sort before. Shallow: a reshuffle moves what sorts
// after it, and a placement that reaches over an earlier one's skip starts
// where that one did, so deep or frequent backdating would grow every skip
// until EXCESSIVE_SHUFFLE.
const backdateDepth = 3

// add appends n deposits to the origin, stamped nowMs on (a millisecond
// apart) or, when backdate, before the latest operation the document holds
// and not before the few latest, so that placing them reshuffles at least
// that one.
func (o *origin) add(rng *rand.Rand, n int, nowMs int64, backdate bool) {
	held := make([]int64, 0, o.held)
	for i := range o.ops[:o.held] {
		held = append(held, o.ops[i].TimestampUtcMs)
	}
	slices.Sort(held)
	var lo, hi int64
	backdate = backdate && len(held) > 0 // nothing held: nothing to sort before
	if backdate {
		hi = held[len(held)-1] - 1
		lo = max(o.openedMs+1, min(held[max(0, len(held)-backdateDepth)], hi))
		backdate = lo <= hi
	}
	for k := range n {
		ts := nowMs + int64(k)
		if backdate {
			ts = lo + rng.Int64N(hi-lo+1)
		}
		amount := int64(1 + rng.IntN(100))
		o.sum += amount
		i := int64(len(o.ops)) + 1
		o.ops = append(o.ops, RemoteOp{
			OpID: fmt.Sprintf("%s-op-%d", o.prefix, i), ActionID: fmt.Sprintf("%s-action-%d", o.prefix, i),
			Index: i, TimestampUtcMs: ts, Amount: amount, Hash: ledgerHash(o.sum),
		})
	}
}

// nextLoad decides the next load: a quarter replays only (operations the
// document holds), a tenth with a gap in its indexes (refused as
// MISSING_OPERATIONS whatever the document holds), the rest one to three
// new operations, stamped nowMs or, half the time, among the latest the
// document holds, sent behind up to two it holds. refusal is the error the
// load must end with, "" when it must succeed.
func (o *origin) nextLoad(rng *rand.Rand, nowMs int64) (ops []RemoteOp, refusal string) {
	switch p := rng.Float64(); {
	case o.held > 0 && p < 0.25:
		from := 1 + rng.IntN(o.held)
		return o.window(from, min(o.held, from+rng.IntN(3))), ""
	case p < 0.35:
		if len(o.ops) < o.held+3 {
			o.add(rng, o.held+3-len(o.ops), nowMs, false)
		}
		from := o.held + 1 - min(o.held, rng.IntN(2))
		return append(o.window(from, from), o.window(from+2, from+2)...), nameMissingOperations
	default:
		o.add(rng, 1+rng.IntN(3), nowMs, rng.IntN(2) == 0)
		from := o.held + 1 - min(o.held, rng.IntN(3))
		return o.window(from, len(o.ops)), ""
	}
}

// window returns the origin's operations at indexes from to to, inclusive.
func (o *origin) window(from, to int) []RemoteOp {
	return slices.Clone(o.ops[from-1 : to])
}

// expect says what a load of ops (contiguous, starting at or before the
// first the document lacks) must do: how many it stores and finds stored,
// and the least number of stored operations it reshuffles, those that sort
// after the earliest it stores (the document's operations are kept in
// timestamp order, so all of them are moved).
func (o *origin) expect(ops []RemoteOp) (stored, replayed, reshuffled int64) {
	var lowest *RemoteOp
	for i := range ops {
		if ops[i].Index <= int64(o.held) {
			replayed++
			continue
		}
		stored++
		if lowest == nil || compareRemote(&ops[i], lowest) < 0 {
			lowest = &ops[i]
		}
	}
	if lowest != nil {
		for i := range o.ops[:o.held] {
			if compareRemote(&o.ops[i], lowest) > 0 {
				reshuffled++
			}
		}
	}
	return stored, replayed, reshuffled
}

// stored records a load that succeeded.
func (o *origin) stored(ops []RemoteOp) {
	for i := range ops {
		o.held = max(o.held, int(ops[i].Index))
	}
}

// branchState is what a branched document's branches hold, as a replay of
// each gives it: per branch, the balance after each global operation, and
// per forked branch its sync points with main (where they last held the same
// state: the fork point, then wherever the last promote left them).
type branchState struct {
	balances  map[string][]int64
	own, base map[string]int64
	// skipAt is the index of main's latest operation with a skip (the
	// first a promote re-appended over main's own), 0 when none has one.
	// The drivers fork after it: a fork inside what it superseded,
	// promoted back, is promoted whole, which this model does not follow.
	skipAt int64
}

func newBranchState() *branchState {
	return &branchState{balances: map[string][]int64{oplog.DefaultBranch: {0}}, own: map[string]int64{}, base: map[string]int64{}}
}

// tip is the revision of a branch's global scope.
func (b *branchState) tip(branch string) int64 { return int64(len(b.balances[branch])) }

// balance is a branch's balance at its tip.
func (b *branchState) balance(branch string) int64 {
	s := b.balances[branch]
	return s[len(s)-1]
}

func (b *branchState) deposit(branch string, amount int64) {
	b.balances[branch] = append(b.balances[branch], b.balance(branch)+amount)
}

// fork copies main's first at operations to a new branch.
func (b *branchState) fork(branch string, at int64) {
	b.balances[branch] = slices.Clone(b.balances[oplog.DefaultBranch][:at])
	b.own[branch], b.base[branch] = at, at
}

// promoted is how many operations a promote of branch onto main writes:
// the branch's since its sync point (the drivers write on the branch before
// each promote, so there are some).
func (b *branchState) promoted(branch string) int64 { return b.tip(branch) - b.own[branch] }

// promote re-appends the branch's operations since its sync point to main,
// superseding main's own since its point: main then holds the branch's
// states, and the points move to the two tips.
func (b *branchState) promote(branch string) {
	main := oplog.DefaultBranch
	if t := b.tip(main); t > b.base[branch] {
		b.skipAt = t
	}
	b.balances[main] = append(b.balances[main], b.balances[branch][b.own[branch]:]...)
	b.own[branch], b.base[branch] = b.tip(branch), b.tip(main)
}

// apply moves the model by one job that succeeded. A job on a branch the
// model has no fork of (its fork did not succeed, which CheckSync reports)
// is left out rather than guessed at.
func (b *branchState) apply(e *Entry) {
	_, known := b.balances[e.Sync.Branch]
	if !known && e.Kind != KindFork {
		return
	}
	switch e.Kind {
	case KindBranchDeposit:
		b.deposit(e.Sync.Branch, e.Amount)
	case KindFork:
		b.fork(e.Sync.Branch, e.Sync.At)
	case KindPromote:
		b.promote(e.Sync.Branch)
	}
}
