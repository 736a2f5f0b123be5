package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	oplog "github.com/doclog/doclog/log"
)

// Model is one version of a document type: its initial state per scope, the
// actions it accepts and the reducer of each scope. The document scope is not
// a model's: the system reducer owns it (create, upgrade, delete,
// relationships, name and slug).
//
// A Model must be deterministic: the same state and action always yield the
// same state, whatever the process, because replay re-runs it to verify the
// hash stored with each operation.
type Model interface {
	// Type is the document type, e.g. "doclog/ledger".
	Type() string
	// Version is this model's version, 1 or more.
	Version() int
	// Scopes lists the scopes the model keeps state in (global, local).
	Scopes() []string
	// InitialState is a fresh state of a scope; the caller owns it.
	InitialState(scope string) any
	// Action returns the declaration of an action type.
	Action(actionType string) (*ActionSpec, bool)
	// Actions lists every action type in declaration order (for ingest
	// validation and documentation).
	Actions() []*ActionSpec
	// Reduce applies one decoded action to the state of call.Stream.Scope.
	// It may mutate state in place and returns the new state (the same
	// value, or a new one when the root changes). A reducer that refuses an
	// action returns *BusinessRuleViolation (or *InvalidInput) before it
	// changes anything, so the caller can go on with the state; any other
	// error, or a panic, leaves the state suspect (StreamState.Poisoned).
	Reduce(state any, call *Call) (any, error)
}

// Call is what a reducer receives besides the state.
type Call struct {
	Action  *oplog.Action
	Input   any // the value ActionSpec.Decode returned
	Stream  oplog.StreamKey
	Index   int64 // the index the operation takes
	Version int   // the model version the reducer runs at
}

// ActionSpec declares an action type.
type ActionSpec struct {
	Type string
	// Scopes the action may target; for a model action, a subset of the
	// model's scopes.
	Scopes []string
	// Description and Input document the action (docs/models.md, CLI help).
	Description string
	Input       string
	// Decode validates the raw input and returns the value the reducer gets
	// as Call.Input. It returns *InvalidInput on bad input and never looks at
	// state. Nil accepts any input and passes it undecoded.
	Decode func(raw json.RawMessage) (any, error)
	// Check holds a new action's decoded input to rules that are not part
	// of its replay: Apply runs it after Decode, Replay does not, so a rule
	// added or tightened later never makes a stored stream unreplayable.
	// It returns *InvalidInput; nil checks nothing.
	Check func(input any) error
	// Reduce is the reducer of this action; Spec.Reduce dispatches to it.
	Reduce func(state any, call *Call) (any, error)
	// Touches, when set, declares from the decoded input every path the
	// reducer may change (a value at a path, and anything under it, may be
	// changed in place, replaced or removed; an object on the way to it
	// may gain or lose that member). Apply then gives the reducer private
	// copies of those paths only, shares the rest of the state with the
	// state before, and re-encodes only those paths to hash the result, so
	// a small change to a large state costs in proportion to the change. A
	// reducer that changes anything else breaks the hash contract:
	// modeltest.Doc checks the declaration on every action it applies. Nil (or an empty path in
	// the list) declares the whole state: it is copied and hashed whole.
	Touches func(input any) []Path
}

// decode runs Decode, and Check too for a new action (fresh).
func (a *ActionSpec) decode(raw json.RawMessage, fresh bool) (any, error) {
	var input any = raw
	if a.Decode != nil {
		var err error
		if input, err = a.Decode(raw); err != nil {
			return nil, err
		}
	}
	if fresh && a.Check != nil {
		if err := a.Check(input); err != nil {
			return nil, err
		}
	}
	return input, nil
}

// Validate is what Apply asks of a new action's raw input: Decode, then
// Check. It returns the decoded input, for a caller (the ingest API) that
// refuses an action before it is submitted.
func (a *ActionSpec) Validate(raw json.RawMessage) (any, error) { return a.decode(raw, true) }

// AllowsScope reports whether the action may target scope.
func (a *ActionSpec) AllowsScope(scope string) bool { return slices.Contains(a.Scopes, scope) }

// Spec is a Model assembled from declarations; most models need nothing
// more.
type Spec struct {
	DocumentType string
	ModelVersion int
	// Initial returns a fresh initial state per scope; its keys are the
	// model's scopes.
	Initial map[string]func() any
	// ActionList declares the actions, each with its reducer.
	ActionList []*ActionSpec

	byType map[string]*ActionSpec
}

// NewSpec indexes the actions of a Spec and checks the declarations.
func NewSpec(s Spec) (*Spec, error) {
	if s.DocumentType == "" {
		return nil, errors.New("model spec: empty document type")
	}
	if s.ModelVersion < 1 {
		return nil, fmt.Errorf("model spec %s: version %d is below 1", s.DocumentType, s.ModelVersion)
	}
	s.byType = make(map[string]*ActionSpec, len(s.ActionList))
	for _, a := range s.ActionList {
		if _, dup := s.byType[a.Type]; dup {
			return nil, fmt.Errorf("model spec %s v%d: action %s declared twice", s.DocumentType, s.ModelVersion, a.Type)
		}
		if IsSystemAction(a.Type) {
			return nil, fmt.Errorf("model spec %s v%d: action %s is a system action", s.DocumentType, s.ModelVersion, a.Type)
		}
		if a.Reduce == nil {
			return nil, fmt.Errorf("model spec %s v%d: action %s has no reducer", s.DocumentType, s.ModelVersion, a.Type)
		}
		for _, sc := range a.Scopes {
			if _, ok := s.Initial[sc]; !ok {
				return nil, fmt.Errorf("model spec %s v%d: action %s targets scope %q the model has no initial state for", s.DocumentType, s.ModelVersion, a.Type, sc)
			}
		}
		if len(a.Scopes) == 0 {
			return nil, fmt.Errorf("model spec %s v%d: action %s names no scope", s.DocumentType, s.ModelVersion, a.Type)
		}
		s.byType[a.Type] = a
	}
	return &s, nil
}

// MustSpec is NewSpec for package-level model declarations.
func MustSpec(s Spec) *Spec {
	m, err := NewSpec(s)
	if err != nil {
		panic(err)
	}
	return m
}

func (s *Spec) Type() string { return s.DocumentType }
func (s *Spec) Version() int { return s.ModelVersion }

func (s *Spec) Scopes() []string {
	return slices.Sorted(maps.Keys(s.Initial))
}

func (s *Spec) InitialState(scope string) any {
	if f, ok := s.Initial[scope]; ok {
		return f()
	}
	return map[string]any{}
}

func (s *Spec) Action(t string) (*ActionSpec, bool) {
	a, ok := s.byType[t]
	return a, ok
}

func (s *Spec) Actions() []*ActionSpec { return s.ActionList }

func (s *Spec) Reduce(state any, call *Call) (any, error) {
	a, ok := s.byType[call.Action.Type]
	if !ok {
		return state, &UnknownActionType{DocumentType: s.DocumentType, Version: s.ModelVersion}
	}
	return a.Reduce(state, call)
}

// DecodeInput is the strict decoder most actions use: the input must be one
// JSON object of type T with no unknown fields, and validate (if not nil)
// must accept it. Failures are *InvalidInput with a message for the client.
func DecodeInput[T any](validate func(*T) error) func(json.RawMessage) (any, error) {
	return func(raw json.RawMessage) (any, error) {
		v := new(T)
		if err := decodeStrict(raw, v); err != nil {
			return nil, err
		}
		if validate != nil {
			if err := validate(v); err != nil {
				var ii *InvalidInput
				if errors.As(err, &ii) {
					return nil, ii
				}
				return nil, &InvalidInput{Reason: err.Error()}
			}
		}
		return v, nil
	}
}

func decodeStrict(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &InvalidInput{Reason: describeDecodeError(err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &InvalidInput{Reason: "unexpected data after the input object"}
	}
	return nil
}

func describeDecodeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q must be %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return fmt.Sprintf("input must be %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("malformed JSON at offset %d: %v", se.Offset, se.Error())
	}
	return err.Error()
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32", "uint", "uint64":
		return "an integer"
	case "float64", "float32":
		return "a number"
	}
	return goKind
}

// DecodeJSON decodes raw into a state tree (map[string]any, []any, string,
// float64, bool, nil). Empty input is an error: a JSON value is required.
func DecodeJSON(raw []byte) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, &InvalidInput{Reason: "a JSON value is required"}
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, &InvalidInput{Reason: describeDecodeError(err)}
	}
	return v, nil
}

// FirstError returns the first non-nil error, for input validators that
// check several fields in order.
func FirstError(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// CheckID validates a required identifier field of an input: non-empty and
// at most MaxIDLength bytes.
func CheckID(field, id string) error {
	if id == "" {
		return Invalidf("%s is required", field)
	}
	if len(id) > MaxIDLength {
		return Invalidf("%s is longer than %d bytes", field, MaxIDLength)
	}
	return nil
}

// CheckText refuses an input field that names something (an id, a name, a
// label) in text the log's names may not hold (oplog.CheckText: control
// characters, bidirectional overrides, bytes that are not UTF-8). The
// InvalidInput names the field and wraps the *oplog.UnsafeTextError, so the
// ingest API can point at the field. Call it from ActionSpec.Check, so that
// streams written before the rule still replay. Free text a model only
// stores is its data; whether to hold it to this rule is the model's choice.
func CheckText(field, s string) error {
	if err := oplog.CheckText(s); err != nil {
		return &InvalidInput{Reason: field + " " + err.Error(), Field: field, Err: err}
	}
	return nil
}

// TimestampPlacer is implemented by a model that asks for its ordinary jobs
// to be placed by timestamp, as a load job's operations are: a job's
// operation stamped before operations already stored is merged with them,
// and the merged tail re-appended with a skip (docs/sync.md). Off for a
// model that does not implement it; no built-in model does.
type TimestampPlacer interface {
	PlacesByTimestamp() bool
}

// PlacesByTimestamp reports whether m asks for placement by timestamp.
func PlacesByTimestamp(m Model) bool {
	p, ok := m.(TimestampPlacer)
	return ok && p.PlacesByTimestamp()
}
