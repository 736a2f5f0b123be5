package reduce

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The failures of branch jobs (fork, promote, delete-branch). Each fails its
// job with nothing written but the FAILED result.
const (
	NameBranchConflict = "BranchConflict"
	NameBranchExists   = "BranchExists"
	NameBranchNotFound = "BranchNotFound"
	// NameInvalidForkPoint: a fork point past the source's tip, or one
	// that leaves out the document's creation.
	NameInvalidForkPoint = "InvalidForkPoint"
	// NameInvalidPromote: a promote that has no meaning (see
	// InvalidPromoteError).
	NameInvalidPromote = "InvalidPromote"
	// NameBranchesUnsupported: the log backend keeps no branch registry.
	NameBranchesUnsupported = "BranchesUnsupported"
)

// BranchConflictError fails a promote whose target is not at the tip the
// job expected: another write moved it. Nothing is overwritten; re-read the
// target's tip and decide.
type BranchConflictError struct {
	DocumentID, Branch string
	Expected, Actual   map[string]int64
}

func (e *BranchConflictError) Name() string { return NameBranchConflict }
func (e *BranchConflictError) Error() string {
	return fmt.Sprintf("branch %s of document %s is at %s, not at the expected %s", e.Branch, e.DocumentID, Points(e.Actual), Points(e.Expected))
}

// BranchExistsError fails a fork onto a name the document's branches have
// had: a live branch, or a deleted one whose operations stay in the log.
type BranchExistsError struct {
	DocumentID, Branch string
	Deleted            bool
}

func (e *BranchExistsError) Name() string { return NameBranchExists }
func (e *BranchExistsError) Error() string {
	if e.Deleted {
		return fmt.Sprintf("branch %s of document %s was deleted, and its name is not reused", e.Branch, e.DocumentID)
	}
	return fmt.Sprintf("branch %s of document %s already exists", e.Branch, e.DocumentID)
}

// BranchNotFoundError fails a branch job naming a branch without
// operations, or a deleted one.
type BranchNotFoundError struct {
	DocumentID, Branch string
	Deleted            bool
}

func (e *BranchNotFoundError) Name() string { return NameBranchNotFound }
func (e *BranchNotFoundError) Error() string {
	if e.Deleted {
		return fmt.Sprintf("branch %s of document %s is deleted", e.Branch, e.DocumentID)
	}
	return fmt.Sprintf("document %s has no branch %s", e.DocumentID, e.Branch)
}

// InvalidForkPointError fails a fork at a point the source does not have.
type InvalidForkPointError struct {
	DocumentID, Branch, Scope string
	At, Tip                   int64
	Reason                    string
}

func (e *InvalidForkPointError) Name() string { return NameInvalidForkPoint }
func (e *InvalidForkPointError) Error() string {
	return fmt.Sprintf("fork of %s/%s at %q %d (tip %d): %s", e.DocumentID, e.Branch, e.Scope, e.At, e.Tip, e.Reason)
}

// InvalidPromoteError fails a promote that has no meaning: a branch
// promoted onto itself. Every promote between two live branches of a
// document otherwise applies or is a BranchConflictError.
type InvalidPromoteError struct {
	DocumentID, Branch, Onto, Scope string
	Reason                          string
}

func (e *InvalidPromoteError) Name() string { return NameInvalidPromote }
func (e *InvalidPromoteError) Error() string {
	if e.Scope == "" {
		return fmt.Sprintf("promote of %s/%s onto %s: %s", e.DocumentID, e.Branch, e.Onto, e.Reason)
	}
	return fmt.Sprintf("promote of %s/%s onto %s, scope %q: %s", e.DocumentID, e.Branch, e.Onto, e.Scope, e.Reason)
}

// BranchesUnsupportedError fails a branch job on a log without a registry.
type BranchesUnsupportedError struct{}

func (e *BranchesUnsupportedError) Name() string { return NameBranchesUnsupported }
func (e *BranchesUnsupportedError) Error() string {
	return "the operation log keeps no branch registry"
}

// Points renders a scope → revision map in scope order.
func Points(m map[string]int64) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: %d", s, m[s])
	}
	b.WriteByte('}')
	return b.String()
}
