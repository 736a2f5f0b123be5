package admin

import (
	"context"
	"fmt"
	"sort"

	"go.uber.org/zap"

	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/log/postgres"
	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/projectors"
	"github.com/doclog/doclog/projectors/pgproj"
)

// ProjectorStatus is a projector's stored position and health.
type ProjectorStatus struct {
	Name        string                  `json:"name"`
	Group       string                  `json:"group"`
	Checkpoints []projectors.Checkpoint `json:"checkpoints"`
	Quarantines []projectors.Quarantine `json:"quarantines"`
	Lag         []kafka.PartitionLag    `json:"lag,omitempty"`
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

// RebuildProjector rebuilds a projector's tables without downtime
// (projectors.Rebuild): a new generation is built from the log, caught up
// from the live checkpoints on the write-ready topic and swapped in. The
// Postgres projectors' generations are tables beside the live ones; the
// analytics projector's are ClickHouse tables it creates and renames
// itself. A projector that sets up its own runner (analytics: its batch
// bounds) does so for the new generation too.
func RebuildProjector(ctx context.Context, store *postgres.Store, reg *model.Registry, kcfg kafka.Config, prefix string, p projectors.Projector, logger *zap.Logger) (projectors.RebuildReport, error) {
	if _, ok := p.(projectors.Generational); !ok {
		return projectors.RebuildReport{}, fmt.Errorf("projector %q cannot be rebuilt: its tables have no generations", p.Name())
	}
	cfg := projectors.Config{
		Projector: p,
		Store:     pgproj.New(store.Pool()),
		Log:       store,
		Registry:  reg,
		Kafka:     kcfg,
		Topic:     kafka.TopicNames(prefix).WriteReady,
		Group:     prefix + projectors.DefaultGroupPrefix + p.Name(),
		Logger:    logger,
	}
	if rc, ok := p.(projectors.RunnerConfigurer); ok {
		cfg = rc.RunnerConfig(cfg)
	}
	return projectors.Rebuild(ctx, cfg)
}
