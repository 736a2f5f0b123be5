package projectors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// Generational is a projector whose tables can be rebuilt without downtime:
// a new generation is written to copies of its tables, then swapped in.
type Generational interface {
	Projector
	// Tables lists the projection's tables by their live names.
	Tables() []string
	// WithGeneration returns the projector writing generation gen: the
	// tables GenerationName(table, gen), under the name
	// GenerationName(Name(), gen).
	WithGeneration(gen string) Projector
}

// GenerationName is name for the live generation (gen "") and name_gen for
// another.
func GenerationName(name, gen string) string {
	if gen == "" {
		return name
	}
	return name + "_" + gen
}

// GenerationTables is a Generational projector whose tables live outside
// the Store (the analytics tables, in ClickHouse): Rebuild has it create,
// swap and drop its generations, and the store keeps only the runner's
// state of them (it is handed no tables).
type GenerationTables interface {
	Generational
	// CreateGeneration creates empty copies of the tables for gen,
	// replacing leftovers of an earlier attempt.
	CreateGeneration(ctx context.Context, gen string) error
	// SwapGeneration renames the live tables GenerationName(table,
	// gen+"_old") and gen's tables to the live names, so that a reader
	// sees either all the old tables or all the new ones. It runs inside
	// the store's switch, before that commits, and may run again after a
	// switch that failed to commit: a swap already done is no error.
	SwapGeneration(ctx context.Context, gen string) error
	// DropGeneration drops gen's tables that exist.
	DropGeneration(ctx context.Context, gen string) error
}

// GenerationStore is a Store that can hold a second generation of a
// projector's tables and swap it in.
type GenerationStore interface {
	Store
	// PrepareGeneration creates empty copies of the tables for gen (the
	// live tables' columns, keys and indexes), clears any state kept under
	// the projector name build, and seeds build's checkpoints with seed.
	PrepareGeneration(ctx context.Context, build string, tables []string, gen string, seed []Checkpoint) error
	// SwitchGeneration swaps gen's tables in for the live ones, and build's
	// stream heads and quarantines in for live's, in one transaction that
	// holds every live checkpoint (so no live batch commits meanwhile),
	// waits out and holds off every other transaction over live's streams
	// (the reconciler's, a lift's), and fences build's runner. swap, when
	// not nil, runs last in that transaction, before it commits: it swaps
	// tables the store does not hold. It does nothing and returns false
	// while some partition of build's checkpoints is behind live's. The
	// live tables are renamed GenerationName(table, gen+"_old").
	SwitchGeneration(ctx context.Context, live, build string, tables []string, gen string, swap func(context.Context) error) (bool, error)
	// DropGeneration drops gen's tables and the state kept under build.
	DropGeneration(ctx context.Context, build string, tables []string, gen string) error
}

// RebuildReport is what a rebuild did.
type RebuildReport struct {
	Generation string
	// Built is the pass that built the generation from the log.
	Built ReconcileReport
	// CatchUp is how long the generation took to reach the live
	// projector's checkpoints after it was built.
	CatchUp time.Duration
}

// Rebuild rebuilds the projection of cfg.Projector (a Generational over a
// GenerationStore) while the live projector keeps serving and writing:
//
//  1. record the live checkpoints;
//  2. build a new generation of the tables from the log (every stream of
//     every document, verified like any batch);
//  3. catch it up from the write-ready topic from the recorded offsets,
//     with a runner of its own (group cfg.Group + "_" + generation);
//  4. once its checkpoints have reached the live ones, swap its tables and
//     stream heads in atomically: readers query the same table names
//     before and after and never see a half-built generation;
//  5. drop the old generation.
//
// The live runner goes on over the new tables: its checkpoints are kept,
// and whatever it receives that the new generation already holds is
// skipped by the per-stream guard. The admin CLI calls it; ctx bounds it.
//
// A projector whose tables live elsewhere (GenerationTables) creates,
// swaps and drops them itself; its swap runs inside the store's switch,
// after the live checkpoints and streams are held, so no live batch is
// between its insert and its commit when the tables change names. If the
// switch fails to commit after the swap, the live heads stay older than
// the new tables, and what the live runner then re-applies is what those
// tables already hold: such a projector must take re-applied operations
// without harm, as one whose inserts precede its commit must anyway.
func Rebuild(ctx context.Context, cfg Config) (RebuildReport, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return RebuildReport{}, err
	}
	p, ok := cfg.Projector.(Generational)
	if !ok {
		return RebuildReport{}, fmt.Errorf("rebuild: projector %s cannot be rebuilt in generations", cfg.Projector.Name())
	}
	store, ok := cfg.Store.(GenerationStore)
	if !ok {
		return RebuildReport{}, fmt.Errorf("rebuild: store %T cannot hold generations", cfg.Store)
	}
	live := p.Name()
	gen := "g" + strconv.FormatInt(time.Now().UnixNano(), 36)
	rep := RebuildReport{Generation: gen}
	build := p.WithGeneration(gen)
	tables := p.Tables()
	logger := cfg.Logger.With(zap.String("projector", live), zap.String("generation", gen))
	// A projector holding its own tables hands the store none, and swaps
	// them inside the store's switch.
	own, external := p.(GenerationTables)
	var swap func(context.Context) error
	if external {
		tables = nil
		swap = func(ctx context.Context) error { return own.SwapGeneration(ctx, gen) }
	}
	drop := func(ctx context.Context, gen string) error {
		if external {
			if err := own.DropGeneration(ctx, gen); err != nil {
				return err
			}
		}
		return store.DropGeneration(ctx, build.Name(), tables, gen)
	}

	seed, err := store.Checkpoints(ctx, live)
	if err != nil {
		return rep, fmt.Errorf("rebuild %s: record the live offsets: %w", live, err)
	}
	switched := false
	defer func() {
		if switched {
			return
		}
		// A fresh context: the half-built generation goes even when ctx
		// ended. A swap done by a switch that then failed to commit left
		// the live tables under the old generation's name: they go too,
		// since the new ones hold everything they did.
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, g := range []string{gen, gen + "_old"} {
			if err := drop(dctx, g); err != nil {
				logger.Error("drop an abandoned generation", zap.String("tables", g), zap.Error(err))
			}
		}
	}()
	if external {
		if err := own.CreateGeneration(ctx, gen); err != nil {
			return rep, fmt.Errorf("rebuild %s: %w", live, err)
		}
	}
	if err := store.PrepareGeneration(ctx, build.Name(), tables, gen, seed); err != nil {
		return rep, fmt.Errorf("rebuild %s: %w", live, err)
	}

	bcfg := cfg
	bcfg.Projector = build
	bcfg.Group = cfg.Group + "_" + gen
	bcfg.ReconcileInterval = -1
	r, err := New(bcfg)
	if err != nil {
		return rep, fmt.Errorf("rebuild %s: %w", live, err)
	}
	// Stopped without a bound, as the switch waits for nothing of the
	// runner's once it is done, and the runner bounds its own stop.
	defer func() { _ = r.Stop(context.Background()) }()
	logger.Info("rebuild: building from the log", zap.Int("partitions", len(seed)))
	if rep.Built, err = r.Reconcile(ctx); err != nil {
		return rep, fmt.Errorf("rebuild %s: build from the log: %w", live, err)
	}
	if err := r.Start(ctx); err != nil {
		return rep, fmt.Errorf("rebuild %s: %w", live, err)
	}

	start := time.Now()
	err = Wait(ctx, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		ok, err := store.SwitchGeneration(ctx, live, build.Name(), tables, gen, swap)
		if err != nil && !errors.Is(err, context.Canceled) {
			// A switch that failed rolled back; it is tried again.
			logger.Warn("rebuild: switch generations", zap.Error(err))
			return false, nil
		}
		return ok, err
	})
	if err != nil {
		return rep, fmt.Errorf("rebuild %s: catch up and switch: %w", live, err)
	}
	switched = true
	rep.CatchUp = time.Since(start)
	_ = r.Stop(context.Background())
	// The switch is done whatever happens to ctx now: the old tables go
	// even when it ends meanwhile.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := drop(dctx, gen+"_old"); err != nil {
		return rep, fmt.Errorf("rebuild %s: drop the old generation: %w", live, err)
	}
	logger.Info("rebuild: switched", zap.Duration("catch_up", rep.CatchUp), zap.Int("healed", rep.Built.Healed))
	return rep, nil
}
