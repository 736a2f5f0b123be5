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

func TestDecodeStrict(t *testing.T) {
	t.Parallel()
	type inner struct {
		N int64 `json:"n"`
	}
	type body struct {
		Name  string          `json:"name"`
		Raw   json.RawMessage `json:"raw"`
		Inner []inner         `json:"inner"`
	}
	for _, tc := range []struct {
		name, in string
		want     body
		err      string // error text as encoding/json (v1) words it
	}{
		{name: "fast path", in: `{"name":"a","raw":{"x": [1, 2]},"inner":[{"n":7}]}`,
			want: body{Name: "a", Raw: json.RawMessage(`{"x": [1, 2]}`), Inner: []inner{{N: 7}}}},
		{name: "v1 leniency: names match case-insensitively", in: `{"NAME":"a"}`, want: body{Name: "a"}},
		{name: "v1 leniency: the last duplicate wins", in: `{"name":"a","name":"b"}`, want: body{Name: "b"}},
		{name: "unknown field", in: `{"name":"a","nam":"b"}`, err: `json: unknown field "nam"`},
		{name: "unknown nested field", in: `{"inner":[{"n":1,"m":2}]}`, err: `json: unknown field "m"`},
		{name: "wrong type", in: `{"inner":[{"n":"1"}]}`, err: "json: cannot unmarshal string into Go struct field inner.inner.n of type int64"},
		{name: "syntax", in: `{"name":}`, err: "invalid character '}' looking for beginning of value"},
		{name: "trailing data", in: `{"name":"a"} {}`, err: "data after the JSON value at byte 14"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got body
			err := jsonvalue.DecodeStrict([]byte(tc.in), &got)
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.NoError(t, jsonvalue.CheckAgreement([]byte(tc.in), func() any { return new(body) }))
		})
	}
}

// Text encoding/json (v1) would decode to U+FFFD is refused, so two
// different ids never decode to the same one; what is Unicode, however
// escaped, decodes.
func TestDecodeStrictRefusesTextThatIsNotUnicode(t *testing.T) {
	t.Parallel()
	type body struct {
		Name string          `json:"name"`
		Raw  json.RawMessage `json:"raw"`
	}
	for in, want := range map[string]string{
		"{\"name\":\"d\xff\"}":               "not valid UTF-8 (0xff at byte 10)",
		"{\"name\":\"ok\",\"raw\":\"\xc3\"}": "not valid UTF-8 (0xc3 at byte 20)",
		`{"name":"d\ud800"}`:                 `not valid Unicode (\ud800 at byte 10 is half of a surrogate pair)`,
		`{"name":"d\uDC00"}`:                 `not valid Unicode (\uDC00 at byte 10 is half of a surrogate pair)`,
		`{"name":"\ud800\u0041"}`:            `not valid Unicode (\ud800 at byte 9 is half of a surrogate pair)`,
		`{"name":"\ud800\ud800\udc00"}`:      `not valid Unicode (\ud800 at byte 9 is half of a surrogate pair)`,
		`{"raw":{"x":["\udfff"]}}`:           `not valid Unicode (\udfff at byte 14 is half of a surrogate pair)`,
		`{"NAME":"\ud800"}`:                  `not valid Unicode (\ud800 at byte 9 is half of a surrogate pair)`,
	} {
		var v body
		err := jsonvalue.DecodeStrict([]byte(in), &v)
		var te *jsonvalue.TextError
		require.ErrorAs(t, err, &te, "%q", in)
		require.EqualError(t, err, want, "%q", in)
		require.Equal(t, body{}, v, "%q: nothing decoded", in)
	}
	for in, want := range map[string]string{
		`{"name":"\ud83d\ude00"}`:       "😀",
		`{"name":"\\ud800"}`:            `\ud800`,
		`{"name":"\"\\\ud83d\ude00"}`:   `"\` + "😀",
		`{"name":"\ufffd"}`:             "\ufffd",
		`{"NAME":"\u00e9\ud83d\ude00"}`: "é😀",
	} {
		var v body
		require.NoError(t, jsonvalue.DecodeStrict([]byte(in), &v), "%q", in)
		require.Equal(t, want, v.Name, "%q", in)
	}
}

// CheckText reads text that is not JSON without failing on it, and still
// finds what is not Unicode there.
func TestCheckTextOnBrokenJSON(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`"\`, `"\u`, `"\u12`, `"\uzzzz"`, `\ud800`, `{"a":"\\"}`} {
		require.NotPanics(t, func() { require.NoError(t, jsonvalue.CheckText([]byte(in)), "%q", in) })
	}
	for _, in := range []string{`"\ud800\`, `"\ud800\u12`, `"\ud800\uzzzz`} {
		require.NotPanics(t, func() { require.Error(t, jsonvalue.CheckText([]byte(in)), "%q", in) })
	}
	require.EqualError(t, jsonvalue.CheckText([]byte(`{"a":"\ud800`)), `not valid Unicode (\ud800 at byte 6 is half of a surrogate pair)`)
	require.EqualError(t, jsonvalue.CheckText([]byte("{\"a\"\x80")), `not valid UTF-8 (0x80 at byte 4)`)
}
