package analytics

import (
	"context"
	"fmt"
)

// The read functions over the tables, for verifying them against the log.
// Both deduplicate with FINAL: copies of a row left by a re-delivered batch
// wait for a merge, and counting them would report the projection ahead of
// the log.

// OperationCounts returns the number of operations per document on branch,
// deduplicated with FINAL: what the log holds once the projector caught up.
func (p *Projector) OperationCounts(ctx context.Context, branch string) (map[string]uint64, error) {
	rows, err := p.conn.Query(ctx, "SELECT document_id, count() FROM "+p.table(TableOperations)+
		" FINAL WHERE branch = ? GROUP BY document_id", branch)
	if err != nil {
		return nil, fmt.Errorf("count clickhouse operations per document: %w", err)
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var id string
		var n uint64
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("count clickhouse operations per document: %w", err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count clickhouse operations per document: %w", err)
	}
	return out, nil
}

// DocumentSummary is a document's row of the documents table.
type DocumentSummary struct {
	DocumentType   string
	OperationCount uint64
	IsDeleted      bool
}

// DocumentSummaries returns the documents table's row of every document on
// branch, deduplicated with FINAL.
func (p *Projector) DocumentSummaries(ctx context.Context, branch string) (map[string]DocumentSummary, error) {
	rows, err := p.conn.Query(ctx, "SELECT document_id, document_type, operation_count, is_deleted FROM "+p.table(TableDocuments)+
		" FINAL WHERE branch = ?", branch)
	if err != nil {
		return nil, fmt.Errorf("read clickhouse documents: %w", err)
	}
	defer rows.Close()
	out := map[string]DocumentSummary{}
	for rows.Next() {
		var id string
		var d DocumentSummary
		var deleted uint8
		if err := rows.Scan(&id, &d.DocumentType, &d.OperationCount, &deleted); err != nil {
			return nil, fmt.Errorf("read clickhouse documents: %w", err)
		}
		d.IsDeleted = deleted != 0
		out[id] = d
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read clickhouse documents: %w", err)
	}
	return out, nil
}
