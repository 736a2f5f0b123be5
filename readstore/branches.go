package readstore

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	oplog "github.com/doclog/doclog/log"
)

// Branches: GET /v1/documents/{id}/branches lists a document's live
// branches with their tips and lineage, from the log's branch registry; a
// read naming a deleted branch answers 404 branch_not_found. The registry
// is read through the log (Deps.Log), when its backend keeps one.

// BranchRegistry is what the read store reads of the log's branch
// registry; *postgres.Store satisfies it.
type BranchRegistry interface {
	Branch(ctx context.Context, documentID, branch string) (oplog.BranchRef, bool, error)
	Branches(ctx context.Context, documentID string) ([]oplog.BranchInfo, error)
}

// CodeBranchNotFound answers a read of a deleted branch.
const CodeBranchNotFound = "branch_not_found"

// branchesBody is the answer of GET /v1/documents/{id}/branches.
type branchesBody struct {
	DocumentID string       `json:"documentId"`
	Branches   []branchBody `json:"branches"`
}

type branchBody struct {
	Branch string `json:"branch"`
	// Tips is the revision of each non-empty scope: what a promote onto
	// the branch names as its expectedTip.
	Tips map[string]int64 `json:"tips"`
	// Base and ForkPoint are the lineage of a forked branch.
	Base      string           `json:"base,omitempty"`
	ForkPoint map[string]int64 `json:"forkPoint,omitempty"`
	UpdatedAt *time.Time       `json:"updatedAt,omitempty"`
}

func (h *Handler) branchRegistry() (BranchRegistry, bool) {
	reg, ok := h.log.(BranchRegistry)
	return reg, ok
}

func (h *Handler) branches(w http.ResponseWriter, r *http.Request) *APIError {
	q, apiErr := parseQuery(r)
	if apiErr != nil {
		return apiErr
	}
	if q.v.Has("branch") {
		return paramError("branch", "unknown query parameter here: this route lists every branch")
	}
	if apiErr := h.consistency(r, q, SourceLog); apiErr != nil {
		return apiErr
	}
	docID := r.PathValue("id")
	body := branchesBody{DocumentID: docID, Branches: []branchBody{}}
	if reg, ok := h.branchRegistry(); ok {
		list, err := reg.Branches(r.Context(), docID)
		if err != nil {
			return internal("list the branches of "+docID, err)
		}
		for _, b := range list {
			if b.Deleted || len(b.Tips) == 0 {
				continue
			}
			bb := branchBody{Branch: b.Branch, Tips: b.Tips, Base: b.Base, ForkPoint: b.ForkPoint}
			if !b.UpdatedAt.IsZero() {
				at := b.UpdatedAt.UTC()
				bb.UpdatedAt = &at
			}
			body.Branches = append(body.Branches, bb)
		}
	} else {
		// A log without a registry: every branch with operations, no
		// lineage.
		heads, err := h.log.Heads(r.Context(), []string{docID})
		if err != nil {
			return internal("list the branches of "+docID, err)
		}
		byName := map[string]map[string]int64{}
		for k, rev := range heads {
			if byName[k.Branch] == nil {
				byName[k.Branch] = map[string]int64{}
			}
			byName[k.Branch][k.Scope] = rev
		}
		for name, tips := range byName {
			body.Branches = append(body.Branches, branchBody{Branch: name, Tips: tips})
		}
		slices.SortFunc(body.Branches, func(a, b branchBody) int { return strings.Compare(a.Branch, b.Branch) })
	}
	if len(body.Branches) == 0 {
		return &APIError{Status: http.StatusNotFound, Code: CodeDocumentNotFound, Field: "id",
			Message: "id: the log holds no document " + quote(docID) + " on any live branch"}
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// branchDeleted answers 404 for a read of a deleted branch of the
// document: its rows stay in the log and the projections, but the branch
// is gone. main is never deleted, so its reads cost no lookup.
func (h *Handler) branchDeleted(ctx context.Context, docID, branch string) *APIError {
	if branch == oplog.DefaultBranch {
		return nil
	}
	reg, ok := h.branchRegistry()
	if !ok {
		return nil
	}
	ref, has, err := reg.Branch(ctx, docID, branch)
	if err != nil {
		return internal("read branch "+branch+" of "+docID, err)
	}
	if has && ref.Deleted {
		return &APIError{Status: http.StatusNotFound, Code: CodeBranchNotFound, Field: "branch",
			Message: "branch: branch " + quote(branch) + " of document " + quote(docID) + " was deleted"}
	}
	return nil
}
