// Package catalog is the list of the projectors a doclog deployment can
// run, each declared once by its Spec. The service, the admin operations
// and the CLI iterate it (to validate names, choose defaults, open a
// projector, say what one needs), so adding a projector is its package and
// one Spec here.
package catalog

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/doclog/doclog/pgmigrate"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/analytics"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
)

// Spec declares a projector.
type Spec struct {
	// Name names it: its checkpoints and stream heads, the suffix of its
	// consumer group, the argument the CLI takes.
	Name string
	// Summary says in a few words what it keeps, for help texts.
	Summary string
	// Default reports whether a deployment runs it unless told which.
	Default bool
	// ClickHouse reports that its tables live in ClickHouse: it needs
	// Options.ClickHouse, and a deployment given a ClickHouse URL runs it.
	ClickHouse bool
	// Migrations are its Postgres migrations (nil: it keeps no tables
	// there). They are applied with the log's and the runner's.
	Migrations func() pgmigrate.Set
	// ChoosesStart reports whether it may start at a chosen position of
	// the log (projectors.StartPosition); the others always start at the
	// beginning, since their readers expect every document.
	ChoosesStart bool
	// Open builds the projector; close releases what it holds (after its
	// runner stopped).
	Open func(ctx context.Context, o Options) (p projectors.Projector, close func(), err error)
}

// Options are what opening a projector may need.
type Options struct {
	// ClickHouse configures a projector whose tables live in ClickHouse
	// (Spec.ClickHouse): where the server is, and its insert bounds.
	ClickHouse analytics.Config
	// Logger may be nil.
	Logger *zap.Logger
}

func stateless(p projectors.Projector) func(context.Context, Options) (projectors.Projector, func(), error) {
	return func(context.Context, Options) (projectors.Projector, func(), error) { return p, func() {}, nil }
}

var specs = []Spec{
	{
		Name: docview.Name, Summary: "the document view: documents by id and slug, every scope",
		Default: true, Migrations: docview.Migrations, Open: stateless(docview.Projector{}),
	},
	{
		Name: indexer.Name, Summary: "the relationship index: documents by type and parent, links",
		Default: true, Migrations: indexer.Migrations, Open: stateless(indexer.Projector{}),
	},
	{
		Name: analytics.DefaultName, Summary: "the ClickHouse operations and documents tables",
		ClickHouse: true, ChoosesStart: true,
		Open: func(ctx context.Context, o Options) (projectors.Projector, func(), error) {
			p, err := analytics.New(ctx, o.ClickHouse, o.Logger)
			if err != nil {
				return nil, nil, err
			}
			return p, func() { _ = p.Close() }, nil
		},
	},
}

// All returns every projector's spec, in the order help texts list them.
func All() []Spec { return append([]Spec(nil), specs...) }

// Lookup returns the spec named name, or an *UnknownError naming the
// projectors there are.
func Lookup(name string) (Spec, error) {
	for _, s := range specs {
		if s.Name == name {
			return s, nil
		}
	}
	return Spec{}, &UnknownError{Name: name}
}

// Names lists every projector's name.
func Names() []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}

// Defaults lists the projectors a deployment runs unless told which.
func Defaults() []string {
	var out []string
	for _, s := range specs {
		if s.Default {
			out = append(out, s.Name)
		}
	}
	return out
}

// UnknownError is a projector name no spec has.
type UnknownError struct{ Name string }

func (e *UnknownError) Error() string {
	return fmt.Sprintf("unknown projector %q: the projectors are %s", e.Name, strings.Join(Names(), ", "))
}
