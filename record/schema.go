package record

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/internal/jsonvalue"
	oplog "github.com/doclog/doclog/log"
)

// HeaderSchema is the Kafka record header naming a record's schema.
const HeaderSchema = "doclog-schema"

// Schema versions this build reads and writes. A version names a record kind
// and a number: doclog.<kind>.v<n>.
const (
	SchemaJobV1        = "doclog.job.v1"
	SchemaWriteReadyV1 = "doclog.write-ready.v1"
	SchemaDeadLetterV1 = "doclog.dead-letter.v1"
)

// Header values shared by every record built here; kgo never writes to them.
var (
	headerJobV1        = []byte(SchemaJobV1)
	headerWriteReadyV1 = []byte(SchemaWriteReadyV1)
	headerDeadLetterV1 = []byte(SchemaDeadLetterV1)
)

func newRecord(topic, key, schema string, value []byte) *kgo.Record {
	var h []byte
	switch schema {
	case SchemaJobV1:
		h = headerJobV1
	case SchemaWriteReadyV1:
		h = headerWriteReadyV1
	case SchemaDeadLetterV1:
		h = headerDeadLetterV1
	}
	return &kgo.Record{
		Topic:   topic,
		Key:     []byte(key),
		Value:   value,
		Headers: []kgo.RecordHeader{{Key: HeaderSchema, Value: h}},
	}
}

// SchemaOf returns the record's doclog-schema header, or "" without one.
func SchemaOf(rec *kgo.Record) string {
	for _, h := range rec.Headers {
		if h.Key == HeaderSchema {
			return string(h.Value)
		}
	}
	return ""
}

// checkHeader accepts a record whose schema header is want, or that has no
// schema header at all: a producer using a plain Kafka client may not set
// headers, and the JSON's own schema field still decides.
func checkHeader(rec *kgo.Record, want string) error {
	n := 0
	for _, h := range rec.Headers {
		if h.Key != HeaderSchema {
			continue
		}
		n++
		if n > 1 {
			return &DecodeError{Schema: want, Size: len(rec.Value), Type: ErrDecode, Reason: "more than one " + HeaderSchema + " header"}
		}
		if got := string(h.Value); got != want {
			return &DecodeError{Schema: want, Size: len(rec.Value), Type: ErrDecode, Reason: HeaderSchema + " header: " + schemaMismatch(want, got)}
		}
	}
	return nil
}

func checkSchemaField(want, got string, size int) error {
	switch got {
	case want:
		return nil
	case "":
		return &DecodeError{Schema: want, Size: size, Type: ErrDecode, Reason: `schema: missing (want "` + want + `")`}
	}
	return &DecodeError{Schema: want, Size: size, Type: ErrDecode, Reason: "schema: " + schemaMismatch(want, got)}
}

// schemaMismatch says whether got is another version of the wanted kind or
// another kind altogether.
func schemaMismatch(want, got string) string {
	kind := want[:strings.LastIndexByte(want, '.')+1]
	if strings.HasPrefix(got, kind) {
		return fmt.Sprintf("unsupported schema version %q; this build reads %q", got, want)
	}
	return fmt.Sprintf("%q is not a %s record", got, want)
}

func tooLarge(schema string, size, limit int) error {
	return &DecodeError{Schema: schema, Size: size, Type: ErrRecordTooLarge,
		Reason: fmt.Sprintf("record value of %d bytes exceeds the limit of %d", size, limit)}
}

// invalid wraps a validation failure found while decoding.
func invalid(schema string, size int, err error) error {
	var ve *ValidationError
	if !errors.As(err, &ve) {
		return &DecodeError{Schema: schema, Size: size, Type: ErrDecode, Reason: err.Error(), Err: err}
	}
	reason := ve.Reason
	if ve.Field != "" {
		reason = ve.Field + ": " + ve.Reason
	}
	return &DecodeError{Schema: schema, Size: size, Type: ve.Type, Reason: reason, Err: err}
}

// decodeStrict decodes one JSON value into v, refusing unknown fields and
// trailing data. A misspelt optional field is thereby an error instead of a
// silently ignored one.
func decodeStrict(schema string, data []byte, v any) error {
	fail := func(reason string, err error) error {
		return &DecodeError{Schema: schema, Size: len(data), Type: ErrDecode, Reason: reason, Err: err}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return fail("empty record value", nil)
	}
	if err := jsonvalue.DecodeStrict(data, v); err != nil {
		var (
			td *jsonvalue.TrailingDataError
			te *jsonvalue.TextError
		)
		switch {
		case errors.As(err, &td):
			return fail(fmt.Sprintf("malformed JSON: data after the record's JSON value at byte %d", td.Offset), err)
		case errors.As(err, &te):
			return fail("record value is "+te.Error(), err)
		}
		return fail(jsonReason(err), err)
	}
	return nil
}

func jsonReason(err error) string {
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
		de *DecodeError
		ve *ValidationError
	)
	switch {
	case errors.As(err, &de):
		// Only a nested job decodes itself (Job.UnmarshalJSON).
		return "job: " + de.Reason
	case errors.As(err, &ve):
		return ve.Field + ": " + ve.Reason
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Sprintf("the record is a JSON %s, not an object", te.Value)
		}
		return fmt.Sprintf("%s: a JSON %s where %s is expected", te.Field, te.Value, jsonvalue.Kind(te.Type.Kind().String()))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: unexpected end of the record value"
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return msg
}

// isObject reports whether raw is a JSON object; with checkRaw false it
// trusts raw to be valid JSON and looks only at its first byte.
func isObject(raw []byte, checkRaw bool) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && (!checkRaw || json.Valid(raw))
}

// checkUUID returns why s is not a UUID in canonical lowercase form, or "".
func checkUUID(s string) string {
	if s == "" {
		return "missing"
	}
	if len(s) != 36 {
		return fmt.Sprintf("%q is not a UUID (8-4-4-4-12 lowercase hex digits)", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return fmt.Sprintf("%q is not a UUID (8-4-4-4-12 lowercase hex digits)", s)
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return fmt.Sprintf("%q is not a UUID (8-4-4-4-12 lowercase hex digits)", s)
			}
		}
	}
	return ""
}

// checkName returns why s is not a usable name (id, type, scope, branch), or
// "": the shape checkShape asks for, in text oplog.CheckText accepts.
func checkName(s string) string {
	if why := checkShape(s); why != "" {
		return why
	}
	if err := oplog.CheckText(s); err != nil {
		return err.Error()
	}
	return ""
}

// checkShape returns why s is not a name by its length alone, or "".
func checkShape(s string) string {
	if s == "" {
		return "missing"
	}
	if n := utf8.RuneCountInString(s); n > MaxNameLength {
		return fmt.Sprintf("%d characters, more than the %d allowed", n, MaxNameLength)
	}
	return ""
}

// checkSignature returns the field of a signature that breaks the contract
// and why, or "" "": whether it verifies is the verifier's question (package
// signing), not the record's.
func checkSignature(s *oplog.Signature) (field, why string) {
	if why := checkName(s.KeyID); why != "" {
		return "keyId", why
	}
	if why := checkName(s.Algorithm); why != "" {
		return "algorithm", why
	}
	if s.Value == "" {
		return "value", "missing"
	}
	if _, err := base64.StdEncoding.DecodeString(s.Value); err != nil {
		return "value", "not standard base64 with padding"
	}
	return "", ""
}
