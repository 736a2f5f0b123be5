// Package builtin gathers the document models doclog ships (doclog/json,
// doclog/drive, doclog/ledger) so every stage registers the same set.
package builtin

import (
	"fmt"

	"github.com/doclog/doclog/model"
	"github.com/doclog/doclog/model/drive"
	"github.com/doclog/doclog/model/jsondoc"
	"github.com/doclog/doclog/model/ledger"
)

// Models returns the built-in models.
func Models() []model.Model {
	return []model.Model{jsondoc.Model(), drive.Model(), ledger.Model()}
}

// Register adds the built-in models to r.
func Register(r *model.Registry) error {
	for _, m := range Models() {
		if err := r.Register(m); err != nil {
			return fmt.Errorf("register built-in models: %w", err)
		}
	}
	return nil
}

// NewRegistry returns a registry holding the built-in models.
func NewRegistry() (*model.Registry, error) {
	r, err := model.NewRegistry()
	if err != nil {
		return nil, err
	}
	if err := Register(r); err != nil {
		return nil, err
	}
	return r, nil
}
