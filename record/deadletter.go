package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	oplog "github.com/doclog/doclog/log"
)

// MaxRawValueBytes bounds the copy of an undecodable record kept in its dead
// letter, so the dead letter of an oversized record still fits the topic.
const MaxRawValueBytes = 64 << 10

// DeadLetter records a job that cannot succeed, with where it came from, so
// an operator can inspect it and redrive it as a new job.
type DeadLetter struct {
	// Job is the decoded job; nil when the record could not be decoded.
	Job *Job `json:"job,omitempty"`
	// Undecodable holds the raw record when Job is nil.
	Undecodable *Undecodable `json:"undecodable,omitempty"`
	// Error is the terminal error; its name survives process and topic
	// boundaries.
	Error oplog.ErrorInfo `json:"error"`
	// ErrorType classifies Error.
	ErrorType ErrorType `json:"errorType"`
	// Attempts is how many times the job was tried (0 for a record that
	// never decoded).
	Attempts int `json:"attempts"`
	// Source is the job record's place in Kafka.
	Source Source `json:"source"`
	// FailedAt is when the executor gave up.
	FailedAt time.Time `json:"failedAt"`
}

// Undecodable is a record that could not be decoded as a job.
type Undecodable struct {
	// Value is the record's value, base64 in JSON, cut to MaxRawValueBytes.
	Value []byte `json:"value"`
	// Size is the value's full size in bytes; larger than len(Value) when
	// it was cut.
	Size int `json:"size"`
	// Truncated is set when Value holds only the first MaxRawValueBytes.
	Truncated bool `json:"truncated,omitempty"`
	// Reason is why it could not be decoded.
	Reason string `json:"reason"`
}

// Source is a record's place in Kafka.
type Source struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// Key is the record key as text (bytes that are not UTF-8 become
	// U+FFFD); jobs are keyed by documentId.
	Key string `json:"key"`
}

// SourceOf returns the record's place in Kafka.
func SourceOf(rec *kgo.Record) Source {
	return Source{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Key: string(rec.Key)}
}

// NewUndecodableDeadLetter builds the dead letter of a job record that
// failed to decode with err (a *DecodeError, normally).
func NewUndecodableDeadLetter(rec *kgo.Record, err error, failedAt time.Time) *DeadLetter {
	value := rec.Value
	truncated := len(value) > MaxRawValueBytes
	if truncated {
		value = value[:MaxRawValueBytes]
	}
	reason := err.Error()
	var de *DecodeError
	if errors.As(err, &de) {
		reason = de.Reason
	}
	return &DeadLetter{
		Undecodable: &Undecodable{Value: value, Size: len(rec.Value), Truncated: truncated, Reason: reason},
		Error:       oplog.ErrorInfo{Name: ErrorName, Message: err.Error()},
		ErrorType:   TypeOf(err),
		Source:      SourceOf(rec),
		FailedAt:    failedAt.UTC(),
	}
}

// Validate checks the record against the doclog.dead-letter.v1 contract.
func (d *DeadLetter) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ValidationError{Schema: SchemaDeadLetterV1, Field: field, Reason: fmt.Sprintf(format, args...), Type: ErrDecode}
	}
	switch {
	case (d.Job == nil) == (d.Undecodable == nil):
		return bad("job", "exactly one of job and undecodable must be set")
	case d.Undecodable != nil && d.Undecodable.Reason == "":
		return bad("undecodable.reason", "missing")
	case d.Undecodable != nil && d.Undecodable.Size < len(d.Undecodable.Value):
		return bad("undecodable.size", "%d is less than the %d bytes kept", d.Undecodable.Size, len(d.Undecodable.Value))
	case d.Error.Name == "":
		return bad("error.name", "missing")
	case d.Error.Message == "":
		return bad("error.message", "missing")
	case !d.ErrorType.Valid():
		return bad("errorType", "%q is not one of the dead-letter error types", d.ErrorType)
	case d.Attempts < 0:
		return bad("attempts", "negative (%d)", d.Attempts)
	case d.Source.Topic == "":
		return bad("source.topic", "missing")
	case d.Source.Partition < 0 || d.Source.Offset < 0:
		return bad("source", "partition %d, offset %d: neither may be negative", d.Source.Partition, d.Source.Offset)
	case d.FailedAt.IsZero():
		return bad("failedAt", "missing")
	}
	for c, depth := d.Error.Cause, 1; c != nil; c, depth = c.Cause, depth+1 {
		if c.Name == "" {
			return bad("error.cause", "a cause at depth %d has no name", depth)
		}
	}
	if d.Job != nil {
		if err := d.Job.Validate(); err != nil {
			return bad("job", "%s", err.Error())
		}
	}
	return nil
}

type deadLetterWire struct {
	Schema string `json:"schema"`
	DeadLetter
}

// NewDeadLetterRecord validates the dead letter and builds its record for
// topic, keyed like the job record it came from.
func NewDeadLetterRecord(topic string, d *DeadLetter) (*kgo.Record, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	// Dead letters are rare: encoding/json is fast enough here.
	value, err := json.Marshal(deadLetterWire{Schema: SchemaDeadLetterV1, DeadLetter: *d})
	if err != nil {
		return nil, fmt.Errorf("encode dead letter: %w", err)
	}
	key := d.Source.Key
	if d.Job != nil {
		key = d.Job.DocumentID
	}
	return newRecord(topic, key, SchemaDeadLetterV1, value), nil
}

// DecodeDeadLetter decodes a record from the dead-letter topic with the
// default Decoder.
func DecodeDeadLetter(rec *kgo.Record) (*DeadLetter, error) { return Decoder{}.DeadLetter(rec) }

// DeadLetter decodes a record from the dead-letter topic strictly.
func (dc Decoder) DeadLetter(rec *kgo.Record) (*DeadLetter, error) {
	if len(rec.Value) > dc.maxBytes() {
		return nil, tooLarge(SchemaDeadLetterV1, len(rec.Value), dc.maxBytes())
	}
	if err := checkHeader(rec, SchemaDeadLetterV1); err != nil {
		return nil, err
	}
	return ParseDeadLetter(rec.Value)
}

// ParseDeadLetter decodes a dead-letter record's value strictly.
func ParseDeadLetter(value []byte) (*DeadLetter, error) {
	var wire deadLetterWire
	if err := decodeStrict(SchemaDeadLetterV1, value, &wire); err != nil {
		return nil, err
	}
	if err := checkSchemaField(SchemaDeadLetterV1, wire.Schema, len(value)); err != nil {
		return nil, err
	}
	d := wire.DeadLetter
	if err := d.Validate(); err != nil {
		return nil, invalid(SchemaDeadLetterV1, len(value), err)
	}
	return &d, nil
}
