package app

import (
	"github.com/spf13/pflag"

	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/catalog"
)

// startSettings are where the projectors start on a write-ready partition
// they have no checkpoint for (projectors.StartPosition).
type startSettings struct {
	// AnalyticsStart is the start of every projector that chooses its own
	// (catalog.Spec.ChoosesStart): doclog's analytics projector, under
	// --analytics-start, and those of a worker binary, under its --start.
	// The document view and the indexer always start at the beginning of
	// the log: their readers expect every document.
	AnalyticsStart projectors.StartPosition
}

// DefaultStartFlag is doclog serve's name of the start flag.
const DefaultStartFlag = "analytics-start"

func bindStartFlags(fs *pflag.FlagSet, s *Settings, name string) {
	what := "a new analytics projector"
	if name != DefaultStartFlag {
		what = "a new projector that chooses its start (catalog.Spec.ChoosesStart)"
	}
	fs.Var(startValue{&s.AnalyticsStart}, name,
		"where "+what+" starts reading: earliest (the whole log), latest (documents written from now on; the others appear once written to) or an RFC 3339 time; only for partitions it has no checkpoint for")
}

// projectorStart is the start of the named projector.
func (s *Settings) projectorStart(name string) projectors.StartPosition {
	if spec, err := catalog.Lookup(name); err == nil && spec.ChoosesStart {
		return s.AnalyticsStart
	}
	return projectors.StartPosition{}
}

// startValue is a projectors.StartPosition as a flag.
type startValue struct{ p *projectors.StartPosition }

func (v startValue) String() string {
	if v.p == nil {
		return projectors.StartPosition{}.String()
	}
	return v.p.String()
}

func (v startValue) Set(s string) error {
	p, err := projectors.ParseStartPosition(s)
	if err != nil {
		return err
	}
	*v.p = p
	return nil
}

func (startValue) Type() string { return "position" }
