package admin

import (
	"context"
	"errors"
	"fmt"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/projectors/docview"
)

// ViewSnapshots is the document view as a SnapshotSource: the snapshots
// ValidateDocument and Verify compare with the replay. It reads each
// document once through docview.View.Get and answers the document's scopes
// from that read, so a document costs one query however many scopes it has.
type ViewSnapshots struct {
	view *docview.View
	key  struct{ id, branch string }
	doc  *docview.Document // nil when the view does not hold key
	read bool
}

// NewViewSnapshots returns the snapshots of view.
func NewViewSnapshots(view *docview.View) *ViewSnapshots {
	return &ViewSnapshots{view: view}
}

// Snapshot implements SnapshotSource.
func (v *ViewSnapshots) Snapshot(ctx context.Context, stream oplog.StreamKey) (Snapshot, bool, error) {
	if !v.read || v.key.id != stream.DocumentID || v.key.branch != stream.Branch {
		if err := v.load(ctx, stream.DocumentID, stream.Branch); err != nil {
			return Snapshot{}, false, err
		}
	}
	if v.doc == nil {
		return Snapshot{}, false, nil
	}
	sc, ok := v.doc.Scopes[stream.Scope]
	if !ok {
		return Snapshot{}, false, nil
	}
	return Snapshot{Index: sc.LastIndex, Hash: sc.Hash, State: sc.State, DocumentType: v.doc.DocumentType, IsDeleted: v.doc.IsDeleted}, true, nil
}

// Forget drops the document read last, so the next Snapshot reads the view
// again (a settling verification compares the same document repeatedly).
func (v *ViewSnapshots) Forget() { v.read, v.doc = false, nil }

func (v *ViewSnapshots) load(ctx context.Context, id, branch string) error {
	v.key.id, v.key.branch, v.doc, v.read = id, branch, nil, false
	doc, err := v.view.Get(ctx, id, branch)
	var nf *docview.NotFoundError
	switch {
	case errors.As(err, &nf):
	case err != nil:
		return fmt.Errorf("reading the document view of %s: %w", id, err)
	default:
		v.doc = doc
	}
	v.read = true
	return nil
}
