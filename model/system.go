package model

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"unicode/utf8"

	oplog "github.com/doclog/doclog/log"
)

// System action types of the document scope.
const (
	ActionCreateDocument     = "CREATE_DOCUMENT"
	ActionUpgradeDocument    = "UPGRADE_DOCUMENT"
	ActionDeleteDocument     = "DELETE_DOCUMENT"
	ActionAddRelationship    = "ADD_RELATIONSHIP"
	ActionRemoveRelationship = "REMOVE_RELATIONSHIP"
	ActionSetName            = "SET_NAME"
	ActionSetSlug            = "SET_SLUG"

	// RelationshipChild is the default relationship type: a parent/child
	// link recorded in the parent's document scope.
	RelationshipChild = "child"
)

// Business rules of the document scope (BusinessRuleViolation.Rule).
const (
	RuleRelationshipExists   = "relationship-exists"
	RuleRelationshipNotFound = "relationship-not-found"
	RuleSelfRelationship     = "self-relationship"
)

// Keys of the document scope state. The state is a JSON object like any
// other scope's so that it hashes and replays the same way.
const (
	keyID            = "id"
	keyDocumentType  = "documentType"
	keyName          = "name"
	keySlug          = "slug"
	keyVersion       = "version"
	keyCreatedAt     = "createdAtUtcMs"
	keyIsDeleted     = "isDeleted"
	keyDeletedAt     = "deletedAtUtcMs"
	keyRelationships = "relationships"
	keyRelType       = "type"
	keyRelTarget     = "targetId"
	keyRelMetadata   = "metadata"
)

// Limits of the document scope's inputs.
const (
	MaxNameLength = 1024
	MaxSlugLength = 200
	MaxIDLength   = 256
)

var slugPattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?$`)

// CreateDocumentInput is the input of CREATE_DOCUMENT. Version defaults to
// the latest registered version of the type; the version chosen is recorded
// on the operation, so replay does not depend on what is latest later.
type CreateDocumentInput struct {
	DocumentType string `json:"documentType,omitempty"`
	Version      int    `json:"version,omitempty"`
	Name         string `json:"name,omitempty"`
	Slug         string `json:"slug,omitempty"`
}

// UpgradeDocumentInput is the input of UPGRADE_DOCUMENT. FromVersion, when
// set, must be the document's current version (a guard for the client).
type UpgradeDocumentInput struct {
	FromVersion int `json:"fromVersion,omitempty"`
	ToVersion   int `json:"toVersion"`
}

// DeleteDocumentInput is the input of DELETE_DOCUMENT.
type DeleteDocumentInput struct{}

// RelationshipInput is the input of ADD_RELATIONSHIP and
// REMOVE_RELATIONSHIP. Type defaults to "child"; Metadata (add only) is any
// JSON object stored with the relationship.
type RelationshipInput struct {
	TargetID string          `json:"targetId"`
	Type     string          `json:"type,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`

	metadata map[string]any
}

// SetNameInput is the input of SET_NAME.
type SetNameInput struct {
	Name string `json:"name"`
}

// SetSlugInput is the input of SET_SLUG. An empty slug removes it.
type SetSlugInput struct {
	Slug string `json:"slug"`
}

func validateName(name string) error {
	if utf8.RuneCountInString(name) > MaxNameLength {
		return Invalidf("name is longer than %d characters", MaxNameLength)
	}
	return nil
}

func validateSlug(slug string) error {
	if slug == "" {
		return nil
	}
	if len(slug) > MaxSlugLength {
		return Invalidf("slug is longer than %d characters", MaxSlugLength)
	}
	// The pattern below refuses these characters too, so no stored slug
	// holds one and replay is unaffected; checking first gives the reason
	// every other name gives for them.
	if err := CheckText("slug", slug); err != nil {
		return err
	}
	if !slugPattern.MatchString(slug) {
		return Invalidf("slug %q must be lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit", slug)
	}
	return nil
}

func validateRelationship(add bool) func(*RelationshipInput) error {
	return func(in *RelationshipInput) error {
		if err := CheckID("targetId", in.TargetID); err != nil {
			return err
		}
		if in.Type == "" {
			in.Type = RelationshipChild
		}
		if len(in.Metadata) > 0 {
			if !add {
				return Invalidf("metadata is only accepted when adding a relationship")
			}
			v, err := DecodeJSON(in.Metadata)
			if err != nil {
				return err
			}
			m, ok := v.(map[string]any)
			if !ok {
				return Invalidf("metadata must be an object")
			}
			in.metadata = m
		}
		return nil
	}
}

// systemActions declares the document scope's actions. Their reducers need
// the registry and the version being replayed, so they are dispatched by
// applyDocument rather than through ActionSpec.Reduce.
var systemActions = []*ActionSpec{
	{
		Type: ActionCreateDocument, Scopes: []string{oplog.ScopeDocument},
		Description: "Creates the document at a model version (default: the latest registered).",
		Input:       `{"documentType"?: string, "version"?: int, "name"?: string, "slug"?: string}`,
		Decode: DecodeInput(func(in *CreateDocumentInput) error {
			if in.Version < 0 {
				return Invalidf("version must be 1 or more")
			}
			if err := validateName(in.Name); err != nil {
				return err
			}
			return validateSlug(in.Slug)
		}),
		Check: func(input any) error { return CheckText("name", input.(*CreateDocumentInput).Name) },
	},
	{
		Type: ActionUpgradeDocument, Scopes: []string{oplog.ScopeDocument},
		Description: "Moves the document to a higher model version; each scope's state is upgraded along the registered path before its next action.",
		Input:       `{"fromVersion"?: int, "toVersion": int}`,
		Decode: DecodeInput(func(in *UpgradeDocumentInput) error {
			if in.ToVersion < 1 {
				return Invalidf("toVersion is required and must be 1 or more")
			}
			return nil
		}),
	},
	{
		Type: ActionDeleteDocument, Scopes: []string{oplog.ScopeDocument},
		Description: "Deletes the document; every later action of any scope is refused with DocumentDeleted.",
		Input:       `{}`,
		Decode:      DecodeInput[DeleteDocumentInput](nil),
	},
	{
		Type: ActionAddRelationship, Scopes: []string{oplog.ScopeDocument},
		Description: "Links this document to a target document (default type \"child\"); the indexer projects it.",
		Input:       `{"targetId": string, "type"?: string, "metadata"?: object}`,
		Decode:      DecodeInput(validateRelationship(true)),
		// Only a new link is held to the text rule: one added before the
		// rule can still be removed.
		Check: func(input any) error {
			in := input.(*RelationshipInput)
			return FirstError(CheckText("targetId", in.TargetID), CheckText("type", in.Type))
		},
	},
	{
		Type: ActionRemoveRelationship, Scopes: []string{oplog.ScopeDocument},
		Description: "Removes a link added by ADD_RELATIONSHIP.",
		Input:       `{"targetId": string, "type"?: string}`,
		Decode:      DecodeInput(validateRelationship(false)),
	},
	{
		Type: ActionSetName, Scopes: []string{oplog.ScopeDocument},
		Description: "Sets the document's name.",
		Input:       `{"name": string}`,
		Decode:      DecodeInput(func(in *SetNameInput) error { return validateName(in.Name) }),
		Check:       func(input any) error { return CheckText("name", input.(*SetNameInput).Name) },
	},
	{
		Type: ActionSetSlug, Scopes: []string{oplog.ScopeDocument},
		Description: "Sets the document's slug (empty removes it); uniqueness is the document view's to enforce.",
		Input:       `{"slug": string}`,
		Decode:      DecodeInput(func(in *SetSlugInput) error { return validateSlug(in.Slug) }),
	},
}

// SystemActions lists the document scope's actions.
func SystemActions() []*ActionSpec { return slices.Clone(systemActions) }

// IsSystemAction reports whether t is a document-scope action type.
func IsSystemAction(t string) bool {
	_, ok := systemAction(t)
	return ok
}

func systemAction(t string) (*ActionSpec, bool) {
	for _, a := range systemActions {
		if a.Type == t {
			return a, true
		}
	}
	return nil, false
}

// Relationship is one link in a document's document scope.
type Relationship struct {
	Type     string         `json:"type"`
	TargetID string         `json:"targetId"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// DocumentInfo is the document scope state in typed form.
type DocumentInfo struct {
	ID             string
	DocumentType   string
	Name           string
	Slug           string
	Version        int
	CreatedAtUtcMs int64
	IsDeleted      bool
	DeletedAtUtcMs int64
	Relationships  []Relationship
}

// DocumentInfoOf reads a document scope state. ok is false while the
// document has not been created.
func DocumentInfoOf(doc *StreamState) (info DocumentInfo, ok bool) {
	if doc == nil || doc.Revision == 0 {
		return DocumentInfo{}, false
	}
	m, _ := doc.State.(map[string]any)
	if m == nil {
		return DocumentInfo{}, false
	}
	info = DocumentInfo{
		ID:             str(m[keyID]),
		DocumentType:   str(m[keyDocumentType]),
		Name:           str(m[keyName]),
		Slug:           str(m[keySlug]),
		Version:        int(num(m[keyVersion])),
		CreatedAtUtcMs: int64(num(m[keyCreatedAt])),
		DeletedAtUtcMs: int64(num(m[keyDeletedAt])),
	}
	info.IsDeleted, _ = m[keyIsDeleted].(bool)
	rels, _ := m[keyRelationships].([]any)
	for _, r := range rels {
		rm, _ := r.(map[string]any)
		rel := Relationship{Type: str(rm[keyRelType]), TargetID: str(rm[keyRelTarget])}
		rel.Metadata, _ = rm[keyRelMetadata].(map[string]any)
		info.Relationships = append(info.Relationships, rel)
	}
	return info, true
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) float64 {
	f, _ := toFloat(v)
	return f
}

// deletedAt reports whether a document scope state is deleted, cheaply: it
// runs before every action of every scope.
func deletedAt(doc *StreamState) (int64, bool) {
	m, _ := doc.State.(map[string]any)
	if d, _ := m[keyIsDeleted].(bool); d {
		return int64(num(m[keyDeletedAt])), true
	}
	return 0, false
}

// applyDocument runs the system reducer. replayVersion is the version
// recorded on the operation when replaying (0 when applying a new action):
// a replay takes the recorded version instead of asking the registry what is
// latest now, and skips the registry checks the action passed when it was
// first applied.
func (r *Registry) applyDocument(st *StreamState, a *oplog.Action, input any, replayVersion int) (any, int, error) {
	if a.Type == ActionCreateDocument {
		if !st.empty() {
			return nil, 0, &DocumentExists{}
		}
		return r.createDocument(st, a, input.(*CreateDocumentInput), replayVersion)
	}
	m, _ := st.State.(map[string]any)
	if st.empty() || m == nil {
		return nil, 0, &DocumentNotFound{}
	}
	if at, deleted := deletedAt(st); deleted {
		return nil, 0, &DocumentDeleted{DeletedAtUtcMs: at}
	}
	version := st.Version
	switch in := input.(type) {
	case *UpgradeDocumentInput:
		if in.FromVersion != 0 && in.FromVersion != st.Version {
			return nil, 0, Invalidf("fromVersion %d is not the document's version %d", in.FromVersion, st.Version)
		}
		if in.ToVersion < st.Version {
			return nil, 0, &DowngradeNotSupported{DocumentType: st.DocumentType, From: st.Version, To: in.ToVersion}
		}
		if in.ToVersion == st.Version {
			return nil, 0, Invalidf("the document is already at version %d", st.Version)
		}
		if replayVersion == 0 {
			if _, err := r.UpgradePath(st.DocumentType, st.Version, in.ToVersion); err != nil {
				return nil, 0, err
			}
		}
		version = in.ToVersion
		m[keyVersion] = float64(version)
	case *DeleteDocumentInput:
		m[keyIsDeleted] = true
		m[keyDeletedAt] = float64(a.TimestampUtcMs)
	case *RelationshipInput:
		rels, _ := m[keyRelationships].([]any)
		at := -1
		for i, e := range rels {
			em, _ := e.(map[string]any)
			if str(em[keyRelTarget]) == in.TargetID && str(em[keyRelType]) == in.Type {
				at = i
				break
			}
		}
		if a.Type == ActionAddRelationship {
			if in.TargetID == st.Stream.DocumentID {
				return nil, 0, Violation(RuleSelfRelationship, "a document cannot be related to itself")
			}
			if at >= 0 {
				return nil, 0, Violation(RuleRelationshipExists, "relationship %s to %s already exists", in.Type, in.TargetID)
			}
			rel := map[string]any{keyRelType: in.Type, keyRelTarget: in.TargetID}
			if in.metadata != nil {
				rel[keyRelMetadata] = in.metadata
			}
			m[keyRelationships] = append(rels, rel)
		} else {
			if at < 0 {
				return nil, 0, Violation(RuleRelationshipNotFound, "no relationship %s to %s", in.Type, in.TargetID)
			}
			m[keyRelationships] = slices.Delete(rels, at, at+1)
		}
	case *SetNameInput:
		m[keyName] = in.Name
	case *SetSlugInput:
		m[keySlug] = in.Slug
	default:
		return nil, 0, &ReducerError{Err: fmt.Errorf("no system reducer for input %T", input)}
	}
	return m, version, nil
}

func (r *Registry) createDocument(st *StreamState, a *oplog.Action, in *CreateDocumentInput, replayVersion int) (any, int, error) {
	docType := st.DocumentType
	switch {
	case docType == "" && in.DocumentType == "":
		return nil, 0, Invalidf("documentType is required")
	case docType == "":
		docType = in.DocumentType
	case in.DocumentType != "" && in.DocumentType != docType:
		return nil, 0, Invalidf("documentType %q does not match the job's document type %q", in.DocumentType, docType)
	}
	version := replayVersion
	if version == 0 {
		if in.Version != 0 {
			if _, err := r.Get(docType, in.Version); err != nil {
				return nil, 0, err
			}
			version = in.Version
		} else {
			m, err := r.Latest(docType)
			if err != nil {
				return nil, 0, err
			}
			version = m.Version()
		}
	}
	st.DocumentType = docType
	return map[string]any{
		keyID:            st.Stream.DocumentID,
		keyDocumentType:  docType,
		keyName:          in.Name,
		keySlug:          in.Slug,
		keyVersion:       float64(version),
		keyCreatedAt:     float64(a.TimestampUtcMs),
		keyIsDeleted:     false,
		keyDeletedAt:     nil,
		keyRelationships: []any{},
	}, version, nil
}
