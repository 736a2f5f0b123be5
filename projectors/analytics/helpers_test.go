package analytics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/builtin"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/analytics"
)

// newProjector connects a projector to a fresh test database, closed when
// the test ends.
func newProjector(t testing.TB, mutate ...func(*analytics.Config)) *analytics.Projector {
	t.Helper()
	addr, db := testenv.ClickHouseDatabase(t)
	cfg := analytics.Config{Addr: []string{addr}, Database: db}
	for _, m := range mutate {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := analytics.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

// query runs a query and returns its rows as strings.
func query(t testing.TB, p *analytics.Projector, q string, args ...any) [][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := p.Conn().Query(ctx, q, args...)
	require.NoError(t, err, "query: %s", q)
	defer rows.Close()
	types := rows.ColumnTypes()
	var out [][]string
	for rows.Next() {
		vals := make([]any, len(types))
		for i, ct := range types {
			vals[i] = newScanTarget(ct.ScanType())
		}
		require.NoError(t, rows.Scan(vals...))
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = deref(v)
		}
		out = append(out, row)
	}
	require.NoError(t, rows.Err())
	return out
}

// scalar runs a query returning one UInt64.
func scalar(t testing.TB, p *analytics.Projector, q string, args ...any) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n uint64
	require.NoError(t, p.Conn().QueryRow(ctx, q, args...).Scan(&n), "query: %s", q)
	return n
}

// fakeTx is the runner's transaction reduced to stored heads, for calling
// Apply without a runner.
type fakeTx struct {
	heads map[oplog.StreamKey]projectors.Head
}

func (f *fakeTx) Claim(_ context.Context, _ string, streams []oplog.StreamKey, _ map[oplog.StreamKey]projectors.HeadRef) (map[oplog.StreamKey]projectors.Head, map[oplog.StreamKey]projectors.Quarantine, error) {
	out := map[oplog.StreamKey]projectors.Head{}
	for _, k := range streams {
		if h, ok := f.heads[k]; ok {
			out[k] = h
		}
	}
	return out, nil, nil
}
func (f *fakeTx) Heads(ctx context.Context, p string, streams []oplog.StreamKey) (map[oplog.StreamKey]projectors.Head, error) {
	heads, _, err := f.Claim(ctx, p, streams, nil)
	return heads, err
}
func (f *fakeTx) QueueHeadsIfNewer(p string, heads []projectors.Head) {
	_, _ = f.PutHeadsIfNewer(context.Background(), p, heads)
}

func (f *fakeTx) PutHeadsIfNewer(_ context.Context, _ string, heads []projectors.Head) (int, error) {
	for _, h := range heads {
		f.heads[h.Stream] = h
	}
	return len(heads), nil
}
func (f *fakeTx) Quarantine(context.Context, string, projectors.Quarantine) error { return nil }

// writer builds verified changes with the model SDK, as the runner hands
// them over, for documents of doclog/json.
type writer struct {
	t       testing.TB
	reg     *model.Registry
	states  map[oplog.StreamKey]*model.StreamState
	ordinal int64
	clock   int64
	seq     int
}

func newWriter(t testing.TB) *writer {
	reg, err := builtin.NewRegistry()
	require.NoError(t, err)
	return &writer{t: t, reg: reg, states: map[oplog.StreamKey]*model.StreamState{}, clock: 1_764_460_800_000}
}

func (w *writer) state(doc, scope string) *model.StreamState {
	k := oplog.StreamKey{DocumentID: doc, Scope: scope, Branch: oplog.DefaultBranch}
	st, ok := w.states[k]
	if !ok {
		st = model.NewStreamState(k, jsondoc.DocumentType)
		w.states[k] = st
	}
	return st
}

// change applies one action to a document and returns the stream's change.
func (w *writer) change(doc, scope, typ string, input any) projectors.Change {
	t := w.t
	t.Helper()
	in, err := json.Marshal(input)
	require.NoError(t, err)
	w.seq++
	w.clock += 3_600_000 // an hour per action, so daily queries see several days
	a := oplog.Action{ID: fmt.Sprintf("a-%d", w.seq), Type: typ, Scope: scope, TimestampUtcMs: w.clock, Input: in}
	target := w.state(doc, scope)
	var docState *model.StreamState
	if scope != oplog.ScopeDocument {
		docState = w.state(doc, oplog.ScopeDocument)
	}
	from := target.Revision - 1
	res, err := w.reg.Apply(docState, target, &a)
	require.NoError(t, err)
	w.ordinal++
	jobID := fmt.Sprintf("00000000-0000-4000-8000-%012d", w.seq)
	op := oplog.Operation{
		OpID: model.OpID(jobID, 0), JobID: jobID, DocumentID: doc, DocumentType: jsondoc.DocumentType,
		Scope: scope, Branch: oplog.DefaultBranch, Index: res.Index, Hash: res.Hash, TimestampUtcMs: a.TimestampUtcMs,
		Version: res.Version, Action: a, Ordinal: w.ordinal, WrittenAt: time.UnixMilli(a.TimestampUtcMs + 40),
	}
	state, err := model.Canonical(target.State)
	require.NoError(t, err)
	return projectors.Change{
		Stream: target.Stream, DocumentType: jsondoc.DocumentType, From: from, Operations: []oplog.Operation{op},
		State: target.Clone(),
		Head: projectors.Head{Stream: target.Stream, DocumentType: jsondoc.DocumentType, LastIndex: res.Index, Hash: res.Hash,
			Version: res.Version, State: state, LastTimestampUtcMs: a.TimestampUtcMs},
	}
}

func (w *writer) create(doc, slug string) projectors.Change {
	return w.change(doc, oplog.ScopeDocument, model.ActionCreateDocument,
		model.CreateDocumentInput{DocumentType: jsondoc.DocumentType, Name: "doc " + doc, Slug: slug})
}

func (w *writer) patch(doc, scope string, n int) projectors.Change {
	return w.change(doc, scope, jsondoc.ActionMergePatch, map[string]any{"n": n})
}

func (w *writer) remove(doc string) projectors.Change {
	return w.change(doc, oplog.ScopeDocument, model.ActionDeleteDocument, struct{}{})
}

// merge folds consecutive changes of one stream into one, as the runner
// hands a stream over once per batch.
func merge(changes ...projectors.Change) []projectors.Change {
	var out []projectors.Change
	for _, c := range changes {
		if n := len(out); n > 0 && out[n-1].Stream == c.Stream {
			last := &out[n-1]
			last.Operations = append(last.Operations, c.Operations...)
			last.State, last.Head = c.State, c.Head
			continue
		}
		out = append(out, c)
	}
	return out
}

// apply runs Apply and then stores the heads, as the runner does.
func apply(t testing.TB, p *analytics.Projector, tx *fakeTx, changes ...projectors.Change) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, p.Apply(ctx, tx, changes))
	heads := make([]projectors.Head, len(changes))
	for i, c := range changes {
		heads[i] = c.Head
	}
	_, err := tx.PutHeadsIfNewer(ctx, p.Name(), heads)
	require.NoError(t, err)
}

func newScanTarget(typ reflect.Type) any { return reflect.New(typ).Interface() }

func deref(v any) string { return fmt.Sprint(reflect.ValueOf(v).Elem().Interface()) }

func toString(n uint64) string { return strconv.FormatUint(n, 10) }
