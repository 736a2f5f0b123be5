package client

import (
	"encoding/json"
	"time"
)

// Document is a document as the document view holds it.
type Document struct {
	ID                string `json:"id"`
	Branch            string `json:"branch"`
	DocumentType      string `json:"documentType"`
	Name              string `json:"name"`
	Slug              string `json:"slug"`
	Version           int    `json:"version"`
	CreatedAtUtcMs    int64  `json:"createdAtUtcMs"`
	LastModifiedUtcMs int64  `json:"lastModifiedUtcMs"`
	IsDeleted         bool   `json:"isDeleted"`
	// DeletedAtUtcMs is set when IsDeleted is.
	DeletedAtUtcMs int64 `json:"deletedAtUtcMs,omitempty"`
	// Revision is the revision of every scope the view holds.
	Revision map[string]int64 `json:"revision"`
	// Scopes are the scopes asked for (all by default).
	Scopes map[string]ScopeState `json:"scopes"`
}

// ScopeState is one scope of a document.
type ScopeState struct {
	Revision int64  `json:"revision"`
	Hash     string `json:"hash"`
	Version  int    `json:"version"`
	// State is the scope's JSON state, as the model defines it.
	State json.RawMessage `json:"state"`
}

// Decode decodes the scope's state into v.
func (s ScopeState) Decode(v any) error { return decodeState(s.State, v) }

// FindQuery selects documents of FindDocuments. Empty fields do not
// filter.
type FindQuery struct {
	// Type keeps documents of one type.
	Type string
	// Parent keeps the documents the parent links to as "child".
	Parent string
	// IncludeDeleted lists deleted documents too.
	IncludeDeleted bool
	// Cursor is the previous page's NextCursor.
	Cursor string
	// Limit is the page size; zero: the server's default (100).
	Limit int
}

// DocumentPage is a page of FindDocuments.
type DocumentPage struct {
	Documents []FoundDocument `json:"documents"`
	// NextCursor is set when there may be more.
	NextCursor string `json:"nextCursor,omitempty"`
}

// FoundDocument is a document as the relationship index holds it.
type FoundDocument struct {
	ID string `json:"id"`
	// DocumentType is empty for a child the index has not seen created,
	// unless the query named a type.
	DocumentType   string `json:"documentType,omitempty"`
	CreatedAtUtcMs int64  `json:"createdAtUtcMs,omitempty"`
	IsDeleted      bool   `json:"isDeleted"`
	DeletedAtUtcMs int64  `json:"deletedAtUtcMs,omitempty"`
	// Revision is the document scope's revision the index applied.
	Revision int64 `json:"revision"`
}

// Direction selects a document's links by its end of them.
type Direction string

// The directions of RelationshipQuery.
const (
	Outgoing Direction = "out"
	Incoming Direction = "in"
	Both     Direction = "both"
)

// RelationshipQuery selects the links of Relationships.
type RelationshipQuery struct {
	// Direction defaults to Both.
	Direction Direction
	// Type keeps links of one type.
	Type   string
	Cursor string
	Limit  int
}

// RelationshipPage is a page of Relationships.
type RelationshipPage struct {
	DocumentID    string         `json:"documentId"`
	Branch        string         `json:"branch"`
	Direction     Direction      `json:"direction"`
	Relationships []Relationship `json:"relationships"`
	NextCursor    string         `json:"nextCursor,omitempty"`
}

// Relationship is one link.
type Relationship struct {
	SourceID string          `json:"sourceId"`
	Type     string          `json:"type"`
	TargetID string          `json:"targetId"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// SinceIndex is the index of the operation that added the link.
	SinceIndex int64 `json:"sinceIndex"`
}

// OperationQuery selects the operations of Operations.
type OperationQuery struct {
	// Scope defaults to global.
	Scope string
	// Since is the first index returned (inclusive).
	Since int64
	Limit int
}

// OperationPage is a page of one stream's operations.
type OperationPage struct {
	DocumentID string      `json:"documentId"`
	Scope      string      `json:"scope"`
	Branch     string      `json:"branch"`
	Revision   int64       `json:"revision"`
	Operations []Operation `json:"operations"`
	// NextSince is the Since of the next page; nil on the last page.
	NextSince *int64 `json:"nextSince,omitempty"`
}

// Operation is one committed operation of the log.
type Operation struct {
	OpID         string `json:"opId"`
	JobID        string `json:"jobId"`
	DocumentID   string `json:"documentId"`
	DocumentType string `json:"documentType"`
	Scope        string `json:"scope"`
	Branch       string `json:"branch"`
	Index        int64  `json:"index"`
	Skip         int64  `json:"skip"`
	// Hash is the hash of the state the operation produced.
	Hash           string          `json:"hash"`
	TimestampUtcMs int64           `json:"timestampUtcMs"`
	Version        int             `json:"version"`
	Action         OperationAction `json:"action"`
	Ordinal        int64           `json:"ordinal,omitempty"`
	TxID           uint64          `json:"txid,omitempty"`
	WrittenAt      *time.Time      `json:"writtenAt,omitempty"`
}

// OperationAction is the action an operation applied, as stored.
type OperationAction struct {
	ID             string          `json:"id"`
	Type           string          `json:"type"`
	Scope          string          `json:"scope"`
	TimestampUtcMs int64           `json:"timestampUtcMs"`
	Input          json.RawMessage `json:"input,omitempty"`
	Context        json.RawMessage `json:"context,omitempty"`
	// Signature is the action's signature as its job carried it; nil when
	// it was unsigned.
	Signature *Signature `json:"signature,omitempty"`
}

// StateQuery selects the state of State.
type StateQuery struct {
	// Scope defaults to global.
	Scope string
	// Revision is the number of operations applied; zero: the current
	// revision.
	Revision int64
}

// StateAt is a scope's state at a revision, rebuilt from the log.
type StateAt struct {
	DocumentID   string          `json:"documentId"`
	DocumentType string          `json:"documentType"`
	Scope        string          `json:"scope"`
	Branch       string          `json:"branch"`
	Revision     int64           `json:"revision"`
	Version      int             `json:"version"`
	Hash         string          `json:"hash"`
	State        json.RawMessage `json:"state"`
	// KeyframeIndex is the keyframe the state was rebuilt from; nil when
	// replayed from index 0.
	KeyframeIndex *int64 `json:"keyframeIndex,omitempty"`
	// ReplayedOperations is how many operations were replayed.
	ReplayedOperations int64 `json:"replayedOperations"`
}

// Decode decodes the state into v.
func (s StateAt) Decode(v any) error { return decodeState(s.State, v) }
