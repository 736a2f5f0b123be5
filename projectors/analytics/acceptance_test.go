package analytics_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/analytics"
	"github.com/doclog/doclog/projectors/projtest"
)

const catchUp = 3 * time.Minute

// TestAcceptance runs the projector under the real runner against real
// Kafka, Postgres and ClickHouse: after a workload of creates, mutations,
// relationships and deletes appended to the log and announced on the
// write-ready topic, ClickHouse's deduplicated operation counts per document
// equal the log's and the documents table equals a replay. Re-delivering the
// whole topic changes no count, and neither does a second projection over
// the same tables that crashes after every insert and before its commit.
func TestAcceptance(t *testing.T) {
	t.Parallel()
	env := projtest.New(t)
	p := newProjector(t)
	recs := env.NewWorkload(11).Random("doc", 40, 200)
	env.Publish(recs...)
	env.Start(p.RunnerConfig(env.Config(p, "analytics")))

	want := logCounts(t, env)
	var total uint64
	for _, n := range want {
		total += n
	}
	require.Len(t, want, 40)
	env.Eventually(func() bool { return countsMatch(t, p, want) }, catchUp, "clickhouse operation counts reach the log's")
	// The documents rows of a batch are inserted after its operations; the
	// checkpoint moves after both.
	waitCheckpoints(t, env, p.Name())
	checkDocuments(t, env, p)

	// Every record again: the runner finds each stream at or past the
	// record and writes nothing; the counts stay.
	env.Publish(recs...)
	waitCheckpoints(t, env, p.Name())
	require.True(t, countsMatch(t, p, want))
	checkDocuments(t, env, p)

	// A second projection of its own (new checkpoints and heads) into the
	// same tables replays the whole topic, and every batch fails once after
	// its ClickHouse insert, as a crash before the Postgres commit would:
	// each row arrives two or three more times, and the counts stay.
	addr := testenv.ClickHouseAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	second, err := analytics.New(ctx, analytics.Config{Addr: []string{addr}, Database: p.Database(), Name: "analytics_crashing"}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, second.Close()) })
	crashing := &crashAfterInsert{Projector: second}
	cfg := second.RunnerConfig(env.Config(second, "analytics-crashing"))
	cfg.Projector = crashing
	env.Start(cfg)
	waitCheckpoints(t, env, second.Name())
	require.Greater(t, crashing.crashes.Load(), int64(0))
	require.True(t, countsMatch(t, p, want))
	checkDocuments(t, env, p)
	raw := scalar(t, p, "SELECT count() FROM "+p.Database()+".operations")
	require.GreaterOrEqual(t, raw, total)
	t.Logf("%d operations, %d rows before merges", total, raw)
}

// crashAfterInsert fails every other Apply after the inserts, so the runner
// rolls the batch back and delivers it again.
type crashAfterInsert struct {
	*analytics.Projector
	calls, crashes atomic.Int64
}

var errCrash = errors.New("simulated crash between the clickhouse insert and the postgres commit")

func (c *crashAfterInsert) Apply(ctx context.Context, tx projectors.Tx, changes []projectors.Change) error {
	if err := c.Projector.Apply(ctx, tx, changes); err != nil {
		return err
	}
	if c.calls.Add(1)%2 == 1 {
		c.crashes.Add(1)
		return errCrash
	}
	return nil
}

// logCounts is the number of operations of every document in the log: the
// sum of its streams' revisions, read from Postgres by replaying them.
func logCounts(t *testing.T, env *projtest.Env) map[string]uint64 {
	t.Helper()
	states, failed := env.Replay()
	require.Empty(t, failed)
	out := map[string]uint64{}
	for k, st := range states {
		out[k.DocumentID] += uint64(st.Revision)
	}
	return out
}

// countsMatch compares ClickHouse's counts per document, with FINAL and
// with uniqExact, to want.
func countsMatch(t *testing.T, p *analytics.Projector, want map[string]uint64) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	final, err := p.OperationCounts(ctx, oplog.DefaultBranch)
	require.NoError(t, err)
	if len(final) != len(want) {
		return false
	}
	for id, n := range want {
		if final[id] != n {
			return false
		}
	}
	exact := map[string]uint64{}
	for _, r := range query(t, p, "SELECT document_id, toString(uniqExact(scope, branch, idx)) FROM "+p.Database()+".operations GROUP BY document_id") {
		n, ok := final[r[0]]
		require.True(t, ok, "document %s", r[0])
		exact[r[0]] = n
		require.Equal(t, r[1], toString(n), "uniqExact and FINAL disagree on %s", r[0])
	}
	return len(exact) == len(want)
}

// checkDocuments compares the documents table (FINAL) with a replay of the
// log.
func checkDocuments(t *testing.T, env *projtest.Env, p *analytics.Projector) {
	t.Helper()
	states, failed := env.Replay()
	require.Empty(t, failed)
	want := map[string][]string{}
	for k, st := range states {
		if k.Scope != oplog.ScopeDocument {
			continue
		}
		info, ok := model.DocumentInfoOf(st)
		require.True(t, ok)
		deleted := "0"
		if info.IsDeleted {
			deleted = "1"
		}
		rev := func(scope string) int64 {
			if s, ok := states[oplog.StreamKey{DocumentID: k.DocumentID, Scope: scope, Branch: k.Branch}]; ok {
				return s.Revision
			}
			return 0
		}
		total := uint64(rev(oplog.ScopeDocument) + rev(oplog.ScopeGlobal) + rev(oplog.ScopeLocal))
		want[k.DocumentID] = []string{info.DocumentType, info.Name, info.Slug, deleted,
			toString(uint64(rev(oplog.ScopeDocument))), toString(uint64(rev(oplog.ScopeGlobal))), toString(uint64(rev(oplog.ScopeLocal))),
			toString(total)}
	}
	got := map[string][]string{}
	for _, r := range query(t, p, "SELECT document_id, document_type, name, slug, toString(is_deleted), toString(revision_document), "+
		"toString(revision_global), toString(revision_local), toString(operation_count) FROM "+p.Database()+".documents FINAL WHERE branch = 'main'") {
		got[r[0]] = r[1:]
	}
	require.Equal(t, want, got)
}

// waitCheckpoints waits until the projector's checkpoints reach the end of
// every partition of the topic.
func waitCheckpoints(t *testing.T, env *projtest.Env, projector string) {
	t.Helper()
	adm := env.Kafka.Admin()
	env.Eventually(func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, env.Topic)
		require.NoError(t, err)
		cps, err := env.Store.Checkpoints(ctx, projector)
		require.NoError(t, err)
		at := map[int32]int64{}
		for _, c := range cps {
			at[c.Partition] = c.NextOffset
		}
		done := true
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset > 0 && at[o.Partition] < o.Offset {
				done = false
			}
		})
		return done
	}, catchUp, "projector "+projector+" reaches the end of the topic")
}
