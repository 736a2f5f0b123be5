package model

// Savepoint is what a StreamState was when it was taken, and the record of
// every change Apply has made in place since to objects the state's tree
// shares with what it was. Rollback brings the state back; Release keeps
// the changes. A savepoint is what lets a run of one document's jobs keep
// each job's failure to itself without copying the head before every job:
// on a state whose root has many members, that copy (Clone shares the
// tree, so the next action copies the root again) was a large part of a
// job's cost.
//
// Only a persistent state can take one: its tree changes in place only on
// the copies Apply made on declared paths, each such change recorded here.
// Any other change (an undeclared action, an upgrade, the document scope's
// system actions) gives the state a tree of its own first, and leaves the
// one the savepoint holds as it was.
type Savepoint struct {
	st    *StreamState
	saved StreamState
	undo  []undo
	done  bool
}

// undo is one member of an object changed in place: what it held before,
// and whether it was there at all.
type undo struct {
	m       map[string]any
	key     string
	old     any
	present bool
}

// Savepoint starts recording s's changes, or reports false when s is not
// persistent (its changes cannot be recorded: the caller works on a Clone
// instead) or already records into a savepoint. Until Rollback or Release
// the state must have no other user: no Clone, no reader of its tree.
func (s *StreamState) Savepoint() (*Savepoint, bool) {
	if !s.persistent || s.sp != nil || s.poisoned {
		return nil, false
	}
	sp := &Savepoint{st: s, saved: *s}
	if s.canon != nil && !s.canon.retain() {
		return nil, false
	}
	sp.saved.own, sp.saved.sp = nil, nil
	s.sp = sp
	return sp, true
}

// record notes that m[key] is about to change in place.
func (sp *Savepoint) record(m map[string]any, key string) {
	old, present := m[key]
	sp.undo = append(sp.undo, undo{m: m, key: key, old: old, present: present})
}

// Rollback brings the state back to what it was when the savepoint was
// taken, poisoned or not since, and ends the savepoint.
func (sp *Savepoint) Rollback() {
	if sp.done {
		return
	}
	sp.done = true
	s := sp.st
	for i := len(sp.undo) - 1; i >= 0; i-- {
		u := &sp.undo[i]
		if u.present {
			u.m[u.key] = u.old
		} else {
			delete(u.m, u.key)
		}
	}
	// The savepoint's hold on the encoding it saved passes to the state,
	// which either let its own go when Apply replaced it, or still has it.
	switch {
	case s.canon == sp.saved.canon:
		if s.canon != nil {
			s.canon.release()
		}
	case s.canon != nil:
		s.canon.release() // the encoding of a change rolled back
	}
	// The objects Apply copied since stay in the set: no one else holds
	// them, whether the restored tree still does or not.
	own := s.own
	*s = sp.saved
	s.own = own
}

// Release keeps the changes since the savepoint was taken and ends it.
func (sp *Savepoint) Release() {
	if sp.done {
		return
	}
	sp.done = true
	sp.st.sp = nil
	if c := sp.saved.canon; c != nil {
		c.release()
	}
}
