package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
)

// TrailingDataError is DecodeStrict's error for data after the JSON value.
type TrailingDataError struct {
	Offset int64 // where the value ended
}

func (e *TrailingDataError) Error() string {
	return fmt.Sprintf("data after the JSON value at byte %d", e.Offset)
}

// TextError is DecodeStrict's error for JSON that is not Unicode text:
// bytes that are not UTF-8, or a \u escape of half a surrogate pair.
// encoding/json (v1) would decode either to U+FFFD, so two different ids
// would silently become the same one.
type TextError struct {
	Offset int    // the byte offset of the offending byte or escape
	Byte   byte   // the byte that is not UTF-8, when Escape is empty
	Escape string // the escape of half a surrogate pair, e.g. \ud800
}

// Error reads as a predicate of the text: "not valid UTF-8 (0xff at byte 3)".
func (e *TextError) Error() string {
	if e.Escape != "" {
		return fmt.Sprintf("not valid Unicode (%s at byte %d is half of a surrogate pair)", e.Escape, e.Offset)
	}
	return fmt.Sprintf("not valid UTF-8 (0x%02x at byte %d)", e.Byte, e.Offset)
}

// DecodeStrict decodes the one JSON value in data into v, a non-nil
// pointer, refusing object members v does not declare, anything after the
// value, and text that is not Unicode (a *TextError). Otherwise its
// semantics and errors are encoding/json's (v1) with DisallowUnknownFields,
// so callers word *json.SyntaxError, *json.UnmarshalTypeError and the rest
// as they always did; data after the value is a *TrailingDataError.
//
// Decoding the wire records is the largest CPU cost of the pipeline
// (docs/benchmarks.md), so DecodeStrict first tries encoding/json/v2, about
// three times faster. v2 is stricter than v1 — names match case-sensitively,
// duplicate names and invalid UTF-8 are refused — and whatever it accepts v1
// decodes to the same value (FuzzDecodeStrictAgrees in record checks that on
// every wire type). When v2 refuses, v is reset, the text is checked
// (CheckText: v1 alone would decode what is not Unicode to U+FFFD) and
// decoded again with v1, which gives the precise error, or accepts what
// only v1's leniency allows.
func DecodeStrict(data []byte, v any) error {
	if jsonv2.Unmarshal(data, v, jsonv2.RejectUnknownMembers(true)) == nil {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
	if err := CheckText(data); err != nil {
		return err
	}
	return decodeV1(data, v)
}

// CheckText returns a *TextError when data, JSON text, is not Unicode:
// bytes that are not UTF-8, or a \u escape of half a surrogate pair. It is
// exact for valid JSON; of anything else it reports what it can and leaves
// the rest to a decoder.
func CheckText(data []byte) error {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n == 1 {
			return &TextError{Offset: i, Byte: data[i]}
		}
		i += n
	}
	inString := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			if i+6 > len(data) || data[i+1] != 'u' {
				i++
				continue
			}
			switch u := hex4(data[i+2 : i+6]); {
			case u >= 0xd800 && u <= 0xdbff:
				if i+12 <= len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
					if low := hex4(data[i+8 : i+12]); low >= 0xdc00 && low <= 0xdfff {
						i += 11
						continue
					}
				}
				return &TextError{Offset: i, Escape: string(data[i : i+6])}
			case u >= 0xdc00 && u <= 0xdfff:
				return &TextError{Offset: i, Escape: string(data[i : i+6])}
			}
			i += 5
		}
	}
	return nil
}

// hex4 reads the four hex digits of a \u escape; a byte that is not one
// makes it -1.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return -1
		}
	}
	return r
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
