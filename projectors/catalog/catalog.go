// Package catalog is the list of the projectors a doclog deployment can
// run, each declared once by its Spec. The service, the admin operations
// and the CLI iterate it (to validate names, choose defaults, open a
// projector, say what one needs), so adding a built-in projector is its
// package and one Spec here, and a projector of another module is one
// Register call in its own binary (package worker makes that binary), after
// which it is seen exactly like a built-in one.
package catalog

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/builtin"
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
	// Models are document models the projector reads beyond the built-in
	// ones (model/builtin): the registry of every process that runs or
	// operates a projector of the catalog holds them (Registry), the
	// executor's and ingest's too when the process runs them.
	Models []model.Model
}

// Registry returns a model registry of the built-in models and those of
// every spec, so that what verifies a projector's streams knows their
// models.
func Registry() (*model.Registry, error) {
	reg, err := builtin.NewRegistry()
	if err != nil {
		return nil, err
	}
	for _, s := range All() {
		for _, m := range s.Models {
			if err := reg.Register(m); err != nil {
				return nil, fmt.Errorf("register the models of projector %s: %w", s.Name, err)
			}
		}
	}
	return reg, nil
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

// mu guards specs, which Register extends; the built-in ones come first.
var mu sync.RWMutex

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

// namePattern is what a projector's name may be: it keys rows, names a
// consumer group and, with a suffix, the tables and group of a rebuild.
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)

// Validate reports what makes the spec unusable: a name that is not 1 to 40
// lower-case letters, digits and underscores starting with a letter, or no
// Open.
func (s Spec) Validate() error {
	switch {
	case !namePattern.MatchString(s.Name):
		return &InvalidSpecError{Name: s.Name, Reason: "a projector name is 1 to 40 lower-case letters, digits and underscores, starting with a letter"}
	case s.Open == nil:
		return &InvalidSpecError{Name: s.Name, Reason: "the spec has no Open to build the projector with"}
	}
	return nil
}

// Register adds a projector of another module to the catalog, so that the
// service (app), the migrations (admin.Migrations) and the CLI see it as
// they see a built-in one. It refuses an invalid spec (*InvalidSpecError)
// and a name the catalog has already (*DuplicateError). Call it before
// anything reads the catalog, in main: flags take their defaults and help
// texts from it when they are declared.
func Register(s Spec) error {
	if err := s.Validate(); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	for _, have := range specs {
		if have.Name == s.Name {
			return &DuplicateError{Name: s.Name}
		}
	}
	specs = append(specs, s)
	return nil
}

// All returns every projector's spec, in the order help texts list them:
// the built-in ones, then those registered, in their order.
func All() []Spec {
	mu.RLock()
	defer mu.RUnlock()
	return append([]Spec(nil), specs...)
}

// Lookup returns the spec named name, or an *UnknownError naming the
// projectors there are.
func Lookup(name string) (Spec, error) {
	for _, s := range All() {
		if s.Name == name {
			return s, nil
		}
	}
	return Spec{}, &UnknownError{Name: name}
}

// Names lists every projector's name.
func Names() []string {
	all := All()
	out := make([]string, len(all))
	for i, s := range all {
		out[i] = s.Name
	}
	return out
}

// Defaults lists the projectors a deployment runs unless told which.
func Defaults() []string {
	var out []string
	for _, s := range All() {
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

// InvalidSpecError is a spec Register refuses, and why.
type InvalidSpecError struct{ Name, Reason string }

func (e *InvalidSpecError) Error() string {
	return fmt.Sprintf("projector spec %q: %s", e.Name, e.Reason)
}

// DuplicateError is a spec whose name the catalog has already.
type DuplicateError struct{ Name string }

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("projector %q is in the catalog already: every projector needs a name of its own", e.Name)
}
