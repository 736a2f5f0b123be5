package postgres

import (
	"context"
	"fmt"
	"time"
)

// ExecutorPause is a pause an operator set on the executor group: Target
// names a partition of the jobs topic or a document type, in the form the
// executor package defines (executor.PartitionTarget, executor.TypeTarget).
type ExecutorPause struct {
	Target   string    `json:"target"`
	Reason   string    `json:"reason,omitempty"`
	PausedAt time.Time `json:"pausedAt"`
}

// ExecutorPauses lists the pauses in force, by target.
func (s *Store) ExecutorPauses(ctx context.Context) (_ []ExecutorPause, err error) {
	defer markUnavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT target, reason, paused_at FROM executor_pauses ORDER BY target`)
	if err != nil {
		return nil, fmt.Errorf("listing executor pauses: %w", err)
	}
	defer rows.Close()
	out := []ExecutorPause{}
	for rows.Next() {
		var p ExecutorPause
		if err := rows.Scan(&p.Target, &p.Reason, &p.PausedAt); err != nil {
			return nil, fmt.Errorf("listing executor pauses: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing executor pauses: %w", err)
	}
	return out, nil
}

// PausedTargets lists the targets paused: what an executor member polls.
func (s *Store) PausedTargets(ctx context.Context) ([]string, error) {
	ps, err := s.ExecutorPauses(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Target
	}
	return out, nil
}

// PauseExecutorIfAbsent pauses a target and reports whether it was not
// paused already (a second pause keeps the first one's reason and time).
func (s *Store) PauseExecutorIfAbsent(ctx context.Context, target, reason string) (_ bool, err error) {
	defer markUnavailable(&err)
	tag, err := s.pool.Exec(ctx, `INSERT INTO executor_pauses (target, reason) VALUES ($1, $2) ON CONFLICT (target) DO NOTHING`, target, reason)
	if err != nil {
		return false, fmt.Errorf("pausing %s: %w", target, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ResumeExecutor lifts a pause and reports whether there was one.
func (s *Store) ResumeExecutor(ctx context.Context, target string) (_ bool, err error) {
	defer markUnavailable(&err)
	tag, err := s.pool.Exec(ctx, `DELETE FROM executor_pauses WHERE target = $1`, target)
	if err != nil {
		return false, fmt.Errorf("resuming %s: %w", target, err)
	}
	return tag.RowsAffected() == 1, nil
}
