package admin

import (
	"context"
	"fmt"
	"time"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/pgproj"
)

// QuarantinedStream is one stream a projector holds in quarantine: its
// operations from Index on wait until an operator lifts it.
type QuarantinedStream struct {
	Projector  string    `json:"projector"`
	DocumentID string    `json:"documentId"`
	Scope      string    `json:"scope"`
	Branch     string    `json:"branch"`
	Index      int64     `json:"index"`
	ErrorName  string    `json:"errorName"`
	Reason     string    `json:"reason"`
	Since      time.Time `json:"since"`
}

// Stream is the quarantined stream's key.
func (q QuarantinedStream) Stream() oplog.StreamKey {
	return oplog.StreamKey{DocumentID: q.DocumentID, Scope: q.Scope, Branch: q.Branch}
}

// ListQuarantines lists the quarantined streams of the named projectors, by
// projector then stream.
func ListQuarantines(ctx context.Context, store *postgres.Store, names []string) ([]QuarantinedStream, error) {
	ps := pgproj.New(store.Pool())
	out := []QuarantinedStream{}
	for _, name := range names {
		qs, err := ps.Quarantines(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("reading quarantines of %s: %w", name, err)
		}
		for _, q := range qs {
			out = append(out, QuarantinedStream{Projector: name, DocumentID: q.Stream.DocumentID, Scope: q.Stream.Scope,
				Branch: q.Stream.Branch, Index: q.Index, ErrorName: q.ErrorName, Reason: q.Reason, Since: q.Since})
		}
	}
	return out, nil
}

// LiftQuarantine lifts a stream's quarantine for projector p, whose tables
// it writes (projectors.Lift): the stream is replayed from index 0 of the log
// with every hash checked and what waited is applied; a stream that still
// does not verify stays quarantined (*projectors.LiftRefusedError).
func LiftQuarantine(ctx context.Context, store *postgres.Store, reg *model.Registry, p projectors.Projector, stream oplog.StreamKey) (projectors.LiftReport, error) {
	return projectors.Lift(ctx, projectors.Config{Projector: p, Store: pgproj.New(store.Pool()), Log: store, Registry: reg}, stream)
}
