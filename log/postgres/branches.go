package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	oplog "github.com/doclog/doclog/log"
)

// The branch registry (table branches, migration 003). Entries are written
// only by putBranchSQL inside the append of the job that changes them, so a
// fork's lineage, a promote's new sync points and a deletion commit with the
// job's operations and result.

var _ oplog.BranchRegistry = (*Store)(nil)

const branchColumns = `document_id, branch, base, fork_point, base_point, own_point, deleted, job_id, updated_at`

const putBranchSQL = `INSERT INTO branches (` + branchColumns + `)
VALUES ($1, $2, $3, $4::json, $5::json, $6::json, $7, $8, now())
ON CONFLICT (document_id, branch) DO UPDATE
SET base = excluded.base, fork_point = excluded.fork_point, base_point = excluded.base_point,
    own_point = excluded.own_point, deleted = excluded.deleted, job_id = excluded.job_id, updated_at = now()`

// checkBranchRef refuses a registry entry that does not belong to its
// request's document.
func checkBranchRef(req *oplog.AppendRequest) error {
	b := req.Branch
	switch {
	case b == nil:
		return nil
	case b.DocumentID != req.DocumentID:
		return &oplog.InvalidRequest{DocumentID: req.DocumentID, Reason: fmt.Sprintf("branch entry names document %q", b.DocumentID)}
	case b.Branch == "":
		return &oplog.InvalidRequest{DocumentID: req.DocumentID, Reason: "branch entry has an empty branch"}
	case b.Branch == b.Base:
		return &oplog.InvalidRequest{DocumentID: req.DocumentID, Reason: fmt.Sprintf("branch %q cannot be its own base", b.Branch)}
	}
	return nil
}

// hasBranchRefs reports whether a batch writes the registry, which only the
// one-by-one path does (after the request's own guards let it land).
func hasBranchRefs(plans []*plan) bool {
	return slices.ContainsFunc(plans, func(p *plan) bool { return p.req.Branch != nil })
}

// putBranch writes a landed request's registry entry.
func putBranch(ctx context.Context, tx pgx.Tx, b *oplog.BranchRef) error {
	points := make([][]byte, 3)
	for i, m := range []map[string]int64{b.ForkPoint, b.BasePoint, b.OwnPoint} {
		if m == nil {
			m = map[string]int64{}
		}
		var err error
		if points[i], err = json.Marshal(m); err != nil {
			return fmt.Errorf("encoding the points of branch %s of %s: %w", b.Branch, b.DocumentID, err)
		}
	}
	if _, err := tx.Exec(ctx, putBranchSQL, b.DocumentID, b.Branch, b.Base, string(points[0]), string(points[1]),
		string(points[2]), b.Deleted, b.JobID); err != nil {
		return fmt.Errorf("writing branch %s of %s to the registry: %w", b.Branch, b.DocumentID, err)
	}
	return nil
}

func scanBranch(row pgx.Row) (oplog.BranchRef, error) {
	var (
		b          oplog.BranchRef
		fp, bp, op []byte
	)
	if err := row.Scan(&b.DocumentID, &b.Branch, &b.Base, &fp, &bp, &op, &b.Deleted, &b.JobID, &b.UpdatedAt); err != nil {
		return b, err
	}
	for _, p := range []struct {
		raw []byte
		dst *map[string]int64
	}{{fp, &b.ForkPoint}, {bp, &b.BasePoint}, {op, &b.OwnPoint}} {
		if err := json.Unmarshal(p.raw, p.dst); err != nil {
			return b, fmt.Errorf("decoding the points of branch %s: %w", b.Branch, err)
		}
		if len(*p.dst) == 0 {
			*p.dst = nil
		}
	}
	return b, nil
}

// Branch implements log.BranchRegistry.
func (s *Store) Branch(ctx context.Context, documentID, branch string) (_ oplog.BranchRef, _ bool, err error) {
	defer markUnavailable(&err)
	b, err := scanBranch(s.pool.QueryRow(ctx, `SELECT `+branchColumns+` FROM branches WHERE document_id = $1 AND branch = $2`, documentID, branch))
	if errors.Is(err, pgx.ErrNoRows) {
		return oplog.BranchRef{}, false, nil
	}
	if err != nil {
		return oplog.BranchRef{}, false, fmt.Errorf("reading branch %s of %s: %w", branch, documentID, err)
	}
	return b, true, nil
}

// Branches implements log.BranchRegistry: the registry's entries of the
// document joined with the heads of its streams.
func (s *Store) Branches(ctx context.Context, documentID string) (_ []oplog.BranchInfo, err error) {
	defer markUnavailable(&err)
	heads, err := s.Heads(ctx, []string{documentID})
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+branchColumns+` FROM branches WHERE document_id = $1`, documentID)
	if err != nil {
		return nil, fmt.Errorf("listing the branches of %s: %w", documentID, err)
	}
	byName := map[string]*oplog.BranchInfo{}
	for rows.Next() {
		b, err := scanBranch(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("listing the branches of %s: %w", documentID, err)
		}
		byName[b.Branch] = &oplog.BranchInfo{BranchRef: b, Tips: map[string]int64{}}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the branches of %s: %w", documentID, err)
	}
	for k, rev := range heads {
		bi := byName[k.Branch]
		if bi == nil {
			bi = &oplog.BranchInfo{BranchRef: oplog.BranchRef{DocumentID: documentID, Branch: k.Branch}, Tips: map[string]int64{}}
			byName[k.Branch] = bi
		}
		bi.Tips[k.Scope] = rev
	}
	out := make([]oplog.BranchInfo, 0, len(byName))
	for _, bi := range byName {
		out = append(out, *bi)
	}
	slices.SortFunc(out, func(a, b oplog.BranchInfo) int { return compareCodePoints(a.Branch, b.Branch) })
	return out, nil
}

// compareCodePoints orders strings by code point, which for valid UTF-8 is
// byte order, as COLLATE "C" does.
func compareCodePoints(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
