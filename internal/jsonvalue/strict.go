package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	jsonv2 "github.com/go-json-experiment/json"
)

// TrailingDataError is DecodeStrict's error for data after the JSON value.
type TrailingDataError struct {
	Offset int64 // where the value ended
}

func (e *TrailingDataError) Error() string {
	return fmt.Sprintf("data after the JSON value at byte %d", e.Offset)
}

// DecodeStrict decodes the one JSON value in data into v, a non-nil
// pointer, refusing object members v does not declare and anything after the
// value. Its semantics and errors are encoding/json's (v1) with
// DisallowUnknownFields, so callers word *json.SyntaxError,
// *json.UnmarshalTypeError and the rest as they always did; data after the
// value is a *TrailingDataError.
//
// Decoding the wire records is the largest CPU cost of the pipeline
// (docs/benchmarks.md), so DecodeStrict first tries encoding/json/v2, about
// three times faster. v2 is stricter than v1 — names match case-sensitively,
// duplicate names and invalid UTF-8 are refused — and whatever it accepts v1
// decodes to the same value (FuzzDecodeStrictAgrees in record checks that on
// every wire type). When v2 refuses, v is reset and decoded again with v1,
// which gives the precise error, or accepts what only v1's leniency allows,
// exactly as before the fast path existed.
func DecodeStrict(data []byte, v any) error {
	if jsonv2.Unmarshal(data, v, jsonv2.RejectUnknownMembers(true)) == nil {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
	return decodeV1(data, v)
}

// decodeV1 is DecodeStrict with encoding/json alone.
func decodeV1(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &TrailingDataError{Offset: dec.InputOffset()}
	}
	return nil
}

// CheckAgreement returns an error when DecodeStrict's premise fails for data
// decoded into any of the types the fresh functions make: v2 accepts it but
// v1 refuses it, or the two decode it differently. It is for the fuzz tests
// of the packages whose types DecodeStrict decodes.
func CheckAgreement(data []byte, fresh ...func() any) error {
	for _, f := range fresh {
		fast := f()
		if jsonv2.Unmarshal(data, fast, jsonv2.RejectUnknownMembers(true)) != nil {
			continue
		}
		slow := f()
		if err := decodeV1(data, slow); err != nil {
			return fmt.Errorf("v2 accepts %q as %T, v1 refuses it: %w", data, fast, err)
		}
		if !reflect.DeepEqual(slow, fast) {
			return fmt.Errorf("v1 and v2 decode %q differently: %+v against %+v", data, slow, fast)
		}
	}
	return nil
}
