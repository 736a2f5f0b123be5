package record

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/internal/jsonvalue"
	oplog "github.com/doclog/doclog/log"
)

// DefaultInlineOperationsBytes bounds a write-ready record that carries its
// operations: past it the operations are left out and OperationsOmitted is
// set, and projectors read them from the log. Small enough that a batch of
// announcements never nears the broker's message size.
const DefaultInlineOperationsBytes = 256 << 10

// WriteReady announces a committed job: what it wrote, where, with which
// hashes, and (up to a size bound) the operations themselves.
type WriteReady struct {
	JobID        string
	DocumentID   string
	DocumentType string
	Branch       string
	// Streams are the index ranges the job wrote, one per stream, with the
	// hash after each operation.
	Streams []StreamWrite
	// ConsistencyToken holds one coordinate per stream: its last index.
	ConsistencyToken oplog.ConsistencyToken
	// Operations are the job's operations in stream order, unless
	// OperationsOmitted.
	Operations []oplog.Operation
	// OperationsOmitted is set when the operations were left out to bound
	// the record's size; read them from the log by the streams' ranges.
	OperationsOmitted bool
	// SubmittedAtUtcMs is the job's submit time when known, and
	// WrittenAtUtcMs when its transaction committed: together they give the
	// submit→write-ready latency.
	SubmittedAtUtcMs int64
	WrittenAtUtcMs   int64
}

// StreamWrite is the run of indexes a job wrote to one stream.
type StreamWrite struct {
	oplog.StreamRange
	// Hashes are the scope state hashes after each operation, for indexes
	// FromIndex..ToIndex in order.
	Hashes []string `json:"hashes"`
}

// Validate checks the record against the doclog.write-ready.v1 contract.
func (w *WriteReady) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ValidationError{Schema: SchemaWriteReadyV1, Field: field, Reason: fmt.Sprintf(format, args...), Type: ErrDecode}
	}
	if err := checkUUID(w.JobID); err != "" {
		return bad("jobId", "%s", err)
	}
	for _, f := range []struct{ name, v string }{{"documentId", w.DocumentID}, {"documentType", w.DocumentType}, {"branch", w.Branch}} {
		if err := checkName(f.v); err != "" {
			return bad(f.name, "%s", err)
		}
	}
	if len(w.Streams) == 0 {
		return bad("streams", "a committed job wrote at least one stream")
	}
	total := int64(0)
	for i, s := range w.Streams {
		field := "streams[" + strconv.Itoa(i) + "]"
		switch {
		case s.Stream.DocumentID != w.DocumentID:
			return bad(field+".stream.documentId", "%q is not the record's document %q", s.Stream.DocumentID, w.DocumentID)
		case s.Stream.Branch != w.Branch:
			return bad(field+".stream.branch", "%q is not the record's branch %q", s.Stream.Branch, w.Branch)
		case checkName(s.Stream.Scope) != "":
			return bad(field+".stream.scope", "%s", checkName(s.Stream.Scope))
		case s.FromIndex < 0 || s.ToIndex < s.FromIndex:
			return bad(field, "index range %d..%d is empty or negative", s.FromIndex, s.ToIndex)
		case int64(len(s.Hashes)) != s.ToIndex-s.FromIndex+1:
			return bad(field+".hashes", "%d hashes for the %d operations of %d..%d", len(s.Hashes), s.ToIndex-s.FromIndex+1, s.FromIndex, s.ToIndex)
		}
		for k := range i {
			if w.Streams[k].Stream == s.Stream {
				return bad(field+".stream", "%s is listed twice", s.Stream)
			}
		}
		total += s.ToIndex - s.FromIndex + 1
	}
	coords := w.ConsistencyToken.Coordinates
	if len(coords) != len(w.Streams) {
		return bad("consistencyToken.coordinates", "%d coordinates for %d streams", len(coords), len(w.Streams))
	}
	for i, c := range coords {
		s := w.streamOf(c.Stream())
		if s == nil || s.ToIndex != c.Index {
			return bad("consistencyToken.coordinates["+strconv.Itoa(i)+"]", "%s at index %d is not the last index of a stream the job wrote", c.Stream(), c.Index)
		}
	}
	if w.OperationsOmitted {
		if len(w.Operations) > 0 {
			return bad("operations", "present although operationsOmitted is set")
		}
	} else {
		if int64(len(w.Operations)) != total {
			return bad("operations", "%d operations for index ranges that cover %d", len(w.Operations), total)
		}
		for i := range w.Operations {
			op := &w.Operations[i]
			field := "operations[" + strconv.Itoa(i) + "]"
			if err := oplog.ValidateOperation(op); err != nil {
				return bad(field, "%s", err.Error())
			}
			s := w.streamOf(op.Stream())
			switch {
			case op.JobID != w.JobID:
				return bad(field+".jobId", "%q is not the record's job %q", op.JobID, w.JobID)
			case s == nil:
				return bad(field, "stream %s is not among the record's streams", op.Stream())
			case op.Index < s.FromIndex || op.Index > s.ToIndex:
				return bad(field+".index", "%d is outside %d..%d of %s", op.Index, s.FromIndex, s.ToIndex, op.Stream())
			case op.Hash != s.Hashes[op.Index-s.FromIndex]:
				return bad(field+".hash", "differs from the stream's hash at index %d", op.Index)
			}
		}
	}
	if w.SubmittedAtUtcMs < 0 || w.WrittenAtUtcMs < 0 {
		return bad("writtenAtUtcMs", "timestamps must not be negative")
	}
	return nil
}

func (w *WriteReady) streamOf(k oplog.StreamKey) *StreamWrite {
	for i := range w.Streams {
		if w.Streams[i].Stream == k {
			return &w.Streams[i]
		}
	}
	return nil
}

// AppendJSON appends the record's doclog.write-ready.v1 JSON to dst, with
// the operations unless omitOperations or w.OperationsOmitted.
func (w *WriteReady) AppendJSON(dst []byte, omitOperations bool) []byte {
	omit := omitOperations || w.OperationsOmitted
	b := appendStringField(append(dst, '{'), "schema", SchemaWriteReadyV1, true)
	b = appendStringField(b, "jobId", w.JobID, false)
	b = appendStringField(b, "documentId", w.DocumentID, false)
	b = appendStringField(b, "documentType", w.DocumentType, false)
	b = appendStringField(b, "branch", w.Branch, false)
	b = append(appendKey(b, "streams", false), '[')
	for i := range w.Streams {
		s := &w.Streams[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendStreamKey(appendKey(append(b, '{'), "stream", true), s.Stream)
		b = appendIntField(b, "fromIndex", s.FromIndex, false)
		b = appendIntField(b, "toIndex", s.ToIndex, false)
		b = appendStrings(appendKey(b, "hashes", false), s.Hashes)
		b = append(b, '}')
	}
	b = append(b, ']')
	b = append(appendKey(append(appendKey(b, "consistencyToken", false), '{'), "coordinates", true), '[')
	for i, c := range w.ConsistencyToken.Coordinates {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendStringField(append(b, '{'), "documentId", c.DocumentID, true)
		b = appendStringField(b, "scope", c.Scope, false)
		b = appendStringField(b, "branch", c.Branch, false)
		b = appendIntField(b, "index", c.Index, false)
		b = append(b, '}')
	}
	b = append(b, ']', '}')
	if omit {
		b = append(appendKey(b, "operationsOmitted", false), "true"...)
	} else {
		b = append(appendKey(b, "operations", false), '[')
		for i := range w.Operations {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendOperation(b, &w.Operations[i])
		}
		b = append(b, ']')
	}
	if w.SubmittedAtUtcMs != 0 {
		b = appendIntField(b, "submittedAtUtcMs", w.SubmittedAtUtcMs, false)
	}
	b = appendIntField(b, "writtenAtUtcMs", w.WrittenAtUtcMs, false)
	return append(b, '}')
}

func (w *WriteReady) sizeHint() int {
	n := 256 + len(w.JobID) + 2*len(w.DocumentID) + len(w.DocumentType)
	for i := range w.Streams {
		n += 160 + 2*len(w.DocumentID) + 48*len(w.Streams[i].Hashes)
	}
	if !w.OperationsOmitted {
		for i := range w.Operations {
			op := &w.Operations[i]
			n += 420 + len(op.DocumentID) + len(op.DocumentType) + len(op.Action.ID) + len(op.Action.Type) + len(op.Action.Input) + len(op.Action.Context)
		}
	}
	return n
}

// NewWriteReadyRecord validates the record and builds it for topic (key =
// documentId). When the record with its operations would exceed
// inlineLimit bytes (0: DefaultInlineOperationsBytes), the operations are
// left out and operationsOmitted is set; w itself is not changed.
func NewWriteReadyRecord(topic string, w *WriteReady, inlineLimit int) (*kgo.Record, error) {
	if inlineLimit <= 0 {
		inlineLimit = DefaultInlineOperationsBytes
	}
	if err := w.Validate(); err != nil {
		return nil, err
	}
	value := w.AppendJSON(make([]byte, 0, min(w.sizeHint(), inlineLimit+1024)), false)
	if len(value) > inlineLimit && !w.OperationsOmitted {
		value = w.AppendJSON(value[:0], true)
	}
	if len(value) > DefaultMaxSize {
		return nil, &ValidationError{Schema: SchemaWriteReadyV1, Reason: fmt.Sprintf("%d bytes encoded without operations, more than %d", len(value), DefaultMaxSize), Type: ErrRecordTooLarge}
	}
	return newRecord(topic, w.DocumentID, SchemaWriteReadyV1, value), nil
}

type writeReadyWire struct {
	Schema            string                 `json:"schema"`
	JobID             string                 `json:"jobId"`
	DocumentID        string                 `json:"documentId"`
	DocumentType      string                 `json:"documentType"`
	Branch            string                 `json:"branch"`
	Streams           []StreamWrite          `json:"streams"`
	ConsistencyToken  oplog.ConsistencyToken `json:"consistencyToken"`
	Operations        []oplog.Operation      `json:"operations"`
	OperationsOmitted bool                   `json:"operationsOmitted"`
	SubmittedAtUtcMs  int64                  `json:"submittedAtUtcMs"`
	WrittenAtUtcMs    int64                  `json:"writtenAtUtcMs"`
}

// DecodeWriteReady decodes a record from the write-ready topic with the
// default Decoder.
func DecodeWriteReady(rec *kgo.Record) (*WriteReady, error) { return Decoder{}.WriteReady(rec) }

// WriteReady decodes a record from the write-ready topic strictly.
func (d Decoder) WriteReady(rec *kgo.Record) (*WriteReady, error) {
	if len(rec.Value) > d.maxBytes() {
		return nil, tooLarge(SchemaWriteReadyV1, len(rec.Value), d.maxBytes())
	}
	if err := checkHeader(rec, SchemaWriteReadyV1); err != nil {
		return nil, err
	}
	return ParseWriteReady(rec.Value)
}

// ParseWriteReady decodes a write-ready record's value strictly.
func ParseWriteReady(value []byte) (*WriteReady, error) {
	var wire writeReadyWire
	if err := decodeStrict(SchemaWriteReadyV1, value, &wire); err != nil {
		return nil, err
	}
	if err := checkSchemaField(SchemaWriteReadyV1, wire.Schema, len(value)); err != nil {
		return nil, err
	}
	w := &WriteReady{
		JobID: wire.JobID, DocumentID: wire.DocumentID, DocumentType: wire.DocumentType, Branch: wire.Branch,
		Streams: wire.Streams, ConsistencyToken: wire.ConsistencyToken, Operations: wire.Operations,
		OperationsOmitted: wire.OperationsOmitted, SubmittedAtUtcMs: wire.SubmittedAtUtcMs, WrittenAtUtcMs: wire.WrittenAtUtcMs,
	}
	for i := range w.Operations {
		a := &w.Operations[i].Action
		a.Input, a.Context = jsonvalue.NullAsAbsent(a.Input), jsonvalue.NullAsAbsent(a.Context)
	}
	if err := w.Validate(); err != nil {
		return nil, invalid(SchemaWriteReadyV1, len(value), err)
	}
	return w, nil
}
