package admin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/projectors/analytics"
	"github.com/doclog/doclog/projectors/docview"
	"github.com/doclog/doclog/projectors/indexer"
)

// compareIndexer compares the indexer's row of a document and its outgoing
// relationships with the replayed document scope.
func compareIndexer(ctx context.Context, x *indexer.Index, doc *model.StreamState) ([]Finding, error) {
	k := doc.Stream
	var out []Finding
	add := func(idx int64, format string, args ...any) {
		out = append(out, Finding{Kind: FindingIndexer, DocumentID: k.DocumentID, Stream: &k, Index: idx, Projector: indexer.Name, Message: fmt.Sprintf(format, args...)})
	}
	head := doc.Revision - 1
	row, ok, err := x.Get(ctx, k.DocumentID, k.Branch)
	if err != nil {
		return nil, fmt.Errorf("verifying the indexer's row of %s: %w", k.DocumentID, err)
	}
	if !ok {
		add(head, "the indexer holds no row of the document")
		return out, nil
	}
	if row.LastIndex != head {
		add(row.LastIndex, "the row is at index %d, the log's head at %d", row.LastIndex, head)
		return out, nil // the rest follows from the index
	}
	info, _ := model.DocumentInfoOf(doc)
	if info.DocumentType == "" {
		info.DocumentType = doc.DocumentType
	}
	if row.DocumentType != info.DocumentType {
		add(head, "document type %s differs from the log's %s", row.DocumentType, info.DocumentType)
	}
	if row.IsDeleted != info.IsDeleted || row.DeletedAtUtcMs != info.DeletedAtUtcMs {
		add(head, "deleted %v at %d differs from the log's %v at %d", row.IsDeleted, row.DeletedAtUtcMs, info.IsDeleted, info.DeletedAtUtcMs)
	}
	if row.CreatedAtUtcMs != info.CreatedAtUtcMs {
		add(head, "created at %d differs from the log's %d", row.CreatedAtUtcMs, info.CreatedAtUtcMs)
	}
	var got []string
	for cursor := ""; ; {
		page, err := x.Outgoing(ctx, k.DocumentID, k.Branch, "", cursor, 500)
		if err != nil {
			return nil, fmt.Errorf("verifying the indexer's relationships of %s: %w", k.DocumentID, err)
		}
		for _, r := range page.Relationships {
			got = append(got, r.Type+" → "+r.TargetID)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	want := make([]string, 0, len(info.Relationships))
	for _, r := range info.Relationships {
		want = append(want, r.Type+" → "+r.TargetID)
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		add(head, "relationships %v differ from the log's %v", got, want)
	}
	return out, nil
}

// compareAnalytics compares ClickHouse's deduplicated operation count and
// documents row of each document the walk verified with the log's figures.
// Counts are read once per branch for the whole table (FINAL), so the cost
// is two queries per branch whatever the number of documents.
func compareAnalytics(ctx context.Context, a *analytics.Projector, want map[docBranch]figures, inRange func(string) bool) ([]Finding, error) {
	branches := map[string]bool{}
	for k := range want {
		branches[k.branch] = true
	}
	var out []Finding
	add := func(id, branch, format string, args ...any) {
		out = append(out, Finding{Kind: FindingAnalytics, DocumentID: id, Index: -1, Projector: a.Name(),
			Message: fmt.Sprintf("on %s: ", branch) + fmt.Sprintf(format, args...)})
	}
	for _, branch := range slices.Sorted(maps.Keys(branches)) {
		ops, err := a.OperationCounts(ctx, branch)
		if err != nil {
			return nil, fmt.Errorf("verifying the analytics tables: %w", err)
		}
		docs, err := a.DocumentSummaries(ctx, branch)
		if err != nil {
			return nil, fmt.Errorf("verifying the analytics tables: %w", err)
		}
		ids := map[string]bool{}
		for id := range ops {
			ids[id] = true
		}
		for id := range docs {
			ids[id] = true
		}
		for k := range want {
			if k.branch == branch {
				ids[k.id] = true
			}
		}
		for _, id := range slices.Sorted(maps.Keys(ids)) {
			if !inRange(id) {
				continue
			}
			f, inLog := want[docBranch{id, branch}]
			if n := ops[id]; uint64(f.operations) != n {
				add(id, branch, "%s holds %d operation(s) of the document, the log %d", analytics.TableOperations, n, f.operations)
			}
			d, ok := docs[id]
			switch {
			case !ok && inLog:
				add(id, branch, "%s holds no row of the document", analytics.TableDocuments)
			case !ok:
			case d.OperationCount != uint64(f.operations):
				add(id, branch, "%s counts %d operation(s) of the document, the log %d", analytics.TableDocuments, d.OperationCount, f.operations)
			case d.IsDeleted != f.deleted:
				add(id, branch, "%s has deleted %v, the log %v", analytics.TableDocuments, d.IsDeleted, f.deleted)
			}
		}
	}
	return out, nil
}

// listQuarantines lists every stream a compared projector holds in
// quarantine: each is a stream the projection stopped following.
func (v *verifier) listQuarantines(ctx context.Context) ([]Finding, error) {
	var names []string
	if v.cfg.Docview {
		names = append(names, docview.Name)
	}
	if v.cfg.Indexer {
		names = append(names, indexer.Name)
	}
	if v.cfg.Analytics != nil {
		names = append(names, v.cfg.Analytics.Name())
	}
	var out []Finding
	for _, name := range names {
		qs, err := v.projStore.Quarantines(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("reading quarantines of %s: %w", name, err)
		}
		for _, q := range qs {
			k := q.Stream
			out = append(out, Finding{Kind: FindingQuarantine, DocumentID: k.DocumentID, Stream: &k, Index: q.Index, Projector: name,
				Message: q.ErrorName + ": " + q.Reason})
		}
	}
	return out, nil
}
