package analytics

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/doclog/doclog/projectors"
)

// The generations of the tables, for projectors.Rebuild: a new generation
// is written to copies named table_gen in the same database, then renamed
// in. ClickHouse has no transactions and 18.16 no EXCHANGE TABLES, so the
// swap is one RENAME TABLE statement renaming all four tables, which the
// server does under one lock: a query names either the old tables or the
// new ones.

// table is the qualified name of table in this projector's generation.
func (p *Projector) table(name string) string {
	return p.cfg.Database + "." + projectors.GenerationName(name, p.gen)
}

// Tables implements projectors.Generational.
func (p *Projector) Tables() []string { return []string{TableOperations, TableDocuments} }

// WithGeneration implements projectors.Generational. The projector returned
// shares this one's connections: close only this one.
func (p *Projector) WithGeneration(gen string) projectors.Projector {
	q := *p
	q.gen = gen
	q.cfg.Name = projectors.GenerationName(p.cfg.Name, gen)
	q.logger = p.logger.With(zap.String("generation", gen))
	return &q
}

// CreateGeneration implements projectors.GenerationTables: each copy has
// the live table's columns, engine and key (CREATE TABLE ... AS).
func (p *Projector) CreateGeneration(ctx context.Context, gen string) error {
	for _, t := range p.Tables() {
		name := p.cfg.Database + "." + projectors.GenerationName(t, gen)
		if err := p.conn.Exec(ctx, "DROP TABLE IF EXISTS "+name); err != nil {
			return &SchemaError{Object: "leftover table " + name, Err: err}
		}
		if err := p.conn.Exec(ctx, "CREATE TABLE "+name+" AS "+p.cfg.Database+"."+t); err != nil {
			return &SchemaError{Object: "table " + name, Err: err}
		}
	}
	return nil
}

// SwapGeneration implements projectors.GenerationTables. A swap already
// done (gen's tables gone, the retired ones present) is no error, so a
// switch that failed to commit after it can be tried again.
func (p *Projector) SwapGeneration(ctx context.Context, gen string) error {
	exists, err := p.existing(ctx)
	if err != nil {
		return err
	}
	var renames []string
	for _, t := range p.Tables() {
		next, retired := projectors.GenerationName(t, gen), projectors.GenerationName(t, gen+"_old")
		switch {
		case exists[next]:
			renames = append(renames, p.cfg.Database+"."+t+" TO "+p.cfg.Database+"."+retired,
				p.cfg.Database+"."+next+" TO "+p.cfg.Database+"."+t)
		case !exists[retired]:
			return fmt.Errorf("swap in generation %s: table %s.%s is missing", gen, p.cfg.Database, next)
		}
	}
	if len(renames) == 0 {
		return nil
	}
	if err := p.conn.Exec(ctx, "RENAME TABLE "+strings.Join(renames, ", ")); err != nil {
		return fmt.Errorf("swap in generation %s of %s: %w", gen, p.cfg.Database, err)
	}
	return nil
}

// DropGeneration implements projectors.GenerationTables.
func (p *Projector) DropGeneration(ctx context.Context, gen string) error {
	for _, t := range p.Tables() {
		name := p.cfg.Database + "." + projectors.GenerationName(t, gen)
		if err := p.conn.Exec(ctx, "DROP TABLE IF EXISTS "+name); err != nil {
			return fmt.Errorf("drop table %s: %w", name, err)
		}
	}
	return nil
}

// existing returns the names of the tables in the projector's database.
func (p *Projector) existing(ctx context.Context) (map[string]bool, error) {
	rows, err := p.conn.Query(ctx, "SELECT name FROM system.tables WHERE database = ?", p.cfg.Database)
	if err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", p.cfg.Database, err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("list the tables of %s: %w", p.cfg.Database, err)
		}
		out[name] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", p.cfg.Database, err)
	}
	return out, nil
}
