// Package signing owns signed actions: the canonical form an action's
// signature covers, the set of public keys signatures are checked with, the
// policy of each document type (required, optional, off) and the check
// itself. The executor runs it before anything of a job is stored, and
// ingest runs it to refuse a bad submit early; both get the same answer
// because both ask this package.
package signing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	oplog "github.com/doclog/doclog/log"
	"github.com/doclog/doclog/model"
)

// Purpose is the first thing the canonical form says: a signature made for
// something else (another protocol, a later version of this form) never
// verifies as a signature of an action.
const Purpose = "doclog.action-signature.v1"

// maxSafeInteger is the largest integer an IEEE double holds exactly. RFC 8785
// writes numbers as doubles, so two integers above it can share one canonical
// form; an action carrying one is refused rather than signed ambiguously.
const maxSafeInteger = 1<<53 - 1

// Subject is what a signature binds: an action and the document it is
// applied to. Not the branch: a document's branches share operations (a
// fork copies the prefix, a promote re-appends a branch's operations onto
// its target), and a stored operation's signature must verify on every
// branch the log holds it on.
type Subject struct {
	DocumentID   string
	DocumentType string
	Action       *oplog.Action
}

// Canonical returns the bytes an action's signature is made over: the
// RFC 8785 canonical JSON of
//
//	{"action":{"id":…,"input":…,"scope":…,"timestampUtcMs":…,"type":…},
//	 "documentId":…,"documentType":…,"purpose":"doclog.action-signature.v1"}
//
// where input is the action's input as a JSON value (null when the action
// has none). The action's context and its signature are left out: context
// is the producer's metadata, which no reducer reads and which relays may
// add to.
func Canonical(s Subject) ([]byte, error) {
	a := s.Action
	if a.TimestampUtcMs < 0 || a.TimestampUtcMs > maxSafeInteger {
		return nil, fmt.Errorf("timestampUtcMs %d is outside 0..2^53-1, the integers a canonical JSON number holds exactly", a.TimestampUtcMs)
	}
	var input any
	if len(bytes.TrimSpace(a.Input)) > 0 {
		d := json.NewDecoder(bytes.NewReader(a.Input))
		d.UseNumber()
		if err := d.Decode(&input); err != nil {
			return nil, fmt.Errorf("reading input: %w", err)
		}
		if err := checkIntegers(input, "input"); err != nil {
			return nil, err
		}
	}
	b, err := model.Canonical(map[string]any{
		"purpose":      Purpose,
		"documentId":   s.DocumentID,
		"documentType": s.DocumentType,
		"action": map[string]any{
			"id":             a.ID,
			"type":           a.Type,
			"scope":          a.Scope,
			"timestampUtcMs": a.TimestampUtcMs,
			"input":          input,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("canonicalizing: %w", err)
	}
	return b, nil
}

// checkIntegers refuses an integer literal that a double does not hold
// exactly (see maxSafeInteger). A decimal fraction is rounded to a double by
// RFC 8785 by design, and a reducer reads it as one.
func checkIntegers(v any, path string) error {
	switch x := v.(type) {
	case json.Number:
		s := string(x)
		if bytes.ContainsAny([]byte(s), ".eE") {
			return nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n > maxSafeInteger || n < -maxSafeInteger {
			return fmt.Errorf("%s: the integer %s is beyond 2^53-1, which canonical JSON cannot hold exactly", path, s)
		}
	case map[string]any:
		for k, e := range x {
			if err := checkIntegers(e, path+"."+k); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := checkIntegers(e, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	}
	return nil
}
