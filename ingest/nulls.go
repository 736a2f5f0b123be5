package ingest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
)

// members holds what encoding/json cannot tell apart: a member left out, a
// member given as null and a string member given empty all decode to the
// same zero value.
type members map[string]json.RawMessage

// membersOf reads the members of the object raw, which has passed
// decodeStrict; nil for anything but an object, which decodeStrict refused.
func membersOf(raw []byte) members {
	var m members
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

// mayHoldNull reports whether a JSON text may hold a null anywhere: one
// without the four letters cannot (the literal has no escaped form), so it
// needs no second decoding into members to find one, which costs about as
// much as the strict decoding itself.
func mayHoldNull(raw []byte) bool { return bytes.Contains(raw, []byte("null")) }

// refuseNulls refuses a JSON null as the value of any member but those named
// nullable, naming the member under prefix. Without it a client's null would
// pass for a field left out, which the API's document does not allow:
// `"queueHint": null` is a mistake to report, not an empty list.
func (m members) refuseNulls(prefix string, nullable ...string) *APIError {
	var nulls []string
	for name, v := range m {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) && !slices.Contains(nullable, name) {
			nulls = append(nulls, name)
		}
	}
	if len(nulls) == 0 {
		return nil
	}
	slices.Sort(nulls)
	return fieldError(http.StatusBadRequest, CodeMalformedJSON, join(prefix, nulls[0]), "must not be null; leave the field out instead")
}

// refuseEmpty refuses an empty string as the value of the members named,
// whose absence means a default: an empty one is a mistake, not a request
// for the default.
func (m members) refuseEmpty(prefix string, names ...string) *APIError {
	for _, name := range names {
		if v, ok := m[name]; ok && bytes.Equal(bytes.TrimSpace(v), []byte(`""`)) {
			return fieldError(http.StatusUnprocessableEntity, CodeInvalidField, join(prefix, name), "empty; leave it out for the default")
		}
	}
	return nil
}
