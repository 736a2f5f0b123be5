// Package jsonvalue holds the JSON helpers the decoders of doclog's wire
// contracts (the Kafka records, the ingest API) share, so they decode
// strictly the same way (DecodeStrict), describe a value and treat null the
// same way.
package jsonvalue

import (
	"bytes"
	"encoding/json"
)

// Kind names the JSON kind a Go kind (reflect.Kind's String) decodes from,
// with its article, for error messages: "an integer", "an object".
func Kind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "a boolean"
	}
	return "a " + goKind
}

// NullAsAbsent treats an explicit JSON null like a missing field.
func NullAsAbsent(raw json.RawMessage) json.RawMessage {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	return raw
}
