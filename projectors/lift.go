package projectors

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	oplog "github.com/doclog/doclog/log"
)

// StreamResetter is the part of a Tx that Lift needs: a Tx that implements
// it (projectors/pgproj's does) lets an operator lift a quarantine.
type StreamResetter interface {
	// ResetStream forgets the stream's stored head and lifts its
	// quarantine, so the transaction's next advance rebuilds the stream
	// from index 0 of the log. The caller holds the stream's lock (Claim).
	ResetStream(ctx context.Context, projector string, stream oplog.StreamKey) error
}

// ErrNotQuarantined reports a lift of a stream the projector does not hold
// in quarantine.
var ErrNotQuarantined = errors.New("the stream is not quarantined")

// LiftRefusedError reports a lift refused because the stream still does not
// verify: replaying it from index 0 of the log fails at Finding. Nothing
// changed; the stream stays quarantined.
type LiftRefusedError struct {
	Projector string
	// Lifted is the quarantine the operator asked to lift.
	Lifted Quarantine
	// Finding is where the replay from the log failed now.
	Finding Quarantine
}

func (e *LiftRefusedError) Error() string {
	return fmt.Sprintf("projector %s: stream %s still does not verify: replaying it from the log fails at index %d: %s: %s; it stays quarantined",
		e.Projector, e.Finding.Stream, e.Finding.Index, e.Finding.ErrorName, e.Finding.Reason)
}

// LiftReport is what Lift did.
type LiftReport struct {
	Projector string          `json:"projector"`
	Stream    oplog.StreamKey `json:"stream"`
	// Lifted is the quarantine that was lifted.
	Lifted Quarantine `json:"lifted"`
	// Replayed is the number of operations replayed from the log and
	// verified: the whole stream, 0 through LastIndex.
	Replayed int `json:"replayed"`
	// LastIndex is the stream's index in the projection now, which is its
	// head in the log when the lift ran (-1: the log holds none).
	LastIndex int64 `json:"lastIndex"`
}

// Lift lifts a stream's quarantine once it verifies again. In one
// transaction holding the stream's lock (the one every batch and the
// reconciler take, so no other writer of the stream runs meanwhile) it
// forgets the stored head, which a quarantine does not trust, replays the
// whole stream from index 0 of the log with every hash checked, and hands
// the result to the projector like any batch: what waited behind the
// quarantine (operations the runner left alone, their records' checkpoints
// moved past them) is applied now, from the log. If the replay still fails,
// the transaction rolls back and the error is a *LiftRefusedError with the
// new finding; a stream not in quarantine is ErrNotQuarantined.
//
// The log head is read after the lock is taken: a record the runner left
// alone before then carries an operation already in the log, and one it
// handles after the commit finds the stream lifted, so nothing falls between.
// cfg needs Projector, Store, Log and Registry; the Kafka settings are
// unused. The live runners go on while it runs.
func Lift(ctx context.Context, cfg Config, stream oplog.StreamKey) (LiftReport, error) {
	switch {
	case cfg.Projector == nil || cfg.Store == nil || cfg.Log == nil || cfg.Registry == nil:
		return LiftReport{}, errors.New("lifting a quarantine needs the projector, its store, the operation log and a model registry")
	}
	name, filter := cfg.Projector.Name(), cfg.Projector.Filter()
	switch {
	case !keeps(filter.Scopes, stream.Scope):
		return LiftReport{}, fmt.Errorf("projector %s does not follow scope %q: it follows %s", name, stream.Scope, filter)
	case !keeps(filter.Branches, stream.Branch):
		return LiftReport{}, fmt.Errorf("projector %s does not follow branch %q: it follows %s", name, stream.Branch, filter)
	}
	if filter.ByType() {
		t, err := newDocumentTypes(filter, cfg.Log).of(ctx, stream)
		if err != nil {
			return LiftReport{}, err
		}
		if t != "" && !filter.FollowsType(t) {
			return LiftReport{}, fmt.Errorf("projector %s does not follow documents of type %s: it follows %s", name, t, filter)
		}
	}
	rep := LiftReport{Projector: name, Stream: stream, LastIndex: -1}
	adv := &advancer{projector: cfg.Projector, filter: filter, log: cfg.Log, reg: cfg.Registry,
		hit:  prometheus.NewCounter(prometheus.CounterOpts{Name: "lift_head_cache_hit"}),
		miss: prometheus.NewCounter(prometheus.CounterOpts{Name: "lift_head_cache_miss"})}
	err := cfg.Store.InTx(ctx, nil, func(tx Tx) error {
		reset, ok := tx.(StreamResetter)
		if !ok {
			return fmt.Errorf("projector %s: its store cannot reset a stream, so it cannot lift a quarantine", name)
		}
		_, qs, err := tx.Claim(ctx, name, []oplog.StreamKey{stream}, nil)
		if err != nil {
			return err
		}
		q, ok := qs[stream]
		if !ok {
			return fmt.Errorf("projector %s, stream %s: %w", name, stream, ErrNotQuarantined)
		}
		rep.Lifted = q
		if err := reset.ResetStream(ctx, name, stream); err != nil {
			return err
		}
		heads, err := cfg.Log.Heads(ctx, []string{stream.DocumentID})
		if err != nil {
			return fmt.Errorf("read the log head of %s: %w", stream, err)
		}
		rev := heads[stream]
		if rev == 0 {
			return nil
		}
		w := wants{}
		w.add(stream, "", rev-1, nil)
		out, err := adv.advance(ctx, tx, w)
		if err != nil {
			return err
		}
		if len(out.quarantines) > 0 {
			return &LiftRefusedError{Projector: name, Lifted: q, Finding: out.quarantines[0]}
		}
		rep.Replayed = out.applied
		rep.LastIndex = rev - 1
		return nil
	})
	if err != nil {
		return rep, err
	}
	return rep, nil
}
