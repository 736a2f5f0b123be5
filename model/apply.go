package model

import (
	"errors"
	"fmt"

	oplog "github.com/doclog/doclog/log"
)

// Applied is what the executor records on the operation an action became.
type Applied struct {
	Index   int64  // the operation's index in its stream
	Hash    string // the scope state's hash after it
	Version int    // the model version the reducer ran at
}

var errPoisoned = errors.New("the state was left half changed by an earlier failed reducer and must be reloaded")

// Apply runs one action against target, the state of the stream the action
// targets, and advances it by one revision. doc is the document's document
// scope state, which governs the others (existence, deletion, version); for a
// document-scope action doc is ignored and target is the document scope.
//
// Apply mutates target in place: the caller owns it (see StreamState). On
// error, the state is untouched when the action was refused before its
// reducer ran or the reducer refused it with *BusinessRuleViolation or
// *InvalidInput (reducers check before they write: the Model contract);
// otherwise target is marked Poisoned and must be dropped: reload it (the
// cache's head plus the batch's jobs that succeeded) before applying anything
// else.
//
// Errors are typed, carry the stream, index and action type, and have stable
// names (ErrorName): *InvalidInput, *UnknownActionType, *ModelNotFound,
// *DocumentNotFound, *DocumentExists, *DocumentDeleted,
// *DowngradeNotSupported, *MissingUpgradeTransition, *BusinessRuleViolation
// and *ReducerError (including a recovered panic).
func (r *Registry) Apply(doc, target *StreamState, a *oplog.Action) (Applied, error) {
	where := At{Stream: target.Stream, Index: target.Revision, ActionType: a.Type}
	if target.poisoned {
		return Applied{}, &ReducerError{At: where, Err: errPoisoned}
	}
	if a.Scope != target.Stream.Scope {
		return Applied{}, &InvalidInput{At: where, Reason: fmt.Sprintf("action scope %q does not match the stream's scope %q", a.Scope, target.Stream.Scope)}
	}
	if target.Stream.Scope == oplog.ScopeDocument {
		return r.applyDocumentAction(target, a, 0, true, where)
	}
	if doc == nil || doc.empty() {
		return Applied{}, &DocumentNotFound{At: where}
	}
	if at, deleted := deletedAt(doc); deleted {
		return Applied{}, &DocumentDeleted{At: where, DeletedAtUtcMs: at}
	}
	if target.DocumentType != doc.DocumentType {
		return Applied{}, &InvalidInput{At: where, Reason: fmt.Sprintf("document %s is a %s, not a %s", doc.Stream.DocumentID, doc.DocumentType, target.DocumentType)}
	}
	return r.applyModelAction(target, doc.Version, a, true, where)
}

// applyDocumentAction and applyModelAction apply a new action when fresh,
// and replay a stored one otherwise (ActionSpec.Check runs only when fresh).
func (r *Registry) applyDocumentAction(st *StreamState, a *oplog.Action, replayVersion int, fresh bool, where At) (Applied, error) {
	spec, ok := systemAction(a.Type)
	if !ok {
		return Applied{}, &UnknownActionType{At: where, DocumentType: st.DocumentType, Version: st.Version}
	}
	input, err := spec.decode(a.Input, fresh)
	if err != nil {
		return Applied{}, locate(err, where)
	}
	var (
		next    any
		version int
	)
	// The system reducer changes the state in place: the tree must be
	// its own, and the kept encoding no longer describes it.
	if st.persistent {
		st.State, st.persistent = CloneJSON(st.State), false
	}
	st.canon = nil
	err = guard(func() error {
		var err error
		next, version, err = r.applyDocument(st, a, input, replayVersion)
		return err
	})
	if err != nil {
		// The system reducer checks before it writes, so the state is intact.
		return Applied{}, locate(err, where)
	}
	return finish(st, next, version, nil, nil, false, where)
}

func (r *Registry) applyModelAction(st *StreamState, version int, a *oplog.Action, fresh bool, where At) (Applied, error) {
	m, err := r.Get(st.DocumentType, version)
	if err != nil {
		return Applied{}, err
	}
	spec, ok := m.Action(a.Type)
	if !ok {
		return Applied{}, &UnknownActionType{At: where, DocumentType: st.DocumentType, Version: version}
	}
	if !spec.AllowsScope(st.Stream.Scope) {
		return Applied{}, &InvalidInput{At: where, Reason: fmt.Sprintf("%s applies to scope %v, not %q", a.Type, spec.Scopes, st.Stream.Scope)}
	}
	input, err := spec.decode(a.Input, fresh)
	if err != nil {
		return Applied{}, locate(err, where)
	}
	// A declared action changes only its paths: on a persistent state they
	// are copied first, so the state before stays as it was for whoever
	// shares it. Any other change needs a tree of its own.
	var touched *trie
	if spec.Touches != nil {
		touched = newTrie(spec.Touches(input))
	}
	state := st.State
	prev := st.validCanon()
	inPlace := false // the reducer changes objects of st.State itself
	switch {
	case st.empty():
		state, prev = m.InitialState(st.Stream.Scope), nil
	case st.Version < version:
		// An upgrade may change the whole tree: it needs one of its own.
		if st.persistent {
			state = CloneJSON(state)
		} else {
			st.canon = nil // changed in place
		}
		prev, touched = nil, nil
		path, err := r.UpgradePath(st.DocumentType, st.Version, version)
		if err != nil {
			return Applied{}, locate(err, where)
		}
		for _, t := range path {
			if t.Upgrade == nil {
				continue
			}
			err := guard(func() error {
				var err error
				state, err = t.Upgrade(st.Stream.Scope, state)
				return err
			})
			if err != nil {
				st.poisoned = true
				return Applied{}, &ReducerError{At: where, Err: fmt.Errorf("upgrade from version %d to %d: %w", t.From, t.To, err)}
			}
		}
	case st.Version > version:
		return Applied{}, &DowngradeNotSupported{At: where, DocumentType: st.DocumentType, From: st.Version, To: version}
	case touched == nil || touched.whole:
		if st.persistent {
			state = CloneJSON(state)
		} else {
			st.canon = nil // changed in place
		}
		prev = nil
	case st.persistent:
		state, inPlace = copyPaths(state, touched, st.ownershipFor(), st.sp)
	}
	call := Call{Action: a, Input: input, Stream: st.Stream, Index: st.Revision, Version: version}
	err = guard(func() error {
		var err error
		state, err = m.Reduce(state, &call)
		return err
	})
	if err != nil {
		var (
			bv *BusinessRuleViolation
			ii *InvalidInput
		)
		switch {
		case errors.As(err, &bv), errors.As(err, &ii):
			// A reducer refuses before it writes (the Model contract), so
			// the state is intact, unless an upgrade ran just now. A
			// reducer that wrote before refusing would have changed
			// objects st.State holds: in place, the state is not trusted.
			if st.Version != version && st.Revision > 0 || inPlace {
				st.poisoned = true
			}
		case declared(err):
			st.poisoned = true
		default:
			st.poisoned = true
			err = &ReducerError{Err: err}
		}
		return Applied{}, locate(err, where)
	}
	return finish(st, state, version, prev, touched, spec.Touches != nil, where)
}

// guard runs a reducer, turning a panic into an error so that one bad action
// fails its job instead of the partition's worker.
func guard(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			perr, ok := p.(error)
			if !ok {
				perr = fmt.Errorf("%v", p)
			}
			err = &ReducerError{Panic: true, Err: perr}
		}
	}()
	return f()
}

// finish hashes the new state and advances the stream. prev is the
// encoding of the state before, when touched (the declared paths) says what
// of it changed; otherwise the state is encoded whole. persistent says the
// new state is never changed in place (its action declared its paths).
func finish(st *StreamState, state any, version int, prev *canon, touched *trie, persistent bool, where At) (Applied, error) {
	if prev == nil {
		touched = nil
	}
	c, err := encodeState(prev, state, touched, st.Size)
	if err != nil {
		st.poisoned = true
		return Applied{}, &ReducerError{At: where, Err: fmt.Errorf("hash the new state: %w", err)}
	}
	h := c.hash
	st.State = state
	st.Version = version
	st.Hash = h
	st.Size = len(c.enc)
	st.keep(c)
	st.persistent = persistent
	index := st.Revision
	st.Revision++
	return Applied{Index: index, Hash: h, Version: version}, nil
}

// Replay applies stored operations to st, which must be the stream's state
// before the first of them (NewStreamState for index 0, or FromKeyframe),
// and checks that every operation's stored hash is reproduced, failing with
// *HashMismatch otherwise. Each operation runs at the model version recorded
// on it, so a stream replays with the reducers that wrote it; when that
// version is above the state's, the state is upgraded first, exactly as Apply
// did.
//
// An operation with skip n supersedes the n operations before it: the state
// it applies to is rebuilt without them. If they precede the state Replay
// started from, it fails with *SkipBeforeStart and the caller replays from an
// earlier keyframe or from index 0.
func (r *Registry) Replay(st *StreamState, ops []oplog.Operation) error {
	var (
		base      *StreamState
		effective []*oplog.Operation
	)
	start := st.Revision
	for i := range ops {
		if ops[i].Skip > 0 {
			base = st.Clone()
			effective = make([]*oplog.Operation, 0, len(ops))
			break
		}
	}
	for i := range ops {
		op := &ops[i]
		if op.Stream() != st.Stream {
			return fmt.Errorf("replay %s: operation %d belongs to %s", st.Stream, op.Index, op.Stream())
		}
		if op.Index != st.Revision {
			return &StreamGap{Stream: st.Stream, Expected: st.Revision, Got: op.Index}
		}
		if op.Skip > 0 {
			first := op.Index - op.Skip
			if first < start {
				return &SkipBeforeStart{Stream: st.Stream, Index: op.Index, Skip: op.Skip, StartIndex: start}
			}
			kept := effective[:0]
			for _, e := range effective {
				if e.Index < first {
					kept = append(kept, e)
				}
			}
			effective = kept
			*st = *base.Clone()
			for _, e := range effective {
				st.Revision = e.Index
				if err := r.replayOne(st, e); err != nil {
					return err
				}
			}
			st.Revision = op.Index
		}
		if err := r.replayOne(st, op); err != nil {
			return err
		}
		if op.Hash != st.Hash {
			return &HashMismatch{Stream: st.Stream, Index: op.Index, Expected: op.Hash, Actual: st.Hash}
		}
		if base != nil {
			effective = append(effective, op)
		}
	}
	return nil
}

func (r *Registry) replayOne(st *StreamState, op *oplog.Operation) error {
	where := At{Stream: st.Stream, Index: op.Index, ActionType: op.Action.Type}
	var err error
	if st.Stream.Scope == oplog.ScopeDocument {
		_, err = r.applyDocumentAction(st, &op.Action, op.Version, false, where)
	} else {
		_, err = r.applyModelAction(st, op.Version, &op.Action, false, where)
	}
	if err != nil {
		return fmt.Errorf("replay %s index %d: %w", st.Stream, op.Index, err)
	}
	return nil
}

// ReplayStream rebuilds a stream from index 0.
func (r *Registry) ReplayStream(stream oplog.StreamKey, documentType string, ops []oplog.Operation) (*StreamState, error) {
	st := NewStreamState(stream, documentType)
	if err := r.Replay(st, ops); err != nil {
		return nil, err
	}
	return st, nil
}
