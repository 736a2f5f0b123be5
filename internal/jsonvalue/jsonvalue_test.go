package jsonvalue_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/doclog/doclog/internal/jsonvalue"
)

func TestKind(t *testing.T) {
	for goKind, want := range map[string]string{"string": "a string", "int64": "an integer", "float64": "a number",
		"slice": "an array", "map": "an object", "bool": "a boolean", "chan": "a chan"} {
		require.Equal(t, want, jsonvalue.Kind(goKind))
	}
}

func TestNullAsAbsent(t *testing.T) {
	require.Nil(t, jsonvalue.NullAsAbsent(json.RawMessage("null")))
	require.Nil(t, jsonvalue.NullAsAbsent(json.RawMessage(" null\n")))
	require.Equal(t, json.RawMessage(`{"a":1}`), jsonvalue.NullAsAbsent(json.RawMessage(`{"a":1}`)))
}
