package record

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/doclog/doclog/internal/jsonvalue"
	oplog "github.com/doclog/doclog/log"
)

// KindLoad stores operations another replica produced (sync): the job
// carries Operations instead of Actions, and the executor places them in
// the document's streams by timestamp (docs/sync.md).
const KindLoad Kind = "load"

// MaxLoadOperations bounds the operations one load job may carry.
const MaxLoadOperations = 10000

// LoadOperation is one operation of a load job as its origin stored it:
// its identity, its position in the origin's stream, and the hash of the
// origin's state after it. The action names the operation's scope; its
// timestampUtcMs is the timestamp placement orders by.
type LoadOperation struct {
	OpID string
	// Index is the operation's index in the origin's stream, Skip the
	// number of the origin's operations before it that it supersedes.
	Index int64
	Skip  int64
	// Hash is the origin's hash of the scope state after the operation.
	Hash   string
	Action oplog.Action
}

type loadOperationWire struct {
	OpID   string      `json:"opId"`
	Index  *int64      `json:"index"`
	Skip   *int64      `json:"skip"`
	Hash   string      `json:"hash"`
	Action *actionWire `json:"action"`
}

// validateLoad checks a job's operations: a load job carries at least one
// and no actions; any other kind carries none.
func (j *Job) validateLoad(checkRaw bool) error {
	bad := func(field string, t ErrorType, format string, args ...any) error {
		return &ValidationError{Schema: SchemaJobV1, Field: field, Reason: fmt.Sprintf(format, args...), Type: t}
	}
	if j.Kind != KindLoad {
		if len(j.Operations) > 0 {
			return bad("operations", ErrDecode, "only a load job carries operations")
		}
		return nil
	}
	if len(j.Actions) > 0 {
		return bad("actions", ErrDecode, "a load job carries operations, not actions (use [])")
	}
	if len(j.Operations) == 0 {
		return bad("operations", ErrInvalidAction, "a load job needs at least one operation")
	}
	if len(j.Operations) > MaxLoadOperations {
		return bad("operations", ErrDecode, "%d operations, more than the %d a load job may carry", len(j.Operations), MaxLoadOperations)
	}
	seen := make(map[string]int, len(j.Operations))
	for i := range j.Operations {
		op := &j.Operations[i]
		field := "operations[" + strconv.Itoa(i) + "]"
		if err := checkName(op.OpID); err != "" {
			return bad(field+".opId", ErrInvalidAction, "%s", err)
		}
		if k, ok := seen[op.OpID]; ok {
			return bad(field+".opId", ErrInvalidAction, "%q repeats the opId of operations[%d]", op.OpID, k)
		}
		seen[op.OpID] = i
		if op.Index < 0 {
			return bad(field+".index", ErrInvalidAction, "negative (%d)", op.Index)
		}
		if op.Skip < 0 || op.Skip > op.Index {
			return bad(field+".skip", ErrInvalidAction, "%d is outside 0..index (%d)", op.Skip, op.Index)
		}
		if err := checkName(op.Hash); err != "" {
			return bad(field+".hash", ErrInvalidAction, "%s", err)
		}
		if err := checkAction(field+".action", &op.Action, checkRaw); err != nil {
			return err
		}
	}
	return nil
}

// checkAction checks one action of a job, field naming it: its names, its
// timestamp and its raw JSON (input, context) when checkRaw.
func checkAction(field string, a *oplog.Action, checkRaw bool) error {
	bad := func(name string, format string, args ...any) error {
		return &ValidationError{Schema: SchemaJobV1, Field: field + "." + name, Reason: fmt.Sprintf(format, args...), Type: ErrInvalidAction}
	}
	for _, f := range []struct{ name, v string }{{"id", a.ID}, {"type", a.Type}, {"scope", a.Scope}} {
		if err := checkName(f.v); err != "" {
			return bad(f.name, "%s", err)
		}
	}
	if a.TimestampUtcMs < 0 {
		return bad("timestampUtcMs", "negative (%d)", a.TimestampUtcMs)
	}
	if checkRaw && len(a.Input) > 0 && !json.Valid(a.Input) {
		return bad("input", "not valid JSON")
	}
	if len(a.Context) > 0 && !isObject(a.Context, checkRaw) {
		return bad("context", "not a JSON object")
	}
	if sig := a.Signature; sig != nil {
		if f, why := checkSignature(sig); why != "" {
			return bad("signature."+f, "%s", why)
		}
	}
	return nil
}

// appendLoadOperations appends the operations field of a load job.
func (j *Job) appendLoadOperations(b []byte) []byte {
	if len(j.Operations) == 0 {
		return b
	}
	b = append(appendKey(b, "operations", false), '[')
	for i := range j.Operations {
		op := &j.Operations[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendStringField(append(b, '{'), "opId", op.OpID, true)
		b = appendIntField(b, "index", op.Index, false)
		b = appendIntField(b, "skip", op.Skip, false)
		b = appendStringField(b, "hash", op.Hash, false)
		b = appendAction(appendKey(b, "action", false), &op.Action)
		b = append(b, '}')
	}
	return append(b, ']')
}

// loadOperationsSize estimates the encoded size of the operations.
func (j *Job) loadOperationsSize() int {
	n := 0
	for i := range j.Operations {
		op := &j.Operations[i]
		n += 160 + len(op.OpID) + len(op.Hash) + len(op.Action.ID) + len(op.Action.Type) + len(op.Action.Scope) + len(op.Action.Input) + len(op.Action.Context)
	}
	return n
}

// parseLoadOperations converts the wire operations, naming the first one
// that lacks a required field.
func parseLoadOperations(ws []loadOperationWire) ([]LoadOperation, error) {
	if ws == nil {
		return nil, nil
	}
	out := make([]LoadOperation, len(ws))
	for i, w := range ws {
		field := "operations[" + strconv.Itoa(i) + "]"
		missing := func(name string) error {
			return &ValidationError{Schema: SchemaJobV1, Field: field + "." + name, Reason: "missing", Type: ErrInvalidAction}
		}
		switch {
		case w.Index == nil:
			return nil, missing("index")
		case w.Skip == nil:
			return nil, missing("skip")
		case w.Action == nil:
			return nil, missing("action")
		case w.Action.TimestampUtcMs == nil:
			return nil, missing("action.timestampUtcMs")
		}
		a := w.Action
		out[i] = LoadOperation{OpID: w.OpID, Index: *w.Index, Skip: *w.Skip, Hash: w.Hash, Action: oplog.Action{
			ID: a.ID, Type: a.Type, Scope: a.Scope, TimestampUtcMs: *a.TimestampUtcMs,
			Input: jsonvalue.NullAsAbsent(a.Input), Context: jsonvalue.NullAsAbsent(a.Context),
			Signature: a.Signature,
		}}
	}
	return out, nil
}
