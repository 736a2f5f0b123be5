package pgproj

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/doclog/doclog/projectors"
)

var _ projectors.GenerationStore = (*Store)(nil)

var errBehind = errors.New("the new generation is behind the live one")

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// clearState removes everything the runner keeps under a projector name.
func clearState(ctx context.Context, tx pgx.Tx, projector string) error {
	for _, table := range []string{"projector_streams", "quarantined_streams", "projector_checkpoints"} {
		if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE projector = $1`, projector); err != nil {
			return fmt.Errorf("clear %s of %s: %w", table, projector, err)
		}
	}
	return nil
}

// PrepareGeneration implements projectors.GenerationStore.
func (s *Store) PrepareGeneration(ctx context.Context, build string, tables []string, gen string, seed []projectors.Checkpoint) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, t := range tables {
			copyName := projectors.GenerationName(t, gen)
			if _, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+ident(copyName)); err != nil {
				return fmt.Errorf("drop leftover table %s: %w", copyName, err)
			}
			if _, err := tx.Exec(ctx, `CREATE TABLE `+ident(copyName)+` (LIKE `+ident(t)+` INCLUDING ALL)`); err != nil {
				return fmt.Errorf("create table %s: %w", copyName, err)
			}
		}
		if err := clearState(ctx, tx, build); err != nil {
			return err
		}
		for _, c := range seed {
			if c.NextOffset < 0 {
				continue
			}
			if _, err := tx.Exec(ctx, `INSERT INTO projector_checkpoints (projector, partition, next_offset, epoch) VALUES ($1, $2, $3, 0)`,
				build, c.Partition, c.NextOffset); err != nil {
				return fmt.Errorf("seed the checkpoint of partition %d: %w", c.Partition, err)
			}
		}
		return nil
	})
}

// SwitchGeneration implements projectors.GenerationStore.
func (s *Store) SwitchGeneration(ctx context.Context, live, build string, tables []string, gen string, swap func(context.Context) error) (bool, error) {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Hold every live checkpoint: no live batch commits until the swap
		// is done, and the comparison below stays true.
		rows, err := tx.Query(ctx, `SELECT partition, next_offset FROM projector_checkpoints WHERE projector = $1 ORDER BY partition FOR UPDATE`, live)
		if err != nil {
			return fmt.Errorf("lock the live checkpoints: %w", err)
		}
		liveAt, err := offsets(rows)
		if err != nil {
			return fmt.Errorf("read the live checkpoints: %w", err)
		}
		// Wait out and hold off the unfenced transactions over live's
		// streams (the reconciler's, a lift's), which take this lock
		// shared before their stream locks: none of them is then between
		// its writes and its commit.
		if _, err := tx.Exec(ctx, projectorLockSQL, live); err != nil {
			return fmt.Errorf("hold off the live projector's other writers: %w", err)
		}
		// Fence the new generation's runner: it must not write once its
		// tables carry the live names.
		rows, err = tx.Query(ctx, `UPDATE projector_checkpoints SET epoch = epoch + 1 WHERE projector = $1 RETURNING partition, next_offset`, build)
		if err != nil {
			return fmt.Errorf("fence the new generation: %w", err)
		}
		buildAt, err := offsets(rows)
		if err != nil {
			return fmt.Errorf("read the new generation's checkpoints: %w", err)
		}
		for p, o := range liveAt {
			if b, ok := buildAt[p]; o >= 0 && (!ok || b < o) {
				return errBehind
			}
		}
		for _, t := range tables {
			if _, err := tx.Exec(ctx, `ALTER TABLE `+ident(t)+` RENAME TO `+ident(projectors.GenerationName(t, gen+"_old"))); err != nil {
				return fmt.Errorf("retire table %s: %w", t, err)
			}
			if _, err := tx.Exec(ctx, `ALTER TABLE `+ident(projectors.GenerationName(t, gen))+` RENAME TO `+ident(t)); err != nil {
				return fmt.Errorf("switch table %s: %w", t, err)
			}
		}
		for _, table := range []string{"projector_streams", "quarantined_streams"} {
			if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE projector = $1`, live); err != nil {
				return fmt.Errorf("retire the live %s: %w", table, err)
			}
			if _, err := tx.Exec(ctx, `UPDATE `+table+` SET projector = $1 WHERE projector = $2`, live, build); err != nil {
				return fmt.Errorf("switch %s: %w", table, err)
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM projector_checkpoints WHERE projector = $1`, build); err != nil {
			return fmt.Errorf("drop the new generation's checkpoints: %w", err)
		}
		if swap != nil {
			if err := swap(ctx); err != nil {
				return fmt.Errorf("swap the tables: %w", err)
			}
		}
		return nil
	})
	if errors.Is(err, errBehind) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("switch %s to generation %s: %w", live, gen, err)
	}
	return true, nil
}

// offsets collects (partition, next_offset) rows.
func offsets(rows pgx.Rows) (map[int32]int64, error) {
	defer rows.Close()
	out := map[int32]int64{}
	for rows.Next() {
		var p int32
		var o int64
		if err := rows.Scan(&p, &o); err != nil {
			return nil, err
		}
		out[p] = o
	}
	return out, rows.Err()
}

// DropGeneration implements projectors.GenerationStore.
func (s *Store) DropGeneration(ctx context.Context, build string, tables []string, gen string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, t := range tables {
			if _, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+ident(projectors.GenerationName(t, gen))); err != nil {
				return fmt.Errorf("drop table %s: %w", projectors.GenerationName(t, gen), err)
			}
		}
		return clearState(ctx, tx, build)
	})
	if err != nil {
		return fmt.Errorf("drop generation %s: %w", gen, err)
	}
	return nil
}
