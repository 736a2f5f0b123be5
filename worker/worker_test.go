package worker_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/pgmigrate"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/catalog"
	"github.com/doclog/doclog/projectors/pgproj"
	"github.com/doclog/doclog/projectors/projtest"
	"github.com/doclog/doclog/worker"
)

// seen keeps the documents it was handed, one row each.
type seen struct{}

func (seen) Name() string              { return "worker_test_seen" }
func (seen) Filter() projectors.Filter { return projectors.Filter{} }
func (seen) Apply(ctx context.Context, t projectors.Tx, changes []projectors.Change) error {
	tx, err := pgproj.Conn(t)
	if err != nil {
		return err
	}
	for _, ch := range changes {
		if _, err := tx.Exec(ctx, `INSERT INTO worker_test_seen (document_id) VALUES ($1) ON CONFLICT DO NOTHING`, ch.Stream.DocumentID); err != nil {
			return err
		}
	}
	return nil
}

func seenMigrations() pgmigrate.Set {
	return pgmigrate.Set{Component: "worker-test-seen", Dir: "m", FS: fstest.MapFS{
		"m/001_seen.sql": {Data: []byte(`CREATE TABLE worker_test_seen (document_id text PRIMARY KEY);`)},
	}}
}

func seenSpec() catalog.Spec {
	return catalog.Spec{
		Name: "worker_test_seen", Summary: "the documents seen", ChoosesStart: true, Migrations: seenMigrations,
		Open: func(context.Context, catalog.Options) (projectors.Projector, func(), error) {
			return seen{}, func() {}, nil
		},
	}
}

func run(ctx context.Context, args ...string) (int, string) {
	var out bytes.Buffer
	code := worker.Run(ctx, "worker-test", args, &out, &out, seenSpec())
	return code, out.String()
}

// The worker's tree has doclog's commands for its projectors, serve's
// flags with the worker's defaults, and refuses a spec the catalog
// refuses with a usage error.
func TestCommandTree(t *testing.T) {
	root, err := worker.Command("worker-test", &bytes.Buffer{}, &bytes.Buffer{}, seenSpec())
	require.NoError(t, err)
	var names []string
	for _, c := range root.Commands() {
		names = append(names, c.Name())
	}
	require.Subset(t, names, []string{"serve", "migrate", "projector", "quarantine", "version"})
	serve, _, err := root.Find([]string{"serve"})
	require.NoError(t, err)
	require.Equal(t, "[worker_test_seen]", serve.Flags().Lookup("projectors").DefValue, "its own projectors by default")
	require.Equal(t, "[projectors]", serve.Flags().Lookup("roles").DefValue)
	require.NotNil(t, serve.Flags().Lookup(worker.StartFlag))
	require.Nil(t, serve.Flags().Lookup("analytics-start"))
	for _, f := range []string{"database-url", "kafka-seeds", "ops-addr", "topics-prefix", "config", "migrate", "member-name"} {
		require.NotNil(t, serve.Flags().Lookup(f), "serve has doclog serve's --%s", f)
	}
	migrate, _, err := root.Find([]string{"migrate", "status"})
	require.NoError(t, err)
	require.Equal(t, "status", migrate.Name())
	lift, _, err := root.Find([]string{"quarantine", "release"})
	require.NoError(t, err)
	require.Equal(t, "lift", lift.Name(), "release is lift's other name")

	code, out := run(context.Background(), "projector", "rebuild", "docview", "--database-url", "postgres://u@127.0.0.1:1/x")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, `rebuild takes worker_test_seen, not "docview"`)
	code, out = run(context.Background(), "serve", "--start", "yesterday")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "earliest, latest or an RFC 3339 time")
	// serve reads DOCLOG_* as doclog serve does.
	t.Setenv("DOCLOG_START", "yesterday")
	code, out = run(context.Background(), "serve", "--database-url", "postgres://u@127.0.0.1:1/x")
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "DOCLOG_START")
	require.Contains(t, out, "earliest, latest or an RFC 3339 time")

	var bad bytes.Buffer
	require.Equal(t, 2, worker.Run(context.Background(), "w", nil, &bad, &bad, catalog.Spec{Name: "docview", Open: seenSpec().Open}))
	require.Contains(t, bad.String(), `projector "docview" is in the catalog already`)
	bad.Reset()
	require.Equal(t, 2, worker.Run(context.Background(), "w", nil, &bad, &bad, catalog.Spec{Name: "Bad Name", Open: seenSpec().Open}))
	require.Contains(t, bad.String(), "lower-case letters")
	bad.Reset()
	require.Equal(t, 2, worker.Run(context.Background(), "w", nil, &bad, &bad))
	require.Contains(t, bad.String(), "at least one projector")
}

// A projector whose spec chooses its start begins where the worker's
// --start says: with latest, a document written before the worker first
// ran never reaches its table (nor its heads), one written after does;
// migrate applies the spec's migrations with doclog's.
func TestServeStartsWhereTold(t *testing.T) {
	env := projtest.New(t)
	url := env.Pool.Config().ConnString()
	ctx := context.Background()
	code, out := run(ctx, "migrate", "--database-url", url)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "worker-test-seen")

	w := env.NewWorkload(1)
	_, before := w.Create("before", jsondoc.DocumentType, "")
	env.Publish(before)

	sctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	var serveOut bytes.Buffer
	go func() {
		done <- worker.Run(sctx, "worker-test", []string{"serve", "--database-url", url,
			"--kafka-seeds", strings.Join(env.Kafka.Config.Seeds, ","), "--topics-prefix", env.Kafka.Topics.Prefix,
			"--topics-create=false", "--ops-addr", "127.0.0.1:0", "--start", "latest", "--log-level", "warn",
			"--kafka-session-timeout", "6s", "--kafka-heartbeat-interval", "500ms"}, &serveOut, &serveOut, seenSpec())
	}()
	defer func() {
		stop()
		select {
		case code := <-done:
			require.Equal(t, 0, code, serveOut.String())
		case <-time.After(time.Minute):
			t.Error("serve did not stop")
		}
	}()
	// The start is stored as each partition's checkpoint when assigned.
	env.Eventually(func() bool {
		var n int
		require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM projector_checkpoints WHERE projector = 'worker_test_seen' AND next_offset >= 0`).Scan(&n))
		return n == 4
	}, 90*time.Second, "the worker did not take its partitions")

	_, after := w.Create("after", jsondoc.DocumentType, "")
	env.Publish(after)
	docs := func() []string {
		rows, err := env.Pool.Query(ctx, `SELECT document_id FROM worker_test_seen ORDER BY 1`)
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return ids
	}
	env.Eventually(func() bool { return len(docs()) > 0 }, 60*time.Second, "the document written after the start never came")
	require.Equal(t, []string{"after"}, docs())
	var heads int
	require.NoError(t, env.Pool.QueryRow(ctx, `SELECT count(*) FROM projector_streams WHERE projector = 'worker_test_seen' AND document_id = 'before'`).Scan(&heads))
	require.Zero(t, heads, "the document written before the start has no head")
}
