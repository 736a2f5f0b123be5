package admin

import (
	"context"
	"fmt"
	"sort"

	"go.uber.org/zap"

	"github.com/doclog/doclog/executor/model"
	"github.com/doclog/doclog/internal/kafka"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
	"github.com/doclog/doclog/projectors/pgproj"
)

// rebuildable are the projectors whose tables live in Postgres and can be
// rebuilt in generations.
var rebuildable = map[string]projectors.Generational{
	docview.Name: docview.Projector{},
	indexer.Name: indexer.Projector{},
}

// KnownProjectors are the projectors a standard deployment runs.
var KnownProjectors = []string{docview.Name, indexer.Name, "analytics"}

// ProjectorStatus is a projector's stored position and health.
type ProjectorStatus struct {
	Name        string                  `json:"name"`
	Group       string                  `json:"group"`
	Checkpoints []projectors.Checkpoint `json:"checkpoints"`
	Quarantines []projectors.Quarantine `json:"quarantines"`
	Lag         []PartitionLag          `json:"lag,omitempty"`
}

// ListProjectors reads each projector's checkpoints (the Postgres rows its
// batches commit with) and quarantined streams. Group names carry prefix,
// as the deployment names them.
func ListProjectors(ctx context.Context, store *postgres.Store, prefix string, names []string) ([]ProjectorStatus, error) {
	ps := pgproj.New(store.Pool())
	out := make([]ProjectorStatus, 0, len(names))
	for _, name := range names {
		st := ProjectorStatus{Name: name, Group: prefix + projectors.DefaultGroupPrefix + name}
		var err error
		if st.Checkpoints, err = ps.Checkpoints(ctx, name); err != nil {
			return nil, fmt.Errorf("reading checkpoints of %s: %w", name, err)
		}
		if st.Quarantines, err = ps.Quarantines(ctx, name); err != nil {
			return nil, fmt.Errorf("reading quarantines of %s: %w", name, err)
		}
		sort.Slice(st.Checkpoints, func(i, j int) bool { return st.Checkpoints[i].Partition < st.Checkpoints[j].Partition })
		if st.Checkpoints == nil {
			st.Checkpoints = []projectors.Checkpoint{}
		}
		if st.Quarantines == nil {
			st.Quarantines = []projectors.Quarantine{}
		}
		out = append(out, st)
	}
	return out, nil
}

// RebuildProjector rebuilds a Postgres projector's tables without downtime
// (projectors.Rebuild): a new generation is built from the log, caught up
// from the live checkpoints on the write-ready topic and swapped in.
func RebuildProjector(ctx context.Context, store *postgres.Store, reg *model.Registry, kcfg kafka.Config, prefix, name string, logger *zap.Logger) (projectors.RebuildReport, error) {
	p, ok := rebuildable[name]
	if !ok {
		if name == "analytics" {
			return projectors.RebuildReport{}, fmt.Errorf("projector %q cannot be rebuilt here yet: only the Postgres projectors %s and %s rebuild in place; "+
				"a rebuild of the ClickHouse tables without downtime is not done yet (docs/projectors.md)", name, docview.Name, indexer.Name)
		}
		return projectors.RebuildReport{}, fmt.Errorf("projector %q cannot be rebuilt here: the Postgres projectors are %s and %s", name, docview.Name, indexer.Name)
	}
	return projectors.Rebuild(ctx, projectors.Config{
		Projector: p,
		Store:     pgproj.New(store.Pool()),
		Log:       store,
		Registry:  reg,
		Kafka:     kcfg,
		Topic:     kafka.TopicNames(prefix).WriteReady,
		Group:     prefix + projectors.DefaultGroupPrefix + name,
		Logger:    logger,
	})
}
