package model

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// UpgradeReducer turns a scope's state produced at version From into the
// state of version To. It may mutate state in place. It must be deterministic:
// replay runs it again at the same point of the stream.
type UpgradeReducer func(scope string, state any) (any, error)

// UpgradeTransition is one step of an upgrade, To == From+1. A nil Upgrade
// keeps every scope's state as it is.
type UpgradeTransition struct {
	From, To int
	Upgrade  UpgradeReducer
}

// UpgradeManifest lists the upgrade steps of a document type.
type UpgradeManifest struct {
	DocumentType string
	Transitions  []UpgradeTransition
}

// Registry holds the models a process knows, by type and version, and their
// upgrade steps. Registration usually happens at start-up; lookups are safe
// to run concurrently with it.
type Registry struct {
	mu       sync.RWMutex
	models   map[string]map[int]Model
	latest   map[string]int
	upgrades map[string]map[int]UpgradeTransition // by From
}

// NewRegistry returns a registry holding the given models.
func NewRegistry(models ...Model) (*Registry, error) {
	r := &Registry{
		models:   map[string]map[int]Model{},
		latest:   map[string]int{},
		upgrades: map[string]map[int]UpgradeTransition{},
	}
	for _, m := range models {
		if err := r.Register(m); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds a model version. Registering a type and version twice is an
// error: two reducers for the same version would make replay ambiguous.
func (r *Registry) Register(m Model) error {
	if m == nil || m.Type() == "" {
		return errors.New("register model: empty document type")
	}
	if m.Version() < 1 {
		return fmt.Errorf("register model %s: version %d is below 1", m.Type(), m.Version())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	vs := r.models[m.Type()]
	if vs == nil {
		vs = map[int]Model{}
		r.models[m.Type()] = vs
	}
	if _, dup := vs[m.Version()]; dup {
		return fmt.Errorf("register model %s: version %d is already registered", m.Type(), m.Version())
	}
	vs[m.Version()] = m
	if m.Version() > r.latest[m.Type()] {
		r.latest[m.Type()] = m.Version()
	}
	return nil
}

// RegisterUpgrades adds upgrade steps. Each step goes from one version to the
// next; a step registered twice is an error.
func (r *Registry) RegisterUpgrades(man UpgradeManifest) error {
	if man.DocumentType == "" {
		return errors.New("register upgrades: empty document type")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.upgrades[man.DocumentType]
	if ts == nil {
		ts = map[int]UpgradeTransition{}
		r.upgrades[man.DocumentType] = ts
	}
	for _, t := range man.Transitions {
		if t.To != t.From+1 || t.From < 1 {
			return fmt.Errorf("register upgrades %s: step %d→%d must go from a version to the next", man.DocumentType, t.From, t.To)
		}
		if _, dup := ts[t.From]; dup {
			return fmt.Errorf("register upgrades %s: step %d→%d is already registered", man.DocumentType, t.From, t.To)
		}
		ts[t.From] = t
	}
	return nil
}

// Get returns a model version, or *ModelNotFound.
func (r *Registry) Get(documentType string, version int) (Model, error) {
	r.mu.RLock()
	m, ok := r.models[documentType][version]
	r.mu.RUnlock()
	if !ok {
		return nil, &ModelNotFound{DocumentType: documentType, Version: version}
	}
	return m, nil
}

// Latest returns the highest registered version of a type, or
// *ModelNotFound.
func (r *Registry) Latest(documentType string) (Model, error) {
	r.mu.RLock()
	v, ok := r.latest[documentType]
	m := r.models[documentType][v]
	r.mu.RUnlock()
	if !ok {
		return nil, &ModelNotFound{DocumentType: documentType}
	}
	return m, nil
}

// Versions lists the registered versions of a type in ascending order.
func (r *Registry) Versions(documentType string) []int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.models[documentType]))
}

// Types lists the registered document types in order.
func (r *Registry) Types() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.models))
}

// Manifest returns the upgrade steps registered for a type, by From.
func (r *Registry) Manifest(documentType string) UpgradeManifest {
	r.mu.RLock()
	defer r.mu.RUnlock()
	man := UpgradeManifest{DocumentType: documentType}
	for _, t := range r.upgrades[documentType] {
		man.Transitions = append(man.Transitions, t)
	}
	slices.SortFunc(man.Transitions, func(a, b UpgradeTransition) int { return a.From - b.From })
	return man
}

// UpgradePath returns the steps that lead from one version to another, in
// order (empty when from == to). Every version on the way must be registered.
func (r *Registry) UpgradePath(documentType string, from, to int) ([]UpgradeTransition, error) {
	if to < from {
		return nil, &DowngradeNotSupported{DocumentType: documentType, From: from, To: to}
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	path := make([]UpgradeTransition, 0, to-from)
	for v := from; v < to; v++ {
		t, ok := r.upgrades[documentType][v]
		if !ok {
			return nil, &MissingUpgradeTransition{DocumentType: documentType, From: v, To: v + 1}
		}
		if _, ok := r.models[documentType][v+1]; !ok {
			return nil, &ModelNotFound{DocumentType: documentType, Version: v + 1}
		}
		path = append(path, t)
	}
	return path, nil
}
