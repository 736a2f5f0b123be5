package main

import (
	"context"
	"embed"
	"fmt"

	"github.com/doclog/doclog/pgmigrate"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/pgproj"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Counter is a projector of this module's own: it counts the operations of
// every document type per branch in example_type_counts, in the runner's
// batch transaction, so the counts move with the runner's checkpoint and a
// re-delivered record is never counted twice.
type Counter struct{}

var _ projectors.Projector = Counter{}

// CounterMigrations is the counter's schema, applied by the one migrator
// with doclog's own sets.
func CounterMigrations() pgmigrate.Set {
	return pgmigrate.Set{Component: "example-counter", FS: migrations, Dir: "migrations"}
}

// Name implements projectors.Projector.
func (Counter) Name() string { return "example_counter" }

// Filter implements projectors.Projector: every stream counts.
func (Counter) Filter() projectors.Filter { return projectors.Filter{} }

// Apply implements projectors.Projector. The runner hands over only the
// operations past each stream's stored head.
func (Counter) Apply(ctx context.Context, t projectors.Tx, changes []projectors.Change) error {
	tx, err := pgproj.Conn(t)
	if err != nil {
		return err
	}
	type key struct{ documentType, branch string }
	counts := map[key]int64{}
	for _, c := range changes {
		counts[key{c.DocumentType, c.Stream.Branch}] += int64(len(c.Operations))
	}
	for k, n := range counts {
		if _, err := tx.Exec(ctx, `INSERT INTO example_type_counts (document_type, branch, operations) VALUES ($1, $2, $3)
ON CONFLICT (document_type, branch) DO UPDATE SET operations = example_type_counts.operations + EXCLUDED.operations`,
			k.documentType, k.branch, n); err != nil {
			return fmt.Errorf("count the operations of %s on %s: %w", k.documentType, k.branch, err)
		}
	}
	return nil
}
