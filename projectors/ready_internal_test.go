package projectors

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/doclog/doclog/internal/testenv"
	oplog "github.com/doclog/doclog/log"
)

// A failing runner's readiness report names the projector and the class of
// its failure, never the driver's text: /readyz answers anyone who reaches
// the ops port, and a connection error names the server's address and the
// database's user and name.
func TestReadyNamesTheFailureClassOnly(t *testing.T) {
	t.Parallel()
	pg := testenv.DownPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, connErr := pgx.Connect(ctx, pg.URL)
	require.Error(t, connErr)

	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("apply batch: %w", connErr), "projector docview: failing and retrying (connection refused)"},
		{&oplog.Unavailable{Err: connErr}, "projector docview: failing and retrying (connection refused)"},
		{fmt.Errorf("commit offsets: %w", kerr.RebalanceInProgress), "projector docview: failing and retrying (Kafka refused: REBALANCE_IN_PROGRESS)"},
		{&oplog.RevisionMismatch{}, "projector docview: failing and retrying (" + oplog.NameRevisionMismatch + ")"},
		{fmt.Errorf("a bug at 10.0.0.7:5432"), "projector docview: failing and retrying (an error the log holds)"},
	} {
		r := &Runner{name: "docview", running: true, lastErr: c.err}
		err := r.Ready()
		require.EqualError(t, err, c.want)
		testenv.RequireNoInternals(t, []byte(err.Error()), pg)
	}

	r := &Runner{name: "indexer", running: true, reconcileErr: fmt.Errorf("reconcile: %w", connErr)}
	require.EqualError(t, r.Ready(), "projector indexer: the last reconcile pass failed (connection refused)")
	require.NoError(t, (&Runner{name: "indexer", running: true}).Ready())
}
