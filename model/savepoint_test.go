package model_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// TestSavepointRollbackRestores runs random documents through savepoints
// as the executor does a run of one document's jobs: each "job" is a few
// actions on one state under a savepoint, some of them failing after they
// changed their paths in place, and the job is rolled back or kept. After a
// rollback the state must be exactly what it was (tree, hash, revision and
// kept encoding), after a release it must be what the same actions give on
// a copy; every later hash must equal a full recomputation (a kept encoding
// whose buffer was given back too early shows there), and clones taken on
// the way must never change.
func TestSavepointRollbackRestores(t *testing.T) {
	t.Parallel()
	reg := propertyRegistry(t)
	var c savepointCounts
	for seed := range uint64(150) {
		runSavepoints(t, reg, seed, 25, &c)
	}
	// What the runs covered: most jobs ran under a savepoint, and many
	// were rolled back after a failure in the middle.
	require.Greater(t, c.savepoints, 150*25/2)
	require.Greater(t, c.failures, 150)
	require.Greater(t, c.rollbacks, c.failures)
	t.Logf("%d savepoints, %d rolled back (%d after a failure)", c.savepoints, c.rollbacks, c.failures)
}

// savepointCounts counts what runSavepoints did.
type savepointCounts struct{ savepoints, rollbacks, failures int }

func runSavepoints(t *testing.T, reg *model.Registry, seed uint64, jobs int, c *savepointCounts) {
	g := gen{rand.New(rand.NewPCG(seed, 0x5a7e))}
	doc, st := newPropertyDoc(t, reg)
	key := st.Stream
	n := 0
	action := func(typ string, input any) *oplog.Action {
		n++
		return &oplog.Action{ID: fmt.Sprint("a", n), Type: typ, Scope: oplog.ScopeGlobal, Input: mustJSON(input)}
	}
	_, err := reg.Apply(doc, st, action("SET", setInput{Path: []string{"root"}, Value: mustJSON(g.object(2, 30+g.r.IntN(40)))}))
	require.NoError(t, err)
	// A declared action on a fresh copy makes the state persistent, and
	// owner of the objects on its path.
	st = st.Clone()
	_, err = reg.Apply(doc, st, action("SET", setInput{Path: []string{"root", g.key()}, Value: mustJSON(1)}))
	require.NoError(t, err)

	type clone struct {
		st    *model.StreamState
		state any
	}
	var clones []clone
	for j := range jobs {
		what := fmt.Sprintf("seed %d job %d", seed, j)
		if g.r.IntN(6) == 0 {
			clones = append(clones, clone{st.Clone(), model.CloneJSON(st.State)})
		}
		sp, ok := st.Savepoint()
		if !ok {
			// An undeclared action left a tree that changes in place:
			// this job goes to a copy, as a run's first job does, and its
			// declared action makes the state persistent again.
			st = st.Clone()
			_, err := reg.Apply(doc, st, action("SET", setInput{Path: g.path(st.State), Value: mustJSON(g.value(1))}))
			require.NoError(t, err)
			continue
		}
		c.savepoints++
		before := model.CloneJSON(st.State)
		hash, rev, size := st.Hash, st.Revision, st.Size
		var actions []*oplog.Action
		failed := false
		for range 1 + g.r.IntN(3) {
			typ, in := g.change(st.State)
			switch g.r.IntN(8) {
			case 0:
				typ, in = "SET_REFUSE", setInput{Path: g.path(st.State), Value: mustJSON(g.value(1))}
			case 1:
				typ, in = "SET_PANIC", setInput{Path: g.path(st.State), Value: mustJSON(g.value(1))}
			}
			a := action(typ, in)
			actions = append(actions, a)
			if _, err := reg.Apply(doc, st, a); err != nil {
				failed = true
				break
			}
		}
		if failed || g.r.IntN(3) == 0 {
			c.rollbacks++
			if failed {
				c.failures++
			}
			sp.Rollback()
			require.False(t, st.Poisoned(), what)
			require.True(t, model.EqualJSON(before, st.State), "%s: the rollback did not restore the state", what)
			require.Equal(t, hash, st.Hash, what)
			require.Equal(t, rev, st.Revision, what)
			require.Equal(t, size, st.Size, what)
		} else {
			sp.Release()
			// The same actions on a copy rebuilt from the state before
			// give the same state and hash.
			enc, err := model.Canonical(before)
			require.NoError(t, err)
			again, err := model.FromKeyframe(oplog.Keyframe{Stream: key, DocumentType: "test/property", Index: rev - 1, Version: st.Version, State: enc, Hash: hash})
			require.NoError(t, err)
			for _, a := range actions {
				_, err := reg.Apply(doc, again, a)
				require.NoError(t, err, what)
			}
			require.True(t, model.EqualJSON(again.State, st.State), "%s: kept changes differ from the same actions on a copy", what)
			require.Equal(t, again.Hash, st.Hash, what)
			require.Equal(t, again.Revision, st.Revision, what)
		}
		if g.r.IntN(8) == 0 {
			checkFull(t, st, what)
		} else {
			checkHash(t, st, what)
		}
	}
	for i, cl := range clones {
		require.True(t, model.EqualJSON(cl.state, cl.st.State), "seed %d: clone %d was changed by a later job", seed, i)
		checkFull(t, cl.st, fmt.Sprintf("seed %d clone %d", seed, i))
	}
}
