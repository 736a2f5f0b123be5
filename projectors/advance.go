package projectors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// want is what a batch knows about one stream: the operations it carries
// (possibly none, duplicated, out of order or with holes) and the highest
// index known to be committed in the log.
type want struct {
	stream       oplog.StreamKey
	documentType string
	upTo         int64
	ops          []oplog.Operation
}

// wants collects the streams of a batch.
type wants map[oplog.StreamKey]*want

func (w wants) add(stream oplog.StreamKey, documentType string, upTo int64, ops []oplog.Operation) {
	x := w[stream]
	if x == nil {
		x = &want{stream: stream, documentType: documentType, upTo: -1}
		w[stream] = x
	}
	x.upTo = max(x.upTo, upTo)
	x.ops = append(x.ops, ops...)
	if x.documentType == "" {
		x.documentType = documentType
	}
}

// merge adds another partition's streams. A document's records share one
// partition, so streams rarely meet: a stream new to w is shared, not
// copied (a batch only reads its wants), and one already there is combined
// into a copy, leaving both sides as they were for a retry.
func (w wants) merge(o wants) {
	for k, x := range o {
		y, ok := w[k]
		if !ok {
			w[k] = x
			continue
		}
		c := &want{stream: k, documentType: y.documentType, upTo: max(y.upTo, x.upTo), ops: slices.Concat(y.ops, x.ops)}
		if c.documentType == "" {
			c.documentType = x.documentType
		}
		w[k] = c
	}
}

func (w wants) keys() []oplog.StreamKey {
	keys := make([]oplog.StreamKey, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	sortStreams(keys)
	return keys
}

func sortStreams(keys []oplog.StreamKey) {
	slices.SortFunc(keys, func(a, b oplog.StreamKey) int {
		if c := strings.Compare(a.DocumentID, b.DocumentID); c != 0 {
			return c
		}
		if c := strings.Compare(a.Scope, b.Scope); c != 0 {
			return c
		}
		return strings.Compare(a.Branch, b.Branch)
	})
}

// outcome is what one advance did, reported after its transaction commits.
type outcome struct {
	changes     []Change
	applied     int // operations applied
	healed      int // operations read from the log (gaps, omitted, reconciler)
	skipped     int // operations already applied (re-delivery)
	waiting     int // streams left alone because they are quarantined
	quarantines []Quarantine
}

// advancer moves streams forward inside a batch transaction.
type advancer struct {
	projector Projector
	// filter is the projector's: a stream whose operations turn out to be
	// of a type it does not follow is left alone, whoever asked for it.
	filter Filter
	log    oplog.Store
	reg    *model.Registry
	heads  *headCache // nil: every batch decodes the stored states
	// hit and miss count the stored states a batch replayed on, held in
	// memory or read back.
	hit, miss prometheus.Counter
}

// advance brings every wanted stream from its stored head to its upTo
// index: operations the batch lacks are read from the log, every operation is
// replayed with the model SDK and its hash checked, and a stream that fails
// is quarantined at the failing operation (the verified prefix is kept).
// Then the projector writes its tables and the heads move, all through tx.
func (a *advancer) advance(ctx context.Context, tx Tx, w wants) (outcome, error) {
	var out outcome
	name := a.projector.Name()
	keys := w.keys()
	if len(keys) == 0 {
		return out, nil
	}
	held := a.heads.take(keys)
	refs := make(map[oplog.StreamKey]HeadRef, len(held))
	for k, h := range held {
		refs[k] = h.ref
	}
	// What a batch did not replay on is unchanged, so it goes back.
	defer func() { a.heads.giveBack(held) }()
	heads, quarantined, err := tx.Claim(ctx, name, keys, refs)
	if err != nil {
		return out, err
	}
	fromLog, err := a.readMissing(ctx, w, keys, heads, quarantined)
	if err != nil {
		return out, err
	}
	for _, k := range keys {
		x := w[k]
		if _, q := quarantined[k]; q {
			out.waiting++
			continue
		}
		head, ok := heads[k]
		if !ok {
			head = Head{Stream: k, DocumentType: x.documentType, LastIndex: -1}
		}
		if x.upTo <= head.LastIndex {
			out.skipped += len(x.ops)
			continue
		}
		ops, healed, skipped := contiguous(x.ops, head.LastIndex, x.upTo)
		out.skipped += skipped
		if ops == nil {
			ops = fromLog[k]
			healed = len(ops)
		}
		if len(ops) == 0 {
			continue
		}
		if !a.filter.Follows(ops[0].DocumentType, k) {
			continue
		}
		out.healed += healed
		if head.DocumentType == "" {
			head.DocumentType = ops[0].DocumentType
		}
		var cached *model.StreamState
		if h := held[k]; h != nil && head.State == nil && head.LastIndex >= 0 {
			// Claim left the state out: the held one is the stored one.
			// Replaying changes it, so it does not go back.
			cached = h.state
			delete(held, k)
		}
		switch {
		case cached != nil:
			a.hit.Inc()
		case head.LastIndex >= 0:
			a.miss.Inc()
		}
		ch, q, err := a.verify(ctx, tx, head, cached, ops)
		if err != nil {
			return out, err
		}
		if q != nil {
			if err := tx.Quarantine(ctx, name, *q); err != nil {
				return out, err
			}
			out.quarantines = append(out.quarantines, *q)
		}
		if ch != nil {
			out.changes = append(out.changes, *ch)
			out.applied += len(ch.Operations)
		}
	}
	if len(out.changes) == 0 {
		return out, nil
	}
	if err := a.projector.Apply(ctx, tx, out.changes); err != nil {
		return out, fmt.Errorf("projector %s: apply %d stream changes: %w", name, len(out.changes), err)
	}
	newHeads := make([]Head, len(out.changes))
	for i := range out.changes {
		h := out.changes[i].Head
		storedAt := int64(-1)
		if old, ok := heads[h.Stream]; ok {
			storedAt = old.LastIndex
			if old.StateAt != nil {
				storedAt = old.StateAt.LastIndex
			}
		}
		if !headStateDue(h.Stream, storedAt, h.LastIndex, len(h.State)) {
			h.State = nil // the stored state stays, an earlier head's
		}
		newHeads[i] = h
	}
	tx.QueueHeadsIfNewer(name, newHeads)
	return out, nil
}

// headStateInterval spaces the large states stored with the heads as the
// log spaces its keyframes (model.KeyframeSpacing): a state of size bytes
// goes with a head once the last stored one is headStateInterval × (1 +
// size/model.KeyframeBytes) operations behind. Without it a batch wrote a
// 1 MB state per changed stream per projector, which was most of the
// database's work on large documents, and the runner holds the state in
// memory anyway (headCache): the stored one is read only by a runner that
// does not hold it, which replays the log from it, at most one spacing.
const headStateInterval = 10

// headStateDue reports whether the head at last stores its state of size
// bytes, the last stored state being after storedAt (-1: none). A small
// state is always stored: it costs little, and a cold head then needs no
// read of the log. So is a document scope's, which other streams' changes
// read (the analytics projector's document rows).
func headStateDue(stream oplog.StreamKey, storedAt, last int64, size int) bool {
	return storedAt < 0 || size < model.KeyframeBytes || stream.Scope == oplog.ScopeDocument ||
		last-storedAt >= model.KeyframeSpacing(headStateInterval, size)
}

// committed holds the states of a committed batch's changes for the next
// batch. It must be called only once the transaction committed: a batch
// rolled back leaves the stored heads where they were.
func (a *advancer) committed(out outcome) {
	for i := range out.changes {
		ch := &out.changes[i]
		a.heads.put(ch.Head.Ref(), ch.State, len(ch.Head.State))
	}
}

// contiguous returns the batch's operations last+1..upTo in order when the
// batch holds every one of them, or nil when the log must fill a gap (or the
// record left its operations out). skipped counts operations at or below
// last, which a re-delivery brings again.
func contiguous(ops []oplog.Operation, last, upTo int64) (out []oplog.Operation, healed, skipped int) {
	byIndex := make(map[int64]*oplog.Operation, len(ops))
	for i := range ops {
		if ops[i].Index <= last {
			skipped++
			continue
		}
		byIndex[ops[i].Index] = &ops[i]
	}
	out = make([]oplog.Operation, 0, upTo-last)
	for i := last + 1; i <= upTo; i++ {
		op, ok := byIndex[i]
		if !ok {
			return nil, 0, skipped
		}
		out = append(out, *op)
	}
	return out, 0, skipped
}

// logReaders bounds the log reads of one batch in flight at once. A
// variable so that a benchmark can compare it with one reader.
var logReaders = 4

// readMissing reads from the log, several streams at once, the operations
// of every wanted stream that the batch does not hold contiguously past its
// head. A rebuild heals every stream of a page from the log: read one after
// another, each round trip left the cores idle, and the reads were most of
// a rebuild's time. The log only grows, so reading outside the batch's
// transaction sees what it would.
func (a *advancer) readMissing(ctx context.Context, w wants, keys []oplog.StreamKey, heads map[oplog.StreamKey]Head,
	quarantined map[oplog.StreamKey]Quarantine,
) (map[oplog.StreamKey][]oplog.Operation, error) {
	type read struct {
		stream     oplog.StreamKey
		from, upTo int64
	}
	var reads []read
	for _, k := range keys {
		if _, q := quarantined[k]; q {
			continue
		}
		last := int64(-1)
		if h, ok := heads[k]; ok {
			last = h.LastIndex
		}
		x := w[k]
		if x.upTo <= last {
			continue
		}
		if ops, _, _ := contiguous(x.ops, last, x.upTo); ops == nil {
			reads = append(reads, read{k, last + 1, x.upTo})
		}
	}
	if len(reads) == 0 {
		return nil, nil
	}
	got := make([][]oplog.Operation, len(reads))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(logReaders)
	for i, r := range reads {
		g.Go(func() (err error) {
			got[i], err = a.readLog(gctx, r.stream, r.from, r.upTo)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make(map[oplog.StreamKey][]oplog.Operation, len(reads))
	for i, r := range reads {
		out[r.stream] = got[i]
	}
	return out, nil
}

func (a *advancer) readLog(ctx context.Context, k oplog.StreamKey, from, upTo int64) ([]oplog.Operation, error) {
	ops, err := a.log.ReadStream(ctx, k, from, int(upTo-from+1))
	if err != nil {
		return nil, fmt.Errorf("heal %s from the log at %d..%d: %w", k, from, upTo, err)
	}
	return ops, nil
}

// verify replays ops on the head, from its state held in memory when
// cached is set (it is changed in place) or else from the stored one. It
// returns the change for the verified prefix (nil when empty) and a
// quarantine when an operation failed.
func (a *advancer) verify(ctx context.Context, tx Tx, head Head, cached *model.StreamState, ops []oplog.Operation) (*Change, *Quarantine, error) {
	st := cached
	if st == nil {
		var err error
		if st, err = a.storedState(ctx, tx, &head); err != nil {
			if sb := (*model.SkipBeforeStart)(nil); errors.As(err, &sb) {
				return a.verifyFromStart(ctx, tx, head, ops[len(ops)-1].Index)
			}
			if errors.Is(err, errCorruptHead) {
				return nil, &Quarantine{Stream: head.Stream, Index: head.LastIndex + 1, ErrorName: "CorruptHead", Reason: err.Error()}, nil
			}
			return nil, nil, err
		}
	}
	good := len(ops)
	var failure error
	for i := range ops {
		if err := a.reg.Replay(st, ops[i:i+1]); err != nil {
			var sb *model.SkipBeforeStart
			if errors.As(err, &sb) {
				// The skip reaches before the stored head: rebuild the
				// stream from index 0, which the log always allows.
				return a.verifyFromStart(ctx, tx, head, ops[len(ops)-1].Index)
			}
			good, failure = i, err
			break
		}
	}
	var q *Quarantine
	if failure != nil {
		q = &Quarantine{Stream: head.Stream, Index: ops[good].Index, ErrorName: errorName(failure), Reason: failure.Error()}
		if good == 0 {
			return nil, q, nil
		}
		// The failed reducer may have left st half changed: replay the
		// verified prefix again on a fresh copy of the stored head.
		var err error
		if st, err = a.storedState(ctx, tx, &head); err != nil {
			if sb := (*model.SkipBeforeStart)(nil); errors.Is(err, errCorruptHead) || errors.As(err, &sb) {
				return nil, q, nil
			}
			return nil, nil, err
		}
		if err := a.reg.Replay(st, ops[:good]); err != nil {
			return nil, q, nil
		}
	}
	ch, err := change(head, st, ops[:good])
	if err != nil {
		return nil, nil, err
	}
	return ch, q, nil
}

// errCorruptHead marks a stored state that does not decode.
var errCorruptHead = errors.New("corrupt stored head")

// storedState decodes the head's stored state, reading it first when Claim
// left it out (the batch held it in memory, and has changed it since). A
// state stored at an earlier head (Head.StateAt) is brought to the head by
// replaying the log's operations after it, every hash checked; a skip among
// them that reaches before the stored state comes back as
// *model.SkipBeforeStart, for the caller to rebuild from the start.
func (a *advancer) storedState(ctx context.Context, tx Tx, head *Head) (*model.StreamState, error) {
	if head.State == nil && head.LastIndex >= 0 {
		stored, err := tx.Heads(ctx, a.projector.Name(), []oplog.StreamKey{head.Stream})
		if err != nil {
			return nil, err
		}
		h, ok := stored[head.Stream]
		if !ok || h.Ref() != head.Ref() {
			return nil, fmt.Errorf("read the stored state of %s at index %d: the head moved inside the batch's lock", head.Stream, head.LastIndex)
		}
		head.State, head.StateAt = h.State, h.StateAt
	}
	st, err := head.StreamState()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCorruptHead, err)
	}
	if head.StateAt == nil || head.StateAt.LastIndex >= head.LastIndex {
		return st, nil
	}
	ops, err := a.readLog(ctx, head.Stream, head.StateAt.LastIndex+1, head.LastIndex)
	if err != nil {
		return nil, err
	}
	if err := a.reg.Replay(st, ops); err != nil {
		var sb *model.SkipBeforeStart
		if errors.As(err, &sb) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: replay the log from the state stored at index %d of %s: %w", errCorruptHead, head.StateAt.LastIndex, head.Stream, err)
	}
	if st.Revision != head.LastIndex+1 || st.Hash != head.Hash {
		return nil, fmt.Errorf("%w: the log replayed from the state stored at index %d of %s reached index %d with hash %q, not the head's %d with %q",
			errCorruptHead, head.StateAt.LastIndex, head.Stream, st.Revision-1, st.Hash, head.LastIndex, head.Hash)
	}
	return st, nil
}

func (a *advancer) verifyFromStart(ctx context.Context, tx Tx, head Head, upTo int64) (*Change, *Quarantine, error) {
	all, err := a.readLog(ctx, head.Stream, 0, upTo)
	if err != nil {
		return nil, nil, err
	}
	// The stream replays as a whole: an operation's skip reaches back over
	// operations replayed before it, which a replay one operation at a
	// time (verify's) cannot see. On a failure, the longest prefix that
	// replays is what is verified, and the stream is quarantined after it.
	replay := func(n int) (*model.StreamState, error) {
		st := model.NewStreamState(head.Stream, head.DocumentType)
		return st, a.reg.Replay(st, all[:n])
	}
	good := len(all)
	st, failure := replay(good)
	if failure != nil {
		good = sort.Search(len(all), func(n int) bool { _, err := replay(n + 1); return err != nil })
		if st, err = replay(good); err != nil {
			return nil, nil, fmt.Errorf("replay the verified prefix of %s: %w", head.Stream, err)
		}
	}
	var q *Quarantine
	if failure != nil {
		q = &Quarantine{Stream: head.Stream, Index: all[good].Index, ErrorName: errorName(failure), Reason: failure.Error()}
	}
	if int64(good) <= head.LastIndex+1 {
		return nil, q, nil
	}
	empty := Head{Stream: head.Stream, DocumentType: head.DocumentType, LastIndex: -1}
	ch, err := change(empty, st, all[:good])
	if err != nil {
		return nil, nil, err
	}
	// Only the operations past the stored head are new to the projector.
	ch.From = head.LastIndex
	ch.Operations = slices.DeleteFunc(ch.Operations, func(op oplog.Operation) bool { return op.Index <= head.LastIndex })
	return ch, q, nil
}

func change(head Head, st *model.StreamState, ops []oplog.Operation) (*Change, error) {
	state, err := st.Canonical() // kept from the replay's last hash
	if err != nil {
		return nil, fmt.Errorf("encode the state of %s: %w", st.Stream, err)
	}
	last := ops[len(ops)-1]
	return &Change{
		Stream:       head.Stream,
		DocumentType: st.DocumentType,
		From:         head.LastIndex,
		Operations:   ops,
		State:        st,
		Head: Head{
			Stream: head.Stream, DocumentType: st.DocumentType, LastIndex: last.Index, Hash: st.Hash,
			Version: st.Version, State: state, LastTimestampUtcMs: last.TimestampUtcMs,
		},
	}, nil
}

// errorName is the stable name of a replay's failure, or a generic one.
func errorName(err error) string {
	if n := oplog.ErrorName(err); n != "" {
		return n
	}
	return "ApplyFailed"
}
