package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	oplog "github.com/doclog/doclog/log"
)

// PutKeyframe implements log.Store.
func (s *Store) PutKeyframe(ctx context.Context, kf oplog.Keyframe) (err error) {
	defer markUnavailable(&err)
	_, err = s.pool.Exec(ctx, `INSERT INTO keyframes (document_id, scope, branch, idx, document_type, model_version, state, hash)
VALUES ($1, $2, $3, $4, $5, $6, $7::text::json, $8)
ON CONFLICT (document_id, scope, branch, idx) DO UPDATE
SET document_type = excluded.document_type, model_version = excluded.model_version,
    state = excluded.state, hash = excluded.hash, created_at = now()`,
		kf.Stream.DocumentID, kf.Stream.Scope, kf.Stream.Branch, kf.Index, kf.DocumentType, kf.Version, string(kf.State), kf.Hash)
	if err != nil {
		return fmt.Errorf("storing keyframe of %s at index %d: %w", kf.Stream, kf.Index, err)
	}
	return nil
}

const keyframeColumns = `document_id, scope, branch, idx, document_type, model_version, state, hash, created_at`

func scanKeyframe(row pgx.Row) (oplog.Keyframe, error) {
	var kf oplog.Keyframe
	var state []byte
	err := row.Scan(&kf.Stream.DocumentID, &kf.Stream.Scope, &kf.Stream.Branch, &kf.Index, &kf.DocumentType,
		&kf.Version, &state, &kf.Hash, &kf.CreatedAt)
	kf.State = state
	return kf, err
}

// NearestKeyframe implements log.Store.
func (s *Store) NearestKeyframe(ctx context.Context, stream oplog.StreamKey, atOrBelow int64) (_ oplog.Keyframe, _ bool, err error) {
	defer markUnavailable(&err)
	kf, err := scanKeyframe(s.pool.QueryRow(ctx, `SELECT `+keyframeColumns+` FROM keyframes
WHERE document_id = $1 AND scope = $2 AND branch = $3 AND idx <= $4
ORDER BY idx DESC LIMIT 1`, stream.DocumentID, stream.Scope, stream.Branch, atOrBelow))
	if errors.Is(err, pgx.ErrNoRows) {
		return oplog.Keyframe{}, false, nil
	}
	if err != nil {
		return oplog.Keyframe{}, false, fmt.Errorf("reading keyframe of %s at or below %d: %w", stream, atOrBelow, err)
	}
	return kf, true, nil
}

// ListKeyframes implements log.Store.
func (s *Store) ListKeyframes(ctx context.Context, stream oplog.StreamKey) (_ []oplog.Keyframe, err error) {
	defer markUnavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT `+keyframeColumns+` FROM keyframes
WHERE document_id = $1 AND scope = $2 AND branch = $3 ORDER BY idx`, stream.DocumentID, stream.Scope, stream.Branch)
	if err != nil {
		return nil, fmt.Errorf("listing keyframes of %s: %w", stream, err)
	}
	defer rows.Close()
	var out []oplog.Keyframe
	for rows.Next() {
		kf, err := scanKeyframe(rows)
		if err != nil {
			return nil, fmt.Errorf("listing keyframes of %s: %w", stream, err)
		}
		out = append(out, kf)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing keyframes of %s: %w", stream, err)
	}
	return out, nil
}

// DeleteKeyframes implements log.Store.
func (s *Store) DeleteKeyframes(ctx context.Context, stream oplog.StreamKey) (_ int64, err error) {
	defer markUnavailable(&err)
	tag, err := s.pool.Exec(ctx, `DELETE FROM keyframes WHERE document_id = $1 AND scope = $2 AND branch = $3`,
		stream.DocumentID, stream.Scope, stream.Branch)
	if err != nil {
		return 0, fmt.Errorf("deleting keyframes of %s: %w", stream, err)
	}
	return tag.RowsAffected(), nil
}
