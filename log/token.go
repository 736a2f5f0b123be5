package log

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// The wire form of a consistency token, its one definition: the job status
// of the ingest API and doclogctl hand it out, the read store takes it. It
// is the JSON object {"coordinates":[{"documentId","scope","branch","index"}]}
// encoded as base64url, padding optional. A token is opaque to clients; they
// copy it as it is.
const (
	// MaxTokenCoordinates bounds a token's coordinates (a job writes one per
	// stream, a client may merge the tokens of several jobs).
	MaxTokenCoordinates = 256
	// maxTokenBytes bounds the encoded token before it is decoded.
	maxTokenBytes = 64 << 10
)

// TokenError reports a consistency token that cannot be decoded; Reason
// names what is wrong.
type TokenError struct {
	Reason string
}

func (e *TokenError) Error() string { return "consistency token: " + e.Reason }

// EncodeToken renders a token in its wire form (no padding).
func EncodeToken(t ConsistencyToken) string {
	if t.Coordinates == nil {
		t.Coordinates = []Coordinate{}
	}
	b, _ := json.Marshal(t) // plain strings and integers always encode
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeToken parses a token's wire form. An empty branch is the default
// branch; a coordinate needs a document id, a scope and an index of at
// least 0.
func DecodeToken(s string) (ConsistencyToken, error) {
	var t ConsistencyToken
	if len(s) > maxTokenBytes {
		return t, &TokenError{Reason: fmt.Sprintf("longer than %d bytes", maxTokenBytes)}
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return t, &TokenError{Reason: "not base64url: " + err.Error()}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var w struct {
		Coordinates []*Coordinate `json:"coordinates"`
	}
	if err := dec.Decode(&w); err != nil {
		return t, &TokenError{Reason: "not a JSON object {\"coordinates\":[…]}: " + err.Error()}
	}
	if dec.More() {
		return t, &TokenError{Reason: "trailing data after the JSON object"}
	}
	if w.Coordinates == nil {
		return t, &TokenError{Reason: "coordinates: missing"}
	}
	if len(w.Coordinates) > MaxTokenCoordinates {
		return t, &TokenError{Reason: fmt.Sprintf("coordinates: %d, more than %d", len(w.Coordinates), MaxTokenCoordinates)}
	}
	t.Coordinates = make([]Coordinate, 0, len(w.Coordinates))
	for i, c := range w.Coordinates {
		switch {
		case c == nil:
			return t, &TokenError{Reason: fmt.Sprintf("coordinates[%d]: null", i)}
		case c.DocumentID == "":
			return t, &TokenError{Reason: fmt.Sprintf("coordinates[%d].documentId: missing", i)}
		case c.Scope == "":
			return t, &TokenError{Reason: fmt.Sprintf("coordinates[%d].scope: missing", i)}
		case c.Index < 0:
			return t, &TokenError{Reason: fmt.Sprintf("coordinates[%d].index: %d is negative", i, c.Index)}
		}
		if c.Branch == "" {
			c.Branch = DefaultBranch
		}
		t.Coordinates = append(t.Coordinates, *c)
	}
	return t, nil
}
